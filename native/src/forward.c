/* forward.c - the layer loop with block attention residuals (see forward.h).
 *
 * Per token, R holds the banked block sums (the raw embedding first) and P the running
 * sum of the current block. Before each attention and each FFN, and once before the final
 * norm, the layer input is a softmax mix over R + [P]: scores from the RMS-normalised
 * candidates (no gamma) dotted with a learned query, weights applied to the raw candidates.
 * At a block's first layer P is banked into R after the attention-site mix and restarted;
 * the FFN-site mix already includes this layer's attention output.
 *
 * With an owned trunk each layer is acquired from trunk.c before use and released after
 * (the next one is being read meanwhile), and embedding rows are read on demand; a model
 * that streams runs one forward pass at a time. A failed read ends the pass with its
 * status: the carried state is then partly advanced and must be discarded.
 *
 * A pass begins by checking that the shards are still the files loaded (model_check_files)
 * and arms a recovery point (fault.h): a read of mapped weights that faults because a shard
 * shrank during the pass jumps back there, and the pass fails with K3_ERR_IO naming the
 * file. What the pass held is let go on the way: the borrowed trunk layer here, an
 * expert-cache batch in moe.c, the pool's loop in threads.c, the stream lock below.
 *
 * With early expert reads on (k3_model_params.expert_prefetch), each MoE layer whose next
 * MoE layer is in memory also hands moe.c a guess of that layer's router input (moe_next),
 * from which the cache reads the experts it picks ahead; nothing computed depends on it.
 *
 * An observer (k3_context_observe) is shown each site's values as they are computed; it
 * reads them and changes nothing. */
#include "forward.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "fault.h"
#include "io.h"
#include "ops.h"

static int max_blocks(const model *m) {
    return m->attn_res_block > 0 ? m->n_layers / m->attn_res_block + 2 : 0;
}

long forward_kda_state_floats(const model *m) {
    return (long)m->n_kda * kda_state_floats(&m->kda);
}

long forward_mla_cache_floats(const model *m, int capacity) {
    return (long)m->n_mla * capacity * mla_cache_row_floats(&m->mla);
}

long forward_journal_floats(const model *m, int n) {
    return (long)m->n_kda * n * kda_journal_row_floats(&m->kda);
}

void forward_kda_advance(const model *m, forward_state *st, const float *journal, int capacity, int keep,
                         float *scratch, threads *pool) {
    const long state = kda_state_floats(&m->kda), rows = (long)capacity * kda_journal_row_floats(&m->kda);
    for (int i = 0; i < m->n_kda; i++)
        kda_advance_journal(&m->kda, st->kda + i * state, journal + i * rows, keep, scratch, pool);
}

static long mixer_scratch(const model *m, int n, int capacity) {
    long s = m->n_kda ? kda_scratch_floats(&m->kda, n) : 0;
    if (m->n_mla) {
        const long t = mla_scratch_floats(&m->mla, n, capacity);
        s = t > s ? t : s;
    }
    const long dense = moe_mlp_scratch_floats(m->dense_inter, n);
    s = dense > s ? dense : s;
    const long moe = m->moe.n_experts ? moe_scratch_floats(&m->moe, n) : 0;
    return moe > s ? moe : s;
}

long forward_scratch_floats(const model *m, int n, int capacity) {
    /* P, h, x, a: (n, d) each; R: (n, max_blocks, d); the banked blocks' sums of squares:
     * (n, max_blocks) doubles from the next 64-byte boundary; max_blocks + 1 spare floats (once the
     * mix's scores, which each thread now keeps on its stack; left so that the memory plan's
     * figures do not move); the chosen experts for an observer: (n, top_k) ints; the
     * mixers' scratch from the next 64-byte boundary, as the whole from its first (kernels.h:
     * the caller's buffer is calloc's, 16 bytes into a page). */
    return (long)n * m->hidden * (4 + max_blocks(m)) + 2L * n * max_blocks(m) + max_blocks(m) + 1 +
           (long)n * m->moe.top_k + 3 * KERNELS_ALIGN_FLOATS + mixer_scratch(m, n, capacity);
}

