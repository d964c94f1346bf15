/* moe.c - SiTU-GLU MLP and latent MoE over a batch of tokens (see moe.h). */
#include "moe.h"

#include <string.h>

#include "expert_cache.h"
#include "fault.h"
#include "ops.h"

long moe_mlp_scratch_floats(int inter, int n) {
    return 2L * n * inter;
}

/* Batches below this many tokens run their per-token steps on the calling thread: a hand-
 * out costs about what one token's routing does. */
#define PARALLEL_TOKENS_MIN 4

/* SiTU over a batch's rows of gate and up, a token's row on any thread (element-wise). */
typedef struct {
    float *g;
    const float *u;
    int inter;
    float beta, linear_beta;
} situ_job;

static void situ_rows(void *arg, int t0, int t1) {
    const situ_job *j = arg;
    const long at = (long)t0 * j->inter;
    ops_situ(j->g + at, j->u + at, (t1 - t0) * j->inter, j->beta, j->linear_beta, j->g + at);
}

void moe_mlp_forward(const moe_mlp *w, int d, int inter, float beta, float linear_beta, const float *x, int n,
                     float *out, float *scratch, const kernels_impl *impl, threads *pool) {
    float *g = scratch, *u = scratch + (long)n * inter;
    const kernels_product from_x[] = {{&w->gate, g, inter}, {&w->up, u, inter}};
    kernels_matmul_same_input(impl, from_x, 2, x, d, n, pool);
    situ_job sj = {g, u, inter, beta, linear_beta};
    threads_run(n >= PARALLEL_TOKENS_MIN ? pool : NULL, n, 8, situ_rows, &sj);
    kernels_matmul(impl, &w->down, g, inter, n, out, d, pool);
}

/* The widest MLP a layer runs: the shared experts' or a routed one's. */
static int widest_mlp(const moe_dims *dm) {
    return dm->shared_inter > dm->inter ? dm->shared_inter : dm->inter;
}

long moe_scratch_floats(const moe_dims *dm, int n) {
    /* The layout at the top of moe_forward. The MLP region serves the shared experts first,
     * then the routed ones: one expert's tokens (cached experts) or every routed (token,
     * expert) pair's at once (mapped experts, as tasks). */
    const long pairs = (long)n * dm->top_k, E = dm->n_experts;
    const long shared = moe_mlp_scratch_floats(widest_mlp(dm), n);
    const long routed = pairs * moe_mlp_scratch_floats(dm->inter, 1);
    return (long)n * (E + 2L * dm->latent + dm->hidden + 4L * dm->top_k) + 4 * E + 1 + KERNELS_ALIGN_FLOATS +
           2 * pairs * dm->latent + (shared > routed ? shared : routed);
}

/* Mapped experts, one whole expert per task: expert i of the list reads its tokens'
 * gathered inputs and writes its own output rows and scratch, so tasks share nothing and
 * the caller sums the rows afterwards in list order. An expert's products are small (a
 * 128 x 256 MXFP4 product is 32K multiply-adds per token): split by expert, a step's or a
 * batch's experts run on every thread with one hand-out per layer instead of three per
 * expert, and each expert's weights are decoded once for all of its tokens. */
typedef struct {
    const moe_dims *dm;
    const moe_weights *w;
    const int *list;
    const int *first;     /* (n_list + 1) expert i owns pair rows [first[i], first[i+1]) */
    const float *in;      /* (pairs, latent) gathered inputs, expert by expert */
    float *out;           /* (pairs, latent) */
    float *scratch;       /* (pairs, moe_mlp_scratch_floats(inter, 1)) */
    const kernels_impl *impl;
} experts_job;

static void run_experts(void *arg, int begin, int end) {
    const experts_job *j = arg;
    const long per = moe_mlp_scratch_floats(j->dm->inter, 1), Lt = j->dm->latent;
    for (int i = begin; i < end; i++) {
        const moe_expert *ex = &j->w->experts[j->list[i]];
        const moe_mlp m = {ex->w1, ex->w3, ex->w2};
        const int row = j->first[i];
        moe_mlp_forward(&m, j->dm->latent, j->dm->inter, j->dm->situ_beta, j->dm->situ_linear_beta,
                        j->in + row * Lt, j->first[i + 1] - row, j->out + row * Lt, j->scratch + row * per,
                        j->impl, NULL);
    }
}

