/* checkpoint.c - snapshots of a context's carried state, the checkpoints built from them,
 * and k3_sync(): make the sequence a given list of tokens, recomputing only what no held
 * state covers. A KDA state cannot be run backwards, so rewinding a sequence is always a
 * restore of something saved at or before the point to rewind to. */
#include <stdlib.h>
#include <string.h>

#include "context.h"

static size_t kda_bytes(const k3_context *c) {
    return sizeof(float) * (size_t)forward_kda_state_floats(c->model->m);
}

static size_t mla_row_bytes(const k3_context *c) {
    return sizeof(float) * (size_t)mla_cache_row_floats(&c->model->m->mla);
}

void context_snapshot_free(context_snapshot *s) {
    free(s->logits);
    free(s->kda);
    free(s->mla);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

k3_status context_snapshot_take(k3_context *c, context_snapshot *s, int with_history) {
    const model *m = c->model->m;
    const size_t kda = kda_bytes(c), rows = (size_t)m->n_mla * c->length * mla_row_bytes(c);
    /* A rollback snapshot is taken once per verification pass: keep its buffer. */
    if (!s->kda && !(s->kda = malloc(kda ? kda : 1)))
        return error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "state snapshot: out of memory for %zu bytes", kda);
    memcpy(s->kda, c->state.kda, kda);
    s->length = c->length;
    s->next = c->next;
    s->bytes = kda;
    /* The last logits go along, so healing can constrain the step after a resume. */
    if (c->last_logits_valid) {
        const size_t lb = sizeof(float) * (size_t)m->vocab;
        if (!s->logits && !(s->logits = malloc(lb))) {
            context_snapshot_free(s);
            return error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "state snapshot: out of memory for %zu bytes", kda + lb);
        }
        memcpy(s->logits, c->last_logits, lb);
        s->bytes += lb;
    } else {
        free(s->logits);
        s->logits = NULL;
    }
    if (!with_history)
        return K3_OK;
    s->mla = malloc(rows ? rows : 1);
    s->tokens = malloc(sizeof(int32_t) * (size_t)(c->length ? c->length : 1));
    if (!s->mla || !s->tokens) {
        context_snapshot_free(s);
        return error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "checkpoint at %d tokens: out of memory for %zu bytes",
                         c->length, kda + rows);
    }
    const size_t layer_rows = (size_t)c->length * mla_row_bytes(c);
    for (int l = 0; l < m->n_mla; l++)
        memcpy((char *)s->mla + l * layer_rows,
               c->state.mla + (size_t)l * c->state.capacity * mla_cache_row_floats(&m->mla), layer_rows);
    memcpy(s->tokens, c->tokens, sizeof(int32_t) * (size_t)c->length);
    s->bytes += rows + sizeof(int32_t) * (size_t)c->length;
    return K3_OK;
}

/* Restores s. MLA rows are copied back only for a snapshot that carries them and only
 * past `keep_rows`, the rows the context already holds for the same tokens. */
static void restore(k3_context *c, const context_snapshot *s, int keep_rows) {
    const model *m = c->model->m;
    memcpy(c->state.kda, s->kda, kda_bytes(c));
    if (s->mla && keep_rows < s->length) {
        const size_t row = mla_row_bytes(c), layer_rows = (size_t)s->length * row;
        for (int l = 0; l < m->n_mla; l++)
            memcpy((char *)(c->state.mla + (size_t)l * c->state.capacity * mla_cache_row_floats(&m->mla)) +
                       (size_t)keep_rows * row,
                   (const char *)s->mla + l * layer_rows + (size_t)keep_rows * row,
                   (size_t)(s->length - keep_rows) * row);
        memcpy(c->tokens, s->tokens, sizeof(int32_t) * (size_t)s->length);
    }
    c->length = s->length;
    c->next = s->next;
    c->last_logits_valid = s->logits != NULL;
    if (s->logits)
        memcpy(c->last_logits, s->logits, sizeof(float) * (size_t)m->vocab);
}

void context_snapshot_restore(k3_context *c, const context_snapshot *s) {
    restore(c, s, s->length);
}