/* Shows one site to the observer, if any. layer -1: a site outside the layers. */
static void observe(const forward_state *st, const model_layer *ly, k3_site site, int layer, int start, int n,
                    int width, const float *values, const int *experts) {
    if (!st->observe)
        return;
    static const char *const suffix[] = {"", "input_layernorm", "self_attn", "post_attention_layernorm", "",
                                         "block_sparse_moe.gate"};
    char name[96];
    if (site == K3_SITE_EMBED)
        snprintf(name, sizeof name, "model.embed_tokens");
    else if (site == K3_SITE_FINAL_NORM)
        snprintf(name, sizeof name, "model.norm");
    else if (site == K3_SITE_LOGITS)
        snprintf(name, sizeof name, "lm_head");
    else
        snprintf(name, sizeof name, "model.layers.%d.%s", layer,
                 site == K3_SITE_FFN_OUTPUT ? (ly->is_moe ? "block_sparse_moe" : "mlp") : suffix[site]);
    const int attn_site = site == K3_SITE_ATTN_INPUT || site == K3_SITE_ATTN_OUTPUT;
    const char *kind = !ly ? NULL : attn_site ? (ly->is_kda ? "kda" : "mla") : ly->is_moe ? "moe" : "mlp";
    const k3_activation a = {site, layer, name, kind, start, n, width, values,
                             site == K3_SITE_ROUTING ? (const int32_t *)experts : NULL};
    st->observe(st->observe_user, &a);
}

/* out = mix of the candidates v[0..count) (each (d)) with the query vector w; squares[i]
 * holds the sum of squares of v[i] for i < count - 1 (the banked blocks'), the last
 * candidate's is computed here. */
static void res_mix(const float *const *v, const double *squares, int count, const float *w, int d, float eps,
                    float *score, float *out) {
    for (int i = 0; i < count; i++) {
        const double ss = i < count - 1 ? squares[i] : ops_sum_squares(v[i], d);
        const double inv = 1.0 / sqrt(ss / d + eps);
        score[i] = (float)ops_scaled_dot(v[i], inv, w, d);
    }
    ops_softmax(score, count);
    /* Candidates outer, so the inner loop runs along d in vectors; each out[j] still sums
     * the candidates in order. */
    for (int j = 0; j < d; j++)
        out[j] = 0.0f;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < d; j++)
            out[j] += score[i] * v[i][j];
}

typedef struct {
    const model *m;
    int n, d, n_banked;
    float *P, *R;
    /* (n, max_blocks) each banked block's sum of squares, taken when it is banked: every
     * later site's mix reads it instead of summing the block again (the sums were 3.7 % of
     * a 128-token prefill of small, most of them over blocks that no longer change). */
    double *squares;
} residuals;

/* A site's per-token work before a product: h[t] = Mix(R[t] + [P[t]], query) (or P[t]
 * when query is NULL), then x[t - first] = RMSNorm(h[t], gamma) for tokens [t0, t1).
 * Tokens are independent, so a batch's are split across the pool (1-thread prefill spent
 * about a tenth of its time here, which a second thread left serial); each token computes
 * the same bits on any thread. */
typedef struct {
    const residuals *r;
    const float *query, *gamma;
    float *h, *x;
    int first;
} site_job;

static void site_tokens(void *arg, int t0, int t1) {
    const site_job *j = arg;
    const residuals *r = j->r;
    const int d = r->d, nb = max_blocks(r->m);
    const float *cand[64];
    float score[64];
    for (int t = j->first + t0; t < j->first + t1; t++) {
        float *h = j->h + (long)t * d;
        if (!j->query) {
            memcpy(h, r->P + (long)t * d, sizeof(float) * d);
        } else {
            for (int i = 0; i < r->n_banked; i++)
                cand[i] = r->R + ((long)t * nb + i) * d;
            cand[r->n_banked] = r->P + (long)t * d;
            res_mix(cand, r->squares + (long)t * nb, r->n_banked + 1, j->query, d, r->m->norm_eps, score, h);
        }
        ops_rmsnorm(h, j->gamma, d, r->m->norm_eps, j->x + (long)(t - j->first) * d);
    }
}

/* Tokens per chunk of a site's work: a token's mix and norm take a few microseconds, about
 * what handing a chunk to a worker costs; below 2 chunks the caller does it alone. */
#define SITE_GRAIN 8

static void site_inputs(const residuals *r, const float *query, const float *gamma, int first, float *h, float *x,
                        threads *pool) {
    site_job job = {r, query, gamma, h, x, first};
    threads_run(pool, r->n - first, SITE_GRAIN, site_tokens, &job);
}

/* Tokens [t0, t1) of the block sum P banked as block n_banked, with its sum of squares. */
static void bank_tokens(void *arg, int t0, int t1) {
    const residuals *r = arg;
    const int d = r->d, nb = max_blocks(r->m);
    for (int t = t0; t < t1; t++) {
        memcpy(r->R + ((long)t * nb + r->n_banked) * d, r->P + (long)t * d, sizeof(float) * d);
        r->squares[(long)t * nb + r->n_banked] = ops_sum_squares(r->P + (long)t * d, d);
    }
}

static void bank(residuals *r, threads *pool) {
    threads_run(pool, r->n, SITE_GRAIN, bank_tokens, r);
    r->n_banked++;
}