/* Top-k of s + bias (ties: lower index), s = sigmoid(logits), written to sel in ascending
 * expert order with their unbiased, renormalised, scaled weights. The row of logits is
 * overwritten with s (nothing reads the raw logits after routing), so a token needs no
 * scratch of its own and the batch's tokens route on any thread. */
static void route(const moe_dims *dm, float *logits, const float *bias, int *sel, float *weight) {
    int chosen = 0;
    ops_sigmoid_n(logits, dm->n_experts, logits);
    /* Selection by repeated max over a small n_experts keeps ties deterministic. An expert
     * already chosen is looked for only when it would win: testing every expert against
     * the chosen ones was most of routing's time (and routing 2 % of a prefill). */
    for (int k = 0; k < dm->top_k; k++) {
        int best = -1;
        float best_v = 0.0f;
        for (int e = 0; e < dm->n_experts; e++) {
            const float v = logits[e] + (bias ? bias[e] : 0.0f);
            if (best >= 0 && !(v > best_v))
                continue;
            int taken = 0;
            for (int j = 0; j < chosen; j++)
                taken |= sel[j] == e;
            if (!taken) {
                best = e;
                best_v = v;
            }
        }
        sel[chosen++] = best;
    }
    /* Ascending expert order: the summation order of the experts' outputs. */
    for (int i = 1; i < dm->top_k; i++)
        for (int j = i; j > 0 && sel[j - 1] > sel[j]; j--) {
            const int tmp = sel[j];
            sel[j] = sel[j - 1];
            sel[j - 1] = tmp;
        }
    double sum = 0.0;
    for (int i = 0; i < dm->top_k; i++) {
        weight[i] = logits[sel[i]];
        sum += weight[i];
    }
    for (int i = 0; i < dm->top_k; i++) {
        if (dm->renormalize && dm->top_k > 1)
            weight[i] = (float)(weight[i] / (sum + 1e-20));
        weight[i] *= dm->routed_scale;
    }
}

/* The per-token steps of a batch around its experts, each token on any thread (the same
 * bits: a token's arithmetic is its own). */
typedef struct {
    const moe_dims *dm;
    const moe_weights *w;
    float *logits;     /* (n, E) */
    int *sel;          /* (n, K) */
    float *weight;     /* (n, K) */
    const int *pos;    /* (n, K) the row of pair (t, k) among the experts' outputs */
    const float *ye;   /* (pairs, latent) the experts' outputs */
    const float *z;    /* (n, latent) the routed input */
    float *ze;         /* (pairs, latent) gathered inputs */
    const int *members;
    float *y;          /* (n, latent) */
} tokens_job;

static void route_tokens(void *arg, int t0, int t1) {
    const tokens_job *j = arg;
    const int E = j->dm->n_experts, K = j->dm->top_k;
    for (int t = t0; t < t1; t++)
        route(j->dm, j->logits + (long)t * E, j->w->router_bias, j->sel + (long)t * K, j->weight + (long)t * K);
}

/* Pair p's input row: its token's routed input. */
static void gather_pairs(void *arg, int p0, int p1) {
    const tokens_job *j = arg;
    const int Lt = j->dm->latent;
    for (int p = p0; p < p1; p++)
        memcpy(j->ze + (long)p * Lt, j->z + (long)j->members[p] * Lt, sizeof(float) * Lt);
}

/* y[t] = the sum of token t's experts' outputs times their weights, from 0 in ascending
 * expert order (the order accumulate() sums in), then the latent norm. */
