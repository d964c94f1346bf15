/* mla.c - one MLA layer over a batch of tokens, absorbed form (see mla.h and
 * k3-architecture §3.5). Projections are batched matmuls; attention runs per head for the
 * whole batch (the query absorption, the scores as one product, the weighted sum), each
 * token over the cache rows up to its own position, in position order. */
#include "mla.h"

#include <math.h>
#include <string.h>

#include "dtype.h"
#include "ops.h"

int mla_cache_row_floats(const mla_dims *dm) {
    return dm->kv_lora + dm->rope;
}

/* Tokens whose scores against the cache are computed at once: bounds the scratch by
 * MLA_SCORE_TOKENS x capacity whatever the batch. */
#define MLA_SCORE_TOKENS 32

static int score_rows(int n) {
    return n < MLA_SCORE_TOKENS ? n : MLA_SCORE_TOKENS;
}

long mla_scratch_floats(const mla_dims *dm, int n, int capacity) {
    const long qdim = (long)dm->heads * (dm->nope + dm->rope);
    const long vdim = (long)dm->heads * dm->v_head;
    const long row = mla_cache_row_floats(dm);
    return (long)n * (dm->q_lora + qdim + row + 2 * vdim + (long)dm->heads * (dm->kv_lora + row)) +
           (long)score_rows(n) * capacity + dm->kv_lora;
}

/* Row r of a f32 or bf16 matrix as floats: a pointer into the weights, or into tmp. */
static const float *row_f32(const kernels_matrix *m, int r, float *tmp) {
    if (m->type == KERNELS_F32)
        return (const float *)m->data + (long)r * m->cols;
    const uint16_t *src = (const uint16_t *)m->data + (long)r * m->cols;
    for (int c = 0; c < m->cols; c++)
        tmp[c] = dtype_bf16_to_f32(src[c]);
    return tmp;
}

