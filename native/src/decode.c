/* decode.c - the public context handle of k3.h: a context owns one sequence's
 * state (forward_state), its scratch and thread pool, and feeds tokens through
 * forward_run() in batches. Prefill, one-token steps and batched verification are all
 * k3_decode() with different n; the kernels make them agree bit for bit. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"


void k3_context_params_default(k3_context_params *p) {
    p->max_context = 4096;
    p->n_threads = 1;
    p->batch = FORWARD_DEFAULT_BATCH;
}

static void *alloc_floats(long n) {
    return n > 0 ? calloc((size_t)n, sizeof(float)) : calloc(1, sizeof(float));
}

k3_status k3_context_open(k3_model *km, const k3_context_params *params, k3_context **out, char *detail,
                          size_t detail_size) {
    k3_error err = {K3_OK, ""};
    k3_context_params p;
    k3_context_params_default(&p);
    if (params)
        p = *params;
    *out = NULL;
    if (p.max_context < 1 || p.n_threads < 1 || p.batch < 0) {
        error_set(&err, K3_ERR_INVALID_ARGUMENT,
                  "context parameters: max_context %d, n_threads %d, batch %d: each must be at least 1 (batch: or "
                  "K3_BATCH_AUTO, 0)",
                  p.max_context, p.n_threads, p.batch);
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    const model *m = km->m;
    if (p.batch == K3_BATCH_AUTO) { /* sized once, here: the context allocates for it */
        k3_plan plan;
        k3_model_plan(km, &p, &plan);
        p.batch = plan.batch;
    }
    if (model_check_context(m, &p, &err) != K3_OK) { /* before allocating anything */
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    k3_context *c = calloc(1, sizeof *c);
    if (!c) {
        error_set(&err, K3_ERR_OUT_OF_MEMORY, "context: out of memory");
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    c->model = km;
    c->params = p;
    c->next = -1;
    c->checkpoint_limit = (size_t)256 << 20;
    c->spec_extra_seconds = -1.0; /* not measured: generate.c probes it */
    c->impl = kernels_best();
    c->state.capacity = p.max_context;
    const long kda = forward_kda_state_floats(m), mla = forward_mla_cache_floats(m, p.max_context);
    const long scratch = forward_scratch_floats(m, p.batch, p.max_context);
    c->state.kda = alloc_floats(kda);
    c->state.mla = alloc_floats(mla);
    c->scratch = alloc_floats(scratch);
    c->logits = alloc_floats((long)forward_logit_rows(p.batch) * m->vocab);
    c->last_logits = alloc_floats(m->vocab);
    c->tokens = calloc((size_t)p.max_context, sizeof(int32_t));
    if (!c->state.kda || !c->state.mla || !c->scratch || !c->logits || !c->last_logits || !c->tokens) {
        error_set(&err, K3_ERR_OUT_OF_MEMORY,
                  "context for %d positions: out of memory allocating %.1f MB (KDA state %.1f MB, MLA cache %.1f MB, "
                  "scratch %.1f MB, logits %.1f MB)",
                  p.max_context, (kda + mla + scratch + (long)(forward_logit_rows(p.batch) + 1) * m->vocab) * 4e-6,
                  kda * 4e-6, mla * 4e-6, scratch * 4e-6, (long)(forward_logit_rows(p.batch) + 1) * m->vocab * 4e-6);
        k3_context_close(c);
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    if (threads_new(p.n_threads, &c->pool, &err) != K3_OK) {
        k3_context_close(c);
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    *out = c;
    return K3_OK;
}

void k3_context_close(k3_context *c) {
    if (!c)
        return;
    context_checkpoints_free(c);
    context_snapshot_free(&c->rollback);
    free(c->journal);
    free(c->verify_logits);
    threads_free(c->pool);
    free(c->state.kda);
    free(c->state.mla);
    free(c->scratch);
    free(c->logits);
    free(c->last_logits);
    free(c->tokens);
    free(c);
}

const char *k3_context_error(const k3_context *c) {
    return c->err.detail;
}

int k3_context_length(const k3_context *c) {
    return c->length;
}

const int32_t *k3_context_tokens(const k3_context *c) {
    return c->tokens;
}

void context_clear(k3_context *c) {
    const model *m = c->model->m;
    memset(c->state.kda, 0, sizeof(float) * (size_t)forward_kda_state_floats(m));
    /* MLA rows past the length are never read, so the cache needs no clearing. */
    c->length = 0;
    c->next = -1;
    c->last_logits_valid = 0;
}

void k3_context_reset(k3_context *c) {
    context_clear(c);
}

void context_enter(k3_context *c) {
    atomic_fetch_add(&c->call_seq, 1); /* now odd: running */
}

void context_leave(k3_context *c) {
    atomic_fetch_add(&c->call_seq, 1); /* now even: idle; any cancel aimed at it is spent */
}

int context_cancel_requested(k3_context *c) {
    const unsigned seq = atomic_load(&c->call_seq);
    return (seq & 1u) && atomic_load(&c->cancel_seq) == seq;
}

void k3_counters_get(k3_counters *out) {
    out->weight_bytes_read = kernels_weight_bytes_read();
    out->multiply_adds = kernels_multiply_adds();
}

double k3_fma_peak(int n_threads, double seconds, const char **kernels) {
    const kernels_impl *impl = kernels_best();
    if (kernels)
        *kernels = impl->name;
    return kernels_fma_peak(impl, n_threads, seconds);
}

void k3_cancel(k3_context *c) {
    const unsigned seq = atomic_load(&c->call_seq);
    if (seq & 1u)
        atomic_store(&c->cancel_seq, seq);
}

k3_status context_decode(k3_context *c, const int32_t *ids, int n, float *logits, int n_logits, int32_t *argmax) {
    const model *m = c->model->m;
    error_clear(&c->err);
    if (n < 0 || (n > 0 && !ids) || n_logits < 0 || n_logits > n || (n_logits > 0 && !logits))
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "k3_decode: n %d, n_logits %d, logits %s, ids %s", n,
                         n_logits, logits ? "given" : "NULL", ids ? "given" : "NULL");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return error_set(&c->err, K3_ERR_TOKEN, "token id %d at input position %d is outside the vocabulary [0, %d)",
                             ids[i], i, m->vocab);
    if (c->length + n > c->params.max_context)
        return error_set(&c->err, K3_ERR_CONTEXT_FULL,
                         "the sequence would reach %d tokens (%d held + %d new), past the context of %d positions",
                         c->length + n, c->length, n, c->params.max_context);
    const int batch = c->params.batch, logit_rows = forward_logit_rows(batch);
    const int first_logit = n - n_logits; /* first position whose logits the caller wants */
    for (int done = 0; done < n;) {
        if (context_cancel_requested(c))
            return error_set(&c->err, K3_ERR_CANCELLED, "cancelled after %d of %d tokens", done, n);
        int nb = n - done < batch ? n - done : batch;
        /* Rows to compute: every one for argmax, the wanted ones, and always the very last
         * (its argmax is the context's next token). A pass computes at most logit_rows of
         * them, so one wanting many ends early: pass sizes never change a bit. */
        int first_out = argmax ? 0 : first_logit - done;
        if (first_out < 0)
            first_out = 0;
        if (first_out < nb && nb - first_out > logit_rows)
            nb = first_out + logit_rows;
        if (done + nb == n && first_out > nb - 1)
            first_out = nb - 1;
        const int have_rows = first_out < nb;
        const k3_status fs = forward_run(m, &c->state, c->length, ids + done, nb, first_out,
                                         have_rows ? c->logits : NULL, c->scratch, c->impl, c->pool, &c->err);
        if (fs != K3_OK) { /* a failed read (streamed weights): the state is partly advanced */
            context_clear(c);
            return fs;
        }
        for (int i = first_out; i < nb; i++) {
            const float *row = c->logits + (long)(i - first_out) * m->vocab;
            const int pos = done + i;
            if (argmax)
                argmax[pos] = c->impl->argmax(row, m->vocab);
            if (logits && pos >= first_logit)
                memcpy(logits + (long)(pos - first_logit) * m->vocab, row, sizeof(float) * m->vocab);
            if (pos == n - 1) {
                c->next = argmax ? argmax[pos] : c->impl->argmax(row, m->vocab);
                memcpy(c->last_logits, row, sizeof(float) * m->vocab);
                c->last_logits_valid = 1;
            }
        }
        memcpy(c->tokens + c->length, ids + done, sizeof(int32_t) * nb);
        c->length += nb;
        done += nb;
    }
    return K3_OK;
}

void k3_context_observe(k3_context *c, k3_activation_fn fn, void *user) {
    c->state.observe = fn;
    c->state.observe_user = user;
}

k3_status k3_decode(k3_context *c, const int32_t *ids, int n, float *logits, int n_logits, int32_t *argmax) {
    context_enter(c);
    const k3_status s = context_decode(c, ids, n, logits, n_logits, argmax);
    context_leave(c);
    return s;
}