static void sum_tokens(void *arg, int t0, int t1) {
    const tokens_job *j = arg;
    const int K = j->dm->top_k, Lt = j->dm->latent;
    for (int t = t0; t < t1; t++) {
        float *yt = j->y + (long)t * Lt;
        for (int c = 0; c < Lt; c++)
            yt[c] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float wt = j->weight[(long)t * K + k];
            const float *src = j->ye + (long)j->pos[(long)t * K + k] * Lt;
            for (int c = 0; c < Lt; c++)
                yt[c] += wt * src[c];
        }
        if (j->dm->latent_norm)
            ops_rmsnorm(yt, j->w->latent_norm, Lt, j->dm->norm_eps, yt);
    }
}

/* y[t] += weight of expert e for token t * its output row, for the m tokens routed to e;
 * called in ascending expert order, which fixes each token's summation order. */
static void accumulate(const int *sel, const float *weight, int K, int e, const int *members, int m,
                       const float *expert_out, int Lt, float *y) {
    for (int j = 0; j < m; j++) {
        const int t = members[j];
        float wt = 0.0f;
        for (int k = 0; k < K; k++)
            if (sel[t * K + k] == e)
                wt = weight[t * K + k];
        float *yt = y + (long)t * Lt;
        const float *src = expert_out + (long)j * Lt;
        for (int c = 0; c < Lt; c++)
            yt[c] += wt * src[c];
    }
}

/* The next layer's likely experts for the n tokens of next->x: its router and its top-k
 * rule per token, the union ascending in list; returns the count. Uses logits (n, E),
 * sel (K), weight (K) and seen (E) as scratch. */
static int guess_next(const moe_dims *dm, const moe_next *next, int n, float *logits, int *sel, float *weight,
                      int *seen, int *list, const kernels_impl *impl, threads *pool) {
    const int d = dm->hidden, E = dm->n_experts, K = dm->top_k;
    kernels_matmul(impl, &next->w->router, next->x, d, n, logits, E, pool);
    memset(seen, 0, sizeof(int) * (size_t)E);
    for (int t = 0; t < n; t++) {
        route(dm, logits + (long)t * E, next->w->router_bias, sel, weight);
        for (int k = 0; k < K; k++)
            seen[sel[k]] = 1;
    }
    int count = 0;
    for (int e = 0; e < E; e++)
        if (seen[e])
            list[count++] = e;
    return count;
}

