/* mla.c - one MLA layer over a batch of tokens, absorbed form (see mla.h and
 * k3-architecture §3.5). Projections are batched matmuls; attention runs per head for the
 * whole batch (the query absorption, the scores as one product, the weighted sum), each
 * token over the cache rows up to its own position, in position order. */
#include "mla.h"

#include <math.h>
#include <string.h>

#include "axpy_rows.h"
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
           (long)score_rows(n) * capacity + (long)MLA_SCORE_TOKENS * dm->kv_lora;
}

/* Row r of a bf16 matrix as floats, into dst. Inlined so that attend_heads' AVX-512 clone
 * widens in vectors (out of line it was the baseline's scalar loop: a tenth of an MLA
 * layer's decode time; 1-thread decode on small 0.99x CPU). */
static inline __attribute__((always_inline)) void row_f32_into(const kernels_matrix *m, int r, float *dst) {
    const uint16_t *src = (const uint16_t *)m->data + (long)r * m->cols;
    for (int c = 0; c < m->cols; c++)
        dst[c] = dtype_bf16_to_f32(src[c]);
}

/* Floats of W_UK rows converted at once for the absorption: a block that stays in L1
 * (16 kB: 8 rows of K3's 512 latent columns) on the stack of whichever thread runs it. */
#define ABSORB_BLOCK_FLOATS 4096

/* Attention for a range of heads over the whole batch. */
typedef struct {
    const mla_dims *dm;
    const mla_weights *w;
    const kernels_impl *impl;
    const float *cache;
    int start, n;
    const float *q;
    float *qa, *lat;
    float *scores; /* (score_rows(n), start+n): chunk c owns rows [c * group, (c+1) * group) */
    float *tmp;    /* (MLA_SCORE_TOKENS, kv_lora): chunk c owns row c */
    float scale;
    int grain, group; /* heads per chunk, tokens per score group */
} mla_job;

/* A batch's heads run in parallel from this many tokens; one token's are a few
 * microseconds each, about what handing them over costs. */
#define PARALLEL_HEADS_MIN_TOKENS 4

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* The W_UK rows' conversion and the scores' scaling in 16 (AVX-512) or 8 (AVX2) lanes;
 * element-wise either way, so the bits do not depend on the clone. */
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
static void attend_heads(void *arg, int h0, int h1) {
    const mla_job *j = arg;
    const mla_dims *dm = j->dm;
    const int H = dm->heads, L = dm->kv_lora, R = dm->rope, n = j->n, start = j->start;
    const int qh = dm->nope + dm->rope, kvh = dm->nope + dm->v_head, row = mla_cache_row_floats(dm);
    const long qdim = (long)H * qh;
    const int chunk = h0 / j->grain;
    float *scores = j->scores + (long)chunk * j->group * (start + n), *tmp = j->tmp + (long)chunk * L;
    float absorb_block[ABSORB_BLOCK_FLOATS];
    for (int h = h0; h < h1; h++) {
        /* Absorb W_UK for every token of the batch: qa = W_UK[h]^T q_nope, each row of
         * W_UK converted once; each qa[j] sums over i in order, as for a single token. */
        for (int t = 0; t < n; t++) {
            float *qt = j->qa + ((long)t * H + h) * row;
            for (int c = 0; c < L; c++)
                qt[c] = 0.0f;
            memcpy(qt + L, j->q + (long)t * qdim + (long)h * qh + dm->nope, sizeof(float) * R);
        }
        const kernels_matrix *kv_b = &j->w->kv_b;
        float *qa_h = j->qa + (long)h * row;
        const float *q_h = j->q + (long)h * qh;
        if (kv_b->type == KERNELS_F32) {
            axpy_rows((const float *)kv_b->data + (long)h * kvh * L, L, q_h, qdim, dm->nope, 0, n, L, qa_h, H * row);
        } else {
            /* bf16 rows converted a block at a time; the sums go on over the blocks in
             * row order, so they add the rows as one call would. */
            const int block = L <= ABSORB_BLOCK_FLOATS ? ABSORB_BLOCK_FLOATS / L : 1;
            float *wb = L <= ABSORB_BLOCK_FLOATS ? absorb_block : tmp;
            for (int i0 = 0; i0 < dm->nope; i0 += block) {
                const int rows_in = dm->nope - i0 < block ? dm->nope - i0 : block;
                for (int i = 0; i < rows_in; i++)
                    row_f32_into(kv_b, h * kvh + i0 + i, wb + (long)i * L);
                axpy_rows(wb, L, q_h + i0, qdim, rows_in, 0, n, L, qa_h, H * row);
            }
        }
        /* Every cache row dotted with every token's [qa | q_pe] by the matrix kernel, a
         * group of tokens at a time: one (row, token) pair computes the same bits whatever
         * the batch (kernels.h); a token ignores the rows past its own position. */
        for (int t0 = 0; t0 < n; t0 += j->group) {
            const int nt = n - t0 < j->group ? n - t0 : j->group;
            const int span = start + t0 + nt; /* cache rows this group attends over */
            j->impl->mm_f32(j->cache, span, j->qa + ((long)t0 * H + h) * row, H * row, nt, row, scores, span);
            /* The scores, and the weighted sums each token's own positions take. */
            kernels_note_multiply_adds((uint64_t)span * nt * row +
                                       (uint64_t)L * ((uint64_t)nt * (start + t0) + (uint64_t)nt * (nt + 1) / 2));
            for (int t = 0; t < nt; t++) {
                float *st = scores + (long)t * span;
                const int len = start + t0 + t + 1; /* causal: positions 0..start+t0+t */
                for (int s = 0; s < len; s++)
                    st[s] *= j->scale;
                ops_softmax(st, len);
                float *lh = j->lat + ((long)(t0 + t) * H + h) * L;
                for (int c = 0; c < L; c++)
                    lh[c] = 0.0f;
            }
            /* lat_h = sum over positions of p * cache row, each token over its own
             * positions, in order. */
            axpy_rows(j->cache, row, scores, span, start + t0 + 1, 1, nt, L, j->lat + ((long)t0 * H + h) * L, H * L);
        }
    }
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
    float *tmp = scores + (long)score_rows(n) * (start + n); /* (MLA_SCORE_TOKENS, kv_lora) converted kv_b
                                                              rows, one per chunk of heads */

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
    /* Chunks of heads, one per thread for a batch, each with its own rows of scores. */
    int chunks = 1;
    if (n >= PARALLEL_HEADS_MIN_TOKENS) {
        chunks = threads_count(pool) < H ? threads_count(pool) : H;
        chunks = chunks < score_rows(n) ? chunks : score_rows(n);
    }
    const int grain = (H + chunks - 1) / chunks;
    mla_job job = {dm, w, impl, cache, start, n, q, qa, lat, scores, tmp, scale, grain, score_rows(n) / chunks};
    threads_run(grain < H ? pool : NULL, H, grain, attend_heads, &job);
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
