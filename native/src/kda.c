/* kda.c - one KDA layer over a batch of tokens (see kda.h and docs: k3-architecture §3.4).
 * Projections are batched matmuls; the conv and the recurrence run token by token. */
#include "kda.h"

#include <math.h>
#include <string.h>

#include "ops.h"

/* State layout: S (H, D, D) with S[h][key][value], then conv history (3, conv_k-1, H*D). */
long kda_state_floats(const kda_dims *dm) {
    const long p = (long)dm->heads * dm->head_dim;
    return (long)dm->heads * dm->head_dim * dm->head_dim + 3L * (dm->conv_k - 1) * p;
}

long kda_scratch_floats(const kda_dims *dm, int n) {
    const long p = (long)dm->heads * dm->head_dim;
    return (long)n * (6 * p + dm->gate_rank + dm->heads) + p + dm->head_dim;
}

/* Causal depthwise conv of one token's projection u (P) with the carried pre-conv history
 * hist (conv_k-1, P), oldest first; writes silu(conv) to y and shifts u into the history. */
static void short_conv(const float *taps, float *hist, int k, int p, const float *u, float *y) {
    for (int c = 0; c < p; c++) {
        const float *w = taps + (long)c * k;
        float acc = 0.0f;
        for (int j = 0; j < k - 1; j++)
            acc += w[j] * hist[(long)j * p + c];
        acc += w[k - 1] * u[c];
        y[c] = ops_silu(acc);
    }
    if (k > 1) {
        memmove(hist, hist + p, sizeof(float) * (size_t)(k - 2) * p);
        memcpy(hist + (long)(k - 2) * p, u, sizeof(float) * p);
    }
}

/* One key row of a head's state (d values): decay it by alpha, then add it times k_i into
 * u. restrict spares the overlap test the compiler otherwise runs before each vector loop;
 * the operations stay element-wise, so the rounding is that of the scalar loop. */
static void row_decay_read(float *restrict row, int d, float alpha, float k_i, float *restrict u) {
    for (int j = 0; j < d; j++) {
        row[j] *= alpha;
        u[j] += row[j] * k_i;
    }
}

/* The delta write of one key row, row += bk * delta, then row times q_i added into o. */
static void row_write_read(float *restrict row, int d, float bk, const float *restrict delta, float q_i,
                           float *restrict o) {
    for (int j = 0; j < d; j++) {
        row[j] += bk * delta[j];
        o[j] += row[j] * q_i;
    }
}

void kda_forward(const kda_dims *dm, const kda_weights *w, float *state, const float *x, int n, float *out,
                 float *scratch, const kernels_impl *impl, threads *pool) {
    const int H = dm->heads, D = dm->head_dim, d = dm->hidden;
    const int P = H * D;
    float *uq = scratch;                  /* (n, P) pre-conv projections, then q */
    float *uk = uq + (long)n * P;         /* (n, P) then k */
    float *uv = uk + (long)n * P;         /* (n, P) then v */
    float *gate = uv + (long)n * P;       /* (n, P) output gate logits */
    float *z = gate + (long)n * P;        /* (n, P) decay-gate pre-activation */
    float *o = z + (long)n * P;           /* (n, P) attention output */
    float *fa = o + (long)n * P;          /* (n, gate_rank) */
    float *beta = fa + (long)n * dm->gate_rank; /* (n, H) */
    float *conv_out = beta + (long)n * H;      /* (P) one token's conv output */
    float *u = conv_out + P;                    /* (D) S^T k, then v - S^T k */

    const kernels_product from_x[] = {
        {&w->q, uq, P}, {&w->k, uk, P}, {&w->v, uv, P}, {&w->g, gate, P}, {&w->f_a, fa, dm->gate_rank}, {&w->b, beta, H},
    };
    kernels_matmul_same_input(impl, from_x, 6, x, d, n, pool);
    kernels_matmul(impl, &w->f_b, fa, dm->gate_rank, n, z, P, pool);

    float *S = state;
    float *hist = state + (long)H * D * D;
    const long hist_stride = (long)(dm->conv_k - 1) * P;
    const float q_scale = 1.0f / sqrtf((float)D);

    for (int t = 0; t < n; t++) {
        float *proj[3] = {uq + (long)t * P, uk + (long)t * P, uv + (long)t * P};
        for (int i = 0; i < 3; i++) {
            short_conv(w->conv[i], hist + i * hist_stride, dm->conv_k, P, proj[i], conv_out);
            memcpy(proj[i], conv_out, sizeof(float) * P);
        }
        for (int h = 0; h < H; h++) {
            float *q = proj[0] + h * D, *k = proj[1] + h * D, *v = proj[2] + h * D;
            ops_l2norm(q, D, 1e-6f, q_scale);
            ops_l2norm(k, D, 1e-6f, 1.0f);
            const float a = expf(w->a_log[h]);
            const float bt = ops_sigmoid(beta[(long)t * H + h]);
            float *Sh = S + (long)h * D * D;
            const float *zt = z + (long)t * P + h * D;
            const float *dt = w->dt_bias + h * D;
            /* Two passes over the state, each key row once: decay it and add it into
             * u = S^T k; then the delta write and the read o = S^T q of the updated row.
             * Each u[j] and o[j] still sums over rows in key order. */
            float *oh = o + (long)t * P + h * D;
            for (int j = 0; j < D; j++)
                u[j] = oh[j] = 0.0f;
            for (int i = 0; i < D; i++) {
                const float zz = zt[i] + dt[i];
                const float g = dm->lower_bound_gate ? dm->gate_lower_bound * ops_sigmoid(a * zz)
                                                     : -a * ops_softplus(zz);
                row_decay_read(Sh + i * D, D, expf(g), k[i], u);
            }
            for (int j = 0; j < D; j++)
                u[j] = v[j] - u[j];
            for (int i = 0; i < D; i++)
                row_write_read(Sh + i * D, D, bt * k[i], u, q[i], oh);
            /* The head-wise RMSNorm. */
            ops_rmsnorm(oh, w->o_norm, D, dm->norm_eps, oh);
        }
        float *ot = o + (long)t * P;
        const float *gt = gate + (long)t * P;
        for (int c = 0; c < P; c++)
            ot[c] *= ops_sigmoid(gt[c]);
    }
    kernels_matmul(impl, &w->o, o, P, n, out, d, pool);
}
