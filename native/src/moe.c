/* moe.c - SiTU-GLU MLP and latent MoE over a batch of tokens (see moe.h). */
#include "moe.h"

#include <string.h>

#include "expert_cache.h"
#include "fault.h"
#include "ops.h"

long moe_mlp_scratch_floats(int inter, int n) {
    return 2L * n * inter;
}

void moe_mlp_forward(const moe_mlp *w, int d, int inter, float beta, float linear_beta, const float *x, int n,
                     float *out, float *scratch, const kernels_impl *impl, threads *pool) {
    float *g = scratch, *u = scratch + (long)n * inter;
    const kernels_product from_x[] = {{&w->gate, g, inter}, {&w->up, u, inter}};
    kernels_matmul_same_input(impl, from_x, 2, x, d, n, pool);
    ops_situ(g, u, n * inter, beta, linear_beta, g);
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
    return (long)n * (E + 2L * dm->latent + dm->hidden + 3L * dm->top_k) + 5 * E + 1 + KERNELS_ALIGN_FLOATS +
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

/* Top-k of s + bias (ties: lower index), written to sel in ascending expert order with
 * their unbiased, renormalised, scaled weights. score: (n_experts) scratch. */
static void route(const moe_dims *dm, const float *logits, const float *bias, int *sel, float *weight,
                  float *score) {
    int chosen = 0;
    for (int e = 0; e < dm->n_experts; e++)
        score[e] = ops_sigmoid(logits[e]) + (bias ? bias[e] : 0.0f);
    /* Selection by repeated max over a small n_experts keeps ties deterministic. */
    for (int k = 0; k < dm->top_k; k++) {
        int best = -1;
        float best_v = 0.0f;
        for (int e = 0; e < dm->n_experts; e++) {
            int taken = 0;
            for (int j = 0; j < chosen; j++)
                taken |= sel[j] == e;
            if (taken)
                continue;
            const float v = score[e];
            if (best < 0 || v > best_v) {
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
        weight[i] = ops_sigmoid(logits[sel[i]]);
        sum += weight[i];
    }
    for (int i = 0; i < dm->top_k; i++) {
        if (dm->renormalize && dm->top_k > 1)
            weight[i] = (float)(weight[i] / (sum + 1e-20));
        weight[i] *= dm->routed_scale;
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
 * sel (K), weight (K), score (E) and seen (E) as scratch. */
static int guess_next(const moe_dims *dm, const moe_next *next, int n, float *logits, int *sel, float *weight,
                      float *score, int *seen, int *list, const kernels_impl *impl, threads *pool) {
    const int d = dm->hidden, E = dm->n_experts, K = dm->top_k;
    kernels_matmul(impl, &next->w->router, next->x, d, n, logits, E, pool);
    memset(seen, 0, sizeof(int) * (size_t)E);
    for (int t = 0; t < n; t++) {
        route(dm, logits + (long)t * E, next->w->router_bias, sel, weight, score);
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
    float *score = (float *)(fill + E);      /* (E) one token's selection scores */
    float *ze = kernels_align(score + E);    /* (n*K, latent) gathered inputs (mapped) or one expert's */
    float *ye = ze + (long)n * K * Lt;       /* (n*K, latent) outputs, the same way */
    float *mlp = ye + (long)n * K * Lt;      /* MLP scratch: the shared experts', then the routed ones' */

    kernels_matmul(impl, &w->router, x, d, n, logits, E, pool);
    for (int t = 0; t < n; t++)
        route(dm, logits + (long)t * E, w->router_bias, sel + (long)t * K, weight + (long)t * K, score);
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
            const int g = guess_next(dm, next, n, logits, members, ze, score, fill, first, impl, pool);
            expert_cache_prefetch(w->cache, next->w->cache_layer, first, g);
        }
    }

    /* Computed while the chosen experts are read. */
    kernels_matmul(impl, &w->down_proj, x, d, n, z, Lt, pool);
    if (dm->shared_inter > 0)
        moe_mlp_forward(&w->shared, d, dm->shared_inter, dm->situ_beta, dm->situ_linear_beta, x, n, out, mlp, impl,
                        pool);

    memset(y, 0, sizeof(float) * (size_t)n * Lt);
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
        for (int k = 0; k < K; k++)
            members[fill[slot[sel[t * K + k]]]++] = t;
    if (!w->cache) {
        for (long p = 0; p < (long)n * K; p++)
            memcpy(ze + p * Lt, z + (long)members[p] * Lt, sizeof(float) * Lt);
        experts_job job = {dm, w, list, first, ze, ye, mlp, impl};
        threads_run(pool, n_list, 1, run_experts, &job);
        for (int i = 0; i < n_list; i++)
            accumulate(sel, weight, K, list[i], members + first[i], first[i + 1] - first[i], ye + (long)first[i] * Lt,
                       Lt, y);
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
    }
    if (dm->latent_norm)
        for (int t = 0; t < n; t++)
            ops_rmsnorm(y + (long)t * Lt, w->latent_norm, Lt, dm->norm_eps, y + (long)t * Lt);
    kernels_matmul(impl, &w->up_proj, y, Lt, n, up, d, pool);
    if (dm->shared_inter > 0) {
        for (long i = 0; i < (long)n * d; i++)
            out[i] += up[i];
    } else {
        memcpy(out, up, sizeof(float) * (size_t)n * d);
    }
    return K3_OK;
}