/* A sublayer's output a added to the block sum P (or starting it, at a block's first
 * layer), token by token. Like banking, on every thread: on the caller alone the other
 * thread waited while it read rows both had just written (2-thread prefill of `small` and
 * `medium` with both steps split: 0.99x the time). */
typedef struct {
    residuals *r;
    const float *a;
    int replace;
} absorb_job;

static void absorb_tokens(void *arg, int t0, int t1) {
    const absorb_job *j = arg;
    const int d = j->r->d;
    float *P = j->r->P + (long)t0 * d;
    const float *a = j->a + (long)t0 * d;
    const long count = (long)(t1 - t0) * d;
    if (j->replace) {
        memcpy(P, a, sizeof(float) * (size_t)count);
        return;
    }
    for (long i = 0; i < count; i++)
        P[i] += a[i];
}

static void absorb(residuals *r, const float *a, int replace, threads *pool) {
    absorb_job job = {r, a, replace};
    threads_run(pool, r->n, SITE_GRAIN, absorb_tokens, &job);
}

static void embed_row(const kernels_matrix *e, int32_t id, float *out) {
    if (e->type == KERNELS_F32) {
        memcpy(out, (const float *)e->data + (long)id * e->cols, sizeof(float) * e->cols);
        return;
    }
    const uint16_t *src = (const uint16_t *)e->data + (long)id * e->cols;
    for (int c = 0; c < e->cols; c++)
        out[c] = dtype_bf16_to_f32(src[c]);
}

static void token_mixer(const model *m, const model_layer *ly, forward_state *st, int start, const float *x, int n,
                        float *out, float *scratch, const kernels_impl *impl, threads *pool) {
    if (ly->is_kda) {
        float *journal = NULL; /* the rows of these positions in this layer's journal */
        if (st->journal)
            journal = st->journal + ((long)ly->state_index * st->journal_capacity + (start - st->journal_start)) *
                                        kda_journal_row_floats(&m->kda);
        kda_forward(&m->kda, &ly->kda, st->kda + (long)ly->state_index * kda_state_floats(&m->kda), x, n, out,
                    scratch, journal, impl, pool);
    } else {
        mla_forward(&m->mla, &ly->mla,
                    st->mla + (long)ly->state_index * st->capacity * mla_cache_row_floats(&m->mla), start, x, n,
                    out, scratch, impl, pool);
    }
}

/* The next MoE layer after l, when early expert reads are on and its router and FFN norm
 * are in memory without waiting (a mapped or pinned layer; a streamed one is not guessed
 * from: acquiring it early would stall the ring); else NULL. */
static const model_layer *next_router(const model *m, int l) {
    if (!m->cache || !m->params.expert_prefetch)
        return NULL;
    for (int j = l + 1; j < m->n_layers; j++)
        if (m->layers[j].is_moe)
            return m->trunk ? trunk_pinned(m->trunk, j) : &m->layers[j];
    return NULL;
}

static k3_status channel_mixer(const model *m, const model_layer *ly, const moe_next *next, const float *x, int n,
                               float *out, int *selected, float *scratch, const kernels_impl *impl, threads *pool,
                               k3_error *err) {
    if (ly->is_moe)
        return moe_forward(&m->moe, &ly->moe, next, x, n, out, selected, scratch, impl, pool, err);
    moe_mlp_forward(&ly->dense, m->hidden, m->dense_inter, m->moe.situ_beta, m->moe.situ_linear_beta, x, n, out,
                    scratch, impl, pool);
    return K3_OK;
}