k3_status moe_forward(const moe_dims *dm, const moe_weights *w, const moe_next *next, const float *x, int n,
                      float *out, int *selected, float *scratch, const kernels_impl *impl, threads *pool,
                      k3_error *err) {
    const int d = dm->hidden, E = dm->n_experts, K = dm->top_k, Lt = dm->latent;
    float *logits = scratch;                 /* (n, E) */
    float *z = logits + (long)n * E;         /* (n, latent) routed input */
    float *y = z + (long)n * Lt;             /* (n, latent) weighted expert sum */
    float *up = y + (long)n * Lt;            /* (n, d) */
    float *weight = up + (long)n * d;        /* (n, K) */
    int *sel = (int *)(weight + (long)n * K); /* (n, K) */
    int *members = sel + (long)n * K;        /* (n, K) the routed tokens, expert by expert */
    int *list = members + (long)n * K;       /* (E) the distinct experts chosen, ascending */
    int *first = list + E;                   /* (E + 1), then slot (E): see below */
    int *fill = first + 2 * E + 1;           /* (E) */
    int *pos = fill + E;                     /* (n, K) where pair (t, k) is among the pairs (mapped) */
    float *ze = kernels_align((float *)(pos + (long)n * K)); /* (n*K, latent) gathered inputs (mapped) or one expert's */
    float *ye = ze + (long)n * K * Lt;       /* (n*K, latent) outputs, the same way */
    float *mlp = ye + (long)n * K * Lt;      /* MLP scratch: the shared experts', then the routed ones' */

    kernels_matmul(impl, &w->router, x, d, n, logits, E, pool);
    threads *token_pool = n >= PARALLEL_TOKENS_MIN ? pool : NULL;
    tokens_job tj = {dm, w, logits, sel, weight, pos, ye, z, ze, members, y};
    threads_run(token_pool, n, 8, route_tokens, &tj);
    if (selected)
        memcpy(selected, sel, sizeof(int) * (size_t)n * K);
    /* The batch's distinct experts in ascending order: the order they are read and summed. */
    memset(list, 0, sizeof(int) * (size_t)E);
    for (long i = 0; i < (long)n * K; i++)
        list[sel[i]] = 1;
    int n_list = 0;
    for (int e = 0; e < E; e++)
        if (list[e])
            list[n_list++] = e;
    fault_point batch; /* while a cache batch is open: the mapped trunk's reads may fault */
    if (w->cache) {
        expert_cache_begin(w->cache, w->cache_layer, list, n_list);
        if (FAULT_CATCH(&batch)) {
            expert_cache_end(w->cache);
            fault_escape(batch.addr);
        }
        /* The guess, in regions written later (logits, members, ze, fill, first), so
         * nothing it leaves behind is read: logits are done with, the rest not yet filled. */
        if (next && next->w) {
            const int g = guess_next(dm, next, n, logits, members, ze, fill, first, impl, pool);
            expert_cache_prefetch(w->cache, next->w->cache_layer, first, g);
        }
    }

    /* Computed while the chosen experts are read. */
    kernels_matmul(impl, &w->down_proj, x, d, n, z, Lt, pool);
    if (dm->shared_inter > 0)
        moe_mlp_forward(&w->shared, d, dm->shared_inter, dm->situ_beta, dm->situ_linear_beta, x, n, out, mlp, impl,
                        pool);

    /* The routed pairs grouped by expert in list order, tokens ascending within each. */
    int *slot = first + n_list + 1; /* (E) an expert's index in the list */
    for (int i = 0; i < n_list; i++)
        slot[list[i]] = i;
    for (int i = 0; i <= n_list; i++)
        first[i] = 0;
    for (long p = 0; p < (long)n * K; p++)
        first[slot[sel[p]] + 1]++;
    for (int i = 0; i < n_list; i++)
        first[i + 1] += first[i];
    for (int i = 0; i < n_list; i++)
        fill[i] = first[i];
    for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
            const int at = fill[slot[sel[t * K + k]]]++;
            members[at] = t;
            pos[t * K + k] = at;
        }
    if (!w->cache) {
        threads_run(token_pool, n * K, 32, gather_pairs, &tj);
        experts_job job = {dm, w, list, first, ze, ye, mlp, impl};
        threads_run(pool, n_list, 1, run_experts, &job);
        threads_run(token_pool, n, 8, sum_tokens, &tj);
    } else {
        memset(y, 0, sizeof(float) * (size_t)n * Lt);
    }
    for (int i = 0; w->cache && i < n_list; i++) {
        const int e = list[i], m = first[i + 1] - first[i];
        for (int j = 0; j < m; j++)
            memcpy(ze + (long)j * Lt, z + (long)members[first[i] + j] * Lt, sizeof(float) * Lt);
        moe_expert borrowed;
        const k3_status s = expert_cache_get(w->cache, i, &borrowed, err);
        if (s != K3_OK) {
            fault_disarm(&batch);
            expert_cache_end(w->cache);
            return s; /* no partial sum leaves this function */
        }
        moe_mlp expert_mlp = {borrowed.w1, borrowed.w3, borrowed.w2};
        moe_mlp_forward(&expert_mlp, Lt, dm->inter, dm->situ_beta, dm->situ_linear_beta, ze, m, ye, mlp, impl,
                        pool);
        expert_cache_release(w->cache, i);
        accumulate(sel, weight, K, e, members + first[i], m, ye, Lt, y);
    }
    if (w->cache) {
        fault_disarm(&batch);
        expert_cache_end(w->cache);
        if (dm->latent_norm)
            for (int t = 0; t < n; t++)
                ops_rmsnorm(y + (long)t * Lt, w->latent_norm, Lt, dm->norm_eps, y + (long)t * Lt);
    }
    kernels_matmul(impl, &w->up_proj, y, Lt, n, up, d, pool);
    if (dm->shared_inter > 0) {
        for (long i = 0; i < (long)n * d; i++)
            out[i] += up[i];
    } else {
        memcpy(out, up, sizeof(float) * (size_t)n * d);
    }
    return K3_OK;
}