void context_checkpoints_free(k3_context *c) {
    for (int i = 0; i < c->n_checkpoints; i++)
        context_snapshot_free(&c->checkpoints[i]);
    free(c->checkpoints);
    c->checkpoints = NULL;
    c->n_checkpoints = 0;
    c->checkpoint_bytes = 0;
}

static void drop_checkpoint(k3_context *c, int i) {
    c->checkpoint_bytes -= c->checkpoints[i].bytes;
    context_snapshot_free(&c->checkpoints[i]);
    c->checkpoints[i] = c->checkpoints[--c->n_checkpoints];
}

/* Drops least recently used checkpoints until the total is within the limit. */
static void enforce_limit(k3_context *c) {
    while (c->n_checkpoints > 0 && c->checkpoint_bytes > c->checkpoint_limit) {
        int oldest = 0;
        for (int i = 1; i < c->n_checkpoints; i++)
            if (c->checkpoints[i].last_used < c->checkpoints[oldest].last_used)
                oldest = i;
        drop_checkpoint(c, oldest);
    }
}

/* Length of the common prefix of a[0..na) and b[0..nb). */
static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

k3_status k3_checkpoint(k3_context *c) {
    error_clear(&c->err);
    for (int i = 0; i < c->n_checkpoints; i++) {
        context_snapshot *s = &c->checkpoints[i];
        if (s->length == c->length && common_prefix(s->tokens, s->length, c->tokens, c->length) == c->length) {
            s->last_used = ++c->use_clock; /* already held */
            return K3_OK;
        }
    }
    context_snapshot *grown = realloc(c->checkpoints, sizeof *grown * (size_t)(c->n_checkpoints + 1));
    if (!grown)
        return error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
    c->checkpoints = grown;
    context_snapshot *s = &c->checkpoints[c->n_checkpoints];
    memset(s, 0, sizeof *s);
    const k3_status st = context_snapshot_take(c, s, 1);
    if (st != K3_OK)
        return st;
    s->last_used = ++c->use_clock;
    c->n_checkpoints++;
    c->checkpoint_bytes += s->bytes;
    enforce_limit(c);
    return K3_OK;
}

void k3_checkpoint_limit(k3_context *c, size_t max_bytes) {
    c->checkpoint_limit = max_bytes;
    enforce_limit(c);
}

void k3_checkpoint_usage(const k3_context *c, int *count, size_t *bytes) {
    if (count)
        *count = c->n_checkpoints;
    if (bytes)
        *bytes = c->checkpoint_bytes;
}

static k3_status sync(k3_context *c, const int32_t *ids, int n, int *reused);

k3_status k3_sync(k3_context *c, const int32_t *ids, int n, int *reused) {
    context_enter(c);
    const k3_status s = sync(c, ids, n, reused);
    context_leave(c);
    return s;
}

static k3_status sync(k3_context *c, const int32_t *ids, int n, int *reused) {
    error_clear(&c->err);
    if (n < 0 || (n > 0 && !ids))
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "k3_sync: n %d with ids %s", n, ids ? "given" : "NULL");
    if (n > c->params.max_context)
        return error_set(&c->err, K3_ERR_CONTEXT_FULL, "k3_sync: %d tokens, past the context of %d positions", n,
                         c->params.max_context);
    const int live = common_prefix(c->tokens, c->length, ids, n);
    int resume = 0;
    if (live == c->length) {
        resume = live; /* the sequence so far is a prefix of ids */
    } else {
        /* The best restorable point: the longest checkpoint that is a prefix of ids. */
        int best = -1;
        for (int i = 0; i < c->n_checkpoints; i++) {
            const context_snapshot *s = &c->checkpoints[i];
            if (s->length <= n && (best < 0 || s->length > c->checkpoints[best].length) &&
                common_prefix(s->tokens, s->length, ids, s->length) == s->length)
                best = i;
        }
        if (best >= 0) {
            context_snapshot *s = &c->checkpoints[best];
            s->last_used = ++c->use_clock;
            /* Rows the live cache holds for the same tokens need no copy. */
            restore(c, s, live < s->length ? live : s->length);
            resume = s->length;
        } else {
            context_clear(c);
        }
    }
    if (reused)
        *reused = resume;
    return resume < n ? context_decode(c, ids + resume, n - resume, NULL, 0, NULL) : K3_OK;
}