static k3_status run_layers(const model *m, forward_state *st, int start, const int32_t *ids, int n, int first_out,
                            float *logits, float *scratch, const kernels_impl *impl, threads *pool, k3_error *err) {
    const int d = m->hidden, nb = max_blocks(m);
    const long nd = (long)n * d;
    scratch = kernels_align(scratch);
    residuals r = {m, n, d, 0, scratch, NULL, NULL};
    float *h = r.P + nd, *x = h + nd, *a = x + nd;
    r.R = a + nd;
    r.squares = (double *)kernels_align(r.R + nd * nb);
    int *selected = (int *)((float *)(r.squares + (long)n * nb) + nb + 1); /* (n, top_k) for an observer */
    float *mix_scratch = kernels_align((float *)(selected + (long)n * m->moe.top_k));

    for (int t = 0; t < n; t++) {
        if (!m->trunk) {
            embed_row(&m->embed, ids[t], r.P + (long)t * d);
            continue;
        }
        const k3_status s = trunk_embed_row(m->trunk, ids[t], r.P + (long)t * d, err);
        if (s != K3_OK)
            return s;
    }
    observe(st, NULL, K3_SITE_EMBED, -1, start, n, d, r.P, NULL);

    for (int l = 0; l < m->n_layers; l++) {
        const model_layer *volatile ly = &m->layers[l]; /* volatile: it lives across the point below */
        fault_point held; /* while an owned trunk's layer is borrowed: mapped experts fault */
        if (m->trunk) {
            const void *bound;
            const k3_status s = trunk_acquire(m->trunk, l, &bound, err);
            if (s != K3_OK)
                return s;
            ly = bound;
            if (FAULT_CATCH(&held)) {
                trunk_release(m->trunk, l);
                fault_escape(held.addr);
            }
        }
        const int block_start = m->attn_res_block > 0 && l % m->attn_res_block == 0;
        /* Attention site. Without attention residuals P is the plain residual stream. */
        site_inputs(&r, m->attn_res_block == 0 || r.n_banked == 0 ? NULL : ly->attn_res_query, ly->input_norm, 0, h,
                    x, pool);
        if (block_start)
            bank(&r, pool); /* the RAW block sum, not h; the new block's sum starts from nothing */
        observe(st, &m->layers[l], K3_SITE_ATTN_INPUT, l, start, n, d, h, NULL);
        token_mixer(m, ly, st, start, x, n, a, mix_scratch, impl, pool);
        observe(st, &m->layers[l], K3_SITE_ATTN_OUTPUT, l, start, n, d, a, NULL);
        absorb(&r, a, block_start, pool);
        /* FFN site: sees this layer's attention output. */
        site_inputs(&r, m->attn_res_block == 0 ? NULL : ly->mlp_res_query, ly->post_norm, 0, h, x, pool);
        observe(st, &m->layers[l], K3_SITE_FFN_INPUT, l, start, n, d, h, NULL);
        /* The next MoE layer's router input, guessed: its FFN-site mix and norm of the
         * residuals as they stand now, into a (free until the channel mixer writes it). */
        const model_layer *after = ly->is_moe ? next_router(m, l) : NULL;
        if (after)
            site_inputs(&r, m->attn_res_block == 0 ? NULL : after->mlp_res_query, after->post_norm, 0, a, a, pool);
        const moe_next guess = {after ? &after->moe : NULL, a};
        const k3_status s = channel_mixer(m, ly, after ? &guess : NULL, x, n, a, st->observe ? selected : NULL,
                                          mix_scratch, impl, pool, err);
        if (m->trunk) {
            fault_disarm(&held);
            trunk_release(m->trunk, l);
        }
        if (s != K3_OK)
            return s;
        observe(st, &m->layers[l], K3_SITE_FFN_OUTPUT, l, start, n, d, a, NULL);
        /* Not ly: a streamed layer's slot is released above, and the ring may refill it. */
        if (m->layers[l].is_moe)
            observe(st, &m->layers[l], K3_SITE_ROUTING, l, start, n, m->moe.top_k, NULL, selected);
        absorb(&r, a, 0, pool);
    }

    if (!logits || first_out >= n)
        return K3_OK;
    const int n_out = n - first_out;
    /* Only the rows with logits: h is not shown to an observer here. */
    site_inputs(&r, m->attn_res_block == 0 ? NULL : m->out_res_query, m->final_norm, first_out, h, x, pool);
    observe(st, NULL, K3_SITE_FINAL_NORM, -1, start + first_out, n_out, d, x, NULL);
    kernels_matmul(impl, &m->lm_head, x, d, n_out, logits, m->vocab, pool);
    observe(st, NULL, K3_SITE_LOGITS, -1, start + first_out, n_out, m->vocab, logits, NULL);
    return K3_OK;
}

k3_status forward_run(const model *m, forward_state *st, int start, const int32_t *ids, int n, int first_out,
                      float *logits, float *scratch, const kernels_impl *impl, threads *pool, k3_error *err) {
    model *mm = (model *)m; /* the locks, counters and changed state are the mutable part of a shared model */
    k3_status s = model_check_files(mm, err);
    if (s != K3_OK)
        return s;
    const int streams = m->trunk || m->cache;
    if (streams)
        pthread_mutex_lock(&mm->stream_lock);
    const double t0 = io_now();
    fault_point pass;
    if (FAULT_CATCH(&pass)) {
        s = model_fault(mm, pass.addr, err);
    } else {
        s = run_layers(m, st, start, ids, n, first_out, logits, scratch, impl, pool, err);
        fault_disarm(&pass);
    }
    const double t1 = io_now();
    if (streams)
        pthread_mutex_unlock(&mm->stream_lock);
    pthread_mutex_lock(&mm->stats_lock);
    mm->forward_passes++;
    mm->forward_seconds += t1 - t0;
    pthread_mutex_unlock(&mm->stats_lock);
    return s;
}