void mla_forward(const mla_dims *dm, const mla_weights *w, float *cache, int start, const float *x, int n,
                 float *out, float *scratch, const kernels_impl *impl, threads *pool) {
    const int d = dm->hidden, H = dm->heads, L = dm->kv_lora, R = dm->rope;
    const int qh = dm->nope + dm->rope, kvh = dm->nope + dm->v_head, row = mla_cache_row_floats(dm);
    const long qdim = (long)H * qh, vdim = (long)H * dm->v_head;
    float *cq = scratch;                 /* (n, q_lora) */
    float *q = cq + (long)n * dm->q_lora; /* (n, H*(nope+rope)) */
    float *ckv = q + (long)n * qdim;     /* (n, kv_lora+rope) */
    float *gate = ckv + (long)n * row;   /* (n, H*v) */
    float *o = gate + (long)n * vdim;    /* (n, H*v) */
    float *lat = o + (long)n * vdim;     /* (n, H, kv_lora) attention output in latent space */
    float *qa = lat + (long)n * H * L;   /* (n, H, kv_lora+rope) absorbed queries [W_UK^T q_nope | q_pe]:
                                            a cache row's partner */
    float *scores = qa + (long)n * H * row; /* (MLA_SCORE_TOKENS, capacity) a group's scores */
    float *tmp = scores + (long)score_rows(n) * (start + n); /* (kv_lora) a converted kv_b row */

    const kernels_product from_x[] = {{&w->q_a, cq, dm->q_lora}, {&w->kv_a, ckv, row}, {&w->g, gate, (int)vdim}};
    kernels_matmul_same_input(impl, from_x, dm->out_gate ? 3 : 2, x, d, n, pool);
    for (int t = 0; t < n; t++)
        ops_rmsnorm(cq + (long)t * dm->q_lora, w->q_a_norm, dm->q_lora, dm->lora_eps, cq + (long)t * dm->q_lora);
    kernels_matmul(impl, &w->q_b, cq, dm->q_lora, n, q, (int)qdim, pool);
    for (int t = 0; t < n; t++) {
        float *dst = cache + (long)(start + t) * row;
        ops_rmsnorm(ckv + (long)t * row, w->kv_a_norm, L, dm->lora_eps, dst);
        memcpy(dst + L, ckv + (long)t * row + L, sizeof(float) * R);
    }

    const float scale = 1.0f / sqrtf((float)qh);
    /* The W_UK rows the absorption below reads, once per token (the figure a decode step
     * streams; a batch converts each row once). */
    kernels_note_bytes_read((uint64_t)n * H * dm->nope * L * (w->kv_b.type == KERNELS_F32 ? 4 : 2));
    kernels_note_multiply_adds((uint64_t)n * H * dm->nope * L);
    for (int h = 0; h < H; h++) {
        /* Absorb W_UK for every token of the batch: qa = W_UK[h]^T q_nope, each row of
         * W_UK converted once; each qa[j] sums over i in order, as for a single token. */
        for (int t = 0; t < n; t++) {
            float *qt = qa + ((long)t * H + h) * row;
            for (int j = 0; j < L; j++)
                qt[j] = 0.0f;
            memcpy(qt + L, q + (long)t * qdim + (long)h * qh + dm->nope, sizeof(float) * R);
        }
        for (int i = 0; i < dm->nope; i++) {
            const float *wr = row_f32(&w->kv_b, h * kvh + i, tmp);
            for (int t = 0; t < n; t++) {
                float *qt = qa + ((long)t * H + h) * row;
                const float qi = q[(long)t * qdim + (long)h * qh + i];
                for (int j = 0; j < L; j++)
                    qt[j] += wr[j] * qi;
            }
        }
        /* Every cache row dotted with every token's [qa | q_pe] by the matrix kernel, for
         * up to MLA_SCORE_TOKENS tokens at a time: one (row, token) pair computes the same
         * bits whatever the batch (kernels.h); a token ignores the rows past its own
         * position. */
        for (int t0 = 0; t0 < n; t0 += MLA_SCORE_TOKENS) {
            const int nt = n - t0 < MLA_SCORE_TOKENS ? n - t0 : MLA_SCORE_TOKENS;
            const int span = start + t0 + nt; /* cache rows this group attends over */
            impl->mm_f32(cache, span, qa + ((long)t0 * H + h) * row, H * row, nt, row, scores, span);
            /* The scores, and the weighted sums each token's own positions take. */
            kernels_note_multiply_adds((uint64_t)span * nt * row +
                                       (uint64_t)L * ((uint64_t)nt * (start + t0) + (uint64_t)nt * (nt + 1) / 2));
            for (int t = 0; t < nt; t++) {
                float *st = scores + (long)t * span;
                const int len = start + t0 + t + 1; /* causal: positions 0..start+t0+t */
                for (int s = 0; s < len; s++)
                    st[s] *= scale;
                ops_softmax(st, len);
                float *lh = lat + ((long)(t0 + t) * H + h) * L;
                for (int j = 0; j < L; j++)
                    lh[j] = 0.0f;
            }
            /* lat_h = sum over positions of p * cache row: positions outer so a cache row is
             * read once for the group; each lh[j] still sums positions in order. */
            for (int s = 0; s < span; s++) {
                const float *cs = cache + (long)s * row;
                for (int t = s > start + t0 ? s - start - t0 : 0; t < nt; t++) {
                    const float p = scores[(long)t * span + s];
                    float *lh = lat + ((long)(t0 + t) * H + h) * L;
                    for (int j = 0; j < L; j++)
                        lh[j] += p * cs[j];
                }
            }
        }
    }
    /* Un-absorb W_UV per head: o_h = W_UV[h] lat_h, batched over tokens. */
    for (int h = 0; h < H; h++) {
        kernels_matrix uv = w->kv_b;
        uv.rows = dm->v_head;
        uv.data = w->kv_b.type == KERNELS_F32
                      ? (const void *)((const float *)w->kv_b.data + (long)(h * kvh + dm->nope) * L)
                      : (const void *)((const uint16_t *)w->kv_b.data + (long)(h * kvh + dm->nope) * L);
        kernels_matmul(impl, &uv, lat + (long)h * L, H * L, n, o + (long)h * dm->v_head, (int)vdim, NULL);
    }
    if (dm->out_gate)
        ops_mul_sigmoid(o, gate, (long)n * vdim);
    kernels_matmul(impl, &w->o, o, (int)vdim, n, out, d, pool);
}
