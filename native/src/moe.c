/* moe.c - SiTU-GLU MLP and latent MoE over a batch of tokens (see moe.h). */
#include "moe.h"

#include <string.h>

#include "expert_cache.h"
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
    long mlp = moe_mlp_scratch_floats(widest_mlp(dm), n);
    long one_token_experts = dm->top_k * (moe_mlp_scratch_floats(dm->inter, 1) + dm->latent);
    return (long)n * (dm->n_experts + 4L * dm->latent + dm->hidden + 2L * dm->top_k + 1) + 2L * dm->n_experts + mlp +
           one_token_experts;
}

/* One token's mapped experts, one whole expert per task: expert i of the list reads z and
 * writes its own output row and scratch, so tasks share nothing and the caller sums the
 * rows afterwards in list order. Each expert's products are too small to split by rows
 * (a 128 x 256 MXFP4 product is 32K multiply-adds); splitting by expert lets a decode
 * step's experts run on every thread. */
typedef struct {
    const moe_dims *dm;
    const moe_weights *w;
    const int *list;
    const float *z;
    float *out;     /* (n_list, latent) */
    float *scratch; /* (n_list, moe_mlp_scratch_floats(inter, 1)) */
    const kernels_impl *impl;
} experts_job;

static void run_experts(void *arg, int begin, int end) {
    const experts_job *j = arg;
    const long per = moe_mlp_scratch_floats(j->dm->inter, 1);
    for (int i = begin; i < end; i++) {
        const moe_expert *ex = &j->w->experts[j->list[i]];
        const moe_mlp m = {ex->w1, ex->w3, ex->w2};
        moe_mlp_forward(&m, j->dm->latent, j->dm->inter, j->dm->situ_beta, j->dm->situ_linear_beta, j->z, 1,
                        j->out + (long)i * j->dm->latent, j->scratch + i * per, j->impl, NULL);
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

k3_status moe_forward(const moe_dims *dm, const moe_weights *w, const float *x, int n, float *out, int *selected,
                      float *scratch, const kernels_impl *impl, threads *pool, k3_error *err) {
    const int d = dm->hidden, E = dm->n_experts, K = dm->top_k, Lt = dm->latent;
    float *logits = scratch;                 /* (n, E) */
    float *z = logits + (long)n * E;         /* (n, latent) routed input */
    float *y = z + (long)n * Lt;             /* (n, latent) weighted expert sum */
    float *ze = y + (long)n * Lt;            /* (m, latent) gathered inputs of one expert */
    float *ye = ze + (long)n * Lt;           /* (m, latent) one expert's outputs */
    float *up = ye + (long)n * Lt;           /* (n, d) */
    float *weight = up + (long)n * d;        /* (n, K) */
    int *sel = (int *)(weight + (long)n * K); /* (n, K) */
    int *members = sel + (long)n * K;        /* (n) tokens routed to one expert */
    int *list = members + n;                 /* (E) the distinct experts chosen, ascending */
    float *score = (float *)(list + E);      /* (E) one token's selection scores */
    float *mlp = score + E;                  /* MLP scratch */

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
    if (w->cache)
        expert_cache_begin(w->cache, w->cache_layer, list, n_list);

    /* Computed while the chosen experts are read. */
    kernels_matmul(impl, &w->down_proj, x, d, n, z, Lt, pool);
    if (dm->shared_inter > 0)
        moe_mlp_forward(&w->shared, d, dm->shared_inter, dm->situ_beta, dm->situ_linear_beta, x, n, out, mlp, impl,
                        pool);

    memset(y, 0, sizeof(float) * (size_t)n * Lt);
    float *one_out = mlp + moe_mlp_scratch_floats(widest_mlp(dm), n); /* (n_list, latent), then scratch */
    if (n == 1 && !w->cache) {
        float *one_scratch = one_out + (long)n_list * Lt;
        experts_job job = {dm, w, list, z, one_out, one_scratch, impl};
        threads_run(pool, n_list, 1, run_experts, &job);
    }
    for (int i = 0; i < n_list; i++) {
        const int e = list[i];
        int m = 0;
        for (int t = 0; t < n; t++)
            for (int k = 0; k < K; k++)
                if (sel[t * K + k] == e)
                    members[m++] = t;
        if (n == 1 && !w->cache) {
            accumulate(sel, weight, K, e, members, m, one_out + (long)i * Lt, Lt, y);
            continue;
        }
        for (int j = 0; j < m; j++)
            memcpy(ze + (long)j * Lt, z + (long)members[j] * Lt, sizeof(float) * Lt);
        moe_expert borrowed;
        const moe_expert *ex = &borrowed;
        if (w->cache) {
            const k3_status s = expert_cache_get(w->cache, i, &borrowed, err);
            if (s != K3_OK) {
                expert_cache_end(w->cache);
                return s; /* no partial sum leaves this function */
            }
        } else {
            ex = &w->experts[e];
        }
        moe_mlp expert_mlp = {ex->w1, ex->w3, ex->w2};
        moe_mlp_forward(&expert_mlp, Lt, dm->inter, dm->situ_beta, dm->situ_linear_beta, ze, m, ye, mlp, impl,
                        pool);
        if (w->cache)
            expert_cache_release(w->cache, i);
        accumulate(sel, weight, K, e, members, m, ye, Lt, y);
    }
    if (w->cache)
        expert_cache_end(w->cache);
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
