/* kernels_avx512.c - AVX-512 products of bf16 / f32 / MXFP4 weights with f32 activations.
 * This file alone is compiled with AVX-512 F/BW/VL/DQ enabled; kernels_avx512() checks the
 * CPU (and the OS's support for the 512-bit state) before handing it out.
 *
 * One dot product, one instruction sequence (kernels.h): for a (row, token) pair a single
 * 16-lane accumulator takes acc = fma(w[c..c+16), x[c..c+16), acc) for c = 0, 16, 32, ...,
 * the last partial step with both operands masked to zero, then a fixed horizontal sum.
 * MXFP4 weights enter that same chain already scaled, each 32-column block's even columns
 * then its odd ones (the input split to match): the block's 16-entry table of twice the
 * E2M1 values is multiplied by its 2^(scale - 128) (exact: a power of two times a small
 * integer), and vpermps looks the nibbles up in it. So every tile shape
 * below computes the same bits per pair; the shapes differ only in how many weight and
 * input vectors each load serves:
 *  - one token (decode) runs one row at a time, one sequential stream (MXFP4: tiles of 8
 *    short rows);
 *  - a batch (prefill, verification) runs tiles of 4 rows x 6 tokens (MXFP4: 4 x 4): each
 *    weight vector, converted once, feeds every token of the tile, each input vector every
 *    row, 24 accumulators in registers. Token tiles are the outer loop, so a thread's chunk
 *    of rows (a few hundred kB at most) stays in L2 while the batch's tiles stream past it.
 * These results differ from the AVX2 and scalar kernels within rounding (another order of
 * additions), never between batch sizes, tiles or threads. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__)

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

/* The fixed horizontal sum: halves added down to 128 bits, then lanes (0+2, 1+3), then the
 * two left. */
static inline float hsum16(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static inline __m512 load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __m512 load_bf16_masked(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

static inline __m512 load_f32(const float *p) {
    return _mm512_loadu_ps(p);
}

static inline __m512 load_f32_masked(const float *p, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, p);
}

/* The body for NR rows x NT tokens of bf16 or f32 weights, constants at every call so the
 * accumulators stay in registers. */
#define DOT_TILE(NAME, WT, LOAD, LOAD_MASKED)                                                                        \
    static inline __attribute__((always_inline)) void NAME(const WT *rows, int cols, const float *x, int ldx,      \
                                                           float *y, int ldy, const int NR, const int NT) {        \
        __m512 acc[4][6];                                                                                           \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();                  \
        const int body = cols & ~15;                                                                                \
        for (int c = 0; c < body; c += 16) {                                                                        \
            __m512 w[4];                                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) w[r] = LOAD(rows + (long)r * cols + c);            \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                                  \
                const __m512 xv = _mm512_loadu_ps(x + (long)t * ldx + c);                                           \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                                    \
                    _mm512_fmadd_ps(w[r], xv, acc[r][t]);                                                           \
            }                                                                                                       \
        }                                                                                                           \
        if (body < cols) {                                                                                          \
            const __mmask16 m = (__mmask16)((1u << (cols - body)) - 1);                                             \
            __m512 w[4];                                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) w[r] = LOAD_MASKED(rows + (long)r * cols + body, m); \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                                  \
                const __m512 xv = _mm512_maskz_loadu_ps(m, x + (long)t * ldx + body);                               \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                                    \
                    _mm512_fmadd_ps(w[r], xv, acc[r][t]);                                                           \
            }                                                                                                       \
        }                                                                                                           \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) y[(long)t * ldy + r] = hsum16(acc[r][t]);         \
    }

DOT_TILE(tile_bf16, uint16_t, load_bf16, load_bf16_masked)
DOT_TILE(tile_f32, float, load_f32, load_f32_masked)

/* One token takes one bf16/f32 row at a time: a single sequential stream. Tiles of 4 rows
 * (four interleaved streams of 1-2 kB rows) read memory at half the rate: lm_head-shaped
 * 163840 x 1024 product 17-19 against 36-37 GB/s, one-token decode on small 1.6x the CPU
 * time; from cache 4 rows were faster (latency-bound chains), but a decode step reads every
 * weight from memory.
 * Bytes of weights from which one token's rows are read as two streams, the first half of
 * the rows alternating with the second (as in kernels_avx2.c: lm_head-sized products). */
#define TWO_STREAMS_BYTES (2L << 20)

/* Tokens per tile of a batch, and rows per tile. */
#define BATCH_NT 6
#define TILE_NR 4

/* Rows [0, nr) for one token, one row at a time; lm_head-sized products as two streams. */
#define ONE_TOKEN(TILE, WT, rows, nr, x, cols, y)                                                                    \
    do {                                                                                                            \
        int r_ = 0;                                                                                                 \
        if ((long)(nr) * (cols) * (long)sizeof(WT) >= TWO_STREAMS_BYTES) {                                          \
            const int half_ = (nr) / 2;                                                                             \
            for (; r_ < half_; r_++) {                                                                              \
                TILE((rows) + (long)r_ * (cols), cols, x, 0, (y) + r_, 0, 1, 1);                                    \
                TILE((rows) + (long)(r_ + half_) * (cols), cols, x, 0, (y) + r_ + half_, 0, 1, 1);                  \
            }                                                                                                       \
            r_ = 2 * half_;                                                                                         \
        }                                                                                                           \
        for (; r_ < (nr); r_++)                                                                                     \
            TILE((rows) + (long)r_ * (cols), cols, x, 0, (y) + r_, 0, 1, 1);                                        \
    } while (0)

/* One row tile of NR rows against tokens [0, n) of x, NT tokens at a time. */
#define ROW_TILE_TOKENS(TILE, rows, cols, x, ldx, n, y, ldy, NR, NTMAX)                                              \
    do {                                                                                                            \
        int t_ = 0;                                                                                                 \
        for (; t_ + (NTMAX) <= (n); t_ += (NTMAX))                                                                  \
            TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, NTMAX);                  \
        switch ((n) - t_) {                                                                                         \
        case 5: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 5); break;            \
        case 4: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 4); break;            \
        case 3: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 3); break;            \
        case 2: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 2); break;            \
        case 1: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 1); break;            \
        default: break;                                                                                             \
        }                                                                                                           \
    } while (0)

/* A batch: token tiles outer (the rows of this call stay in cache between them), row tiles
 * inner. */
#define MM_DISPATCH(NAME, TILE, WT)                                                                                  \
    static void NAME(const WT *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {         \
        if (n == 1) {                                                                                               \
            ONE_TOKEN(TILE, WT, rows, nr, x, cols, y);                                                              \
            return;                                                                                                 \
        }                                                                                                           \
        for (int t = 0; t < n; t += BATCH_NT) {                                                                     \
            const int nt = n - t < BATCH_NT ? n - t : BATCH_NT;                                                     \
            const float *xt = x + (long)t * ldx;                                                                    \
            float *yt = y + (long)t * ldy;                                                                          \
            int r = 0;                                                                                              \
            for (; r + TILE_NR <= nr; r += TILE_NR)                                                                 \
                ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, TILE_NR, BATCH_NT);    \
            switch (nr - r) {                                                                                       \
            case 3: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 3, BATCH_NT); break; \
            case 2: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 2, BATCH_NT); break; \
            case 1: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 1, BATCH_NT); break; \
            default: break;                                                                                         \
            }                                                                                                       \
        }                                                                                                           \
    }

MM_DISPATCH(avx512_mm_bf16, tile_bf16, uint16_t)
MM_DISPATCH(avx512_mm_f32, tile_f32, float)

/* MXFP4. A block's 16 packed bytes widen to 16 dwords; vpermps, which reads only the low
 * four bits of each index, looks the low nibbles (the even columns) up in the block's
 * scaled table, and after a shift by 4 the high nibbles (the odd columns): two decoded
 * vectors for four vector operations (keeping the columns in order took seven). The input
 * is split the same way, each block's even columns then its odd ones, once per call and
 * token (x_split), so each pair's chain per block is acc += w_even * x_even, then
 * acc += w_odd * x_odd, in every tile shape. */
static inline void mxfp4_decode(const uint8_t *p, __m512 table, __m512 *even, __m512 *odd) {
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    *even = _mm512_permutexvar_ps(bytes, table);
    *odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
}

/* cols columns of one token's x as (cols / 32 blocks, even 16 | odd 16). */
static void x_split(const float *x, int cols, float *out) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int c = 0; c < cols; c += DTYPE_MXFP4_BLOCK) {
        const __m512 a = _mm512_loadu_ps(x + c), b = _mm512_loadu_ps(x + c + 16);
        _mm512_storeu_ps(out + c, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(out + c + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}

/* Blocks are walked in groups of up to 16, for which each row's 2^(scale - 128) factors are
 * built at once in the exponent field (scale 0 and 1 would need a subnormal and give 0,
 * as in kernels_avx2.c; they never occur in a valid checkpoint). */
#define MX_GROUP 16

/* NR rows x NT tokens; xs holds the tokens' split inputs, ldxs floats apart. */
static inline __attribute__((always_inline)) void tile_mxfp4(const uint8_t *packed, const uint8_t *scale, int cols,
                                                             const float *xs, int ldxs, float *y, int ldy,
                                                             const int NR, const int NT) {
    const __m512 twice = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, -0.0f, -1, -2, -3, -4, -6, -8, -12);
    const int n_blocks = cols / DTYPE_MXFP4_BLOCK, row_bytes = cols / 2;
    __m512 acc[8][4];
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
    for (int g = 0; g < n_blocks; g += MX_GROUP) {
        const int nb = n_blocks - g < MX_GROUP ? n_blocks - g : MX_GROUP;
        float pow2[8][MX_GROUP];
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
            const __m512i e = _mm512_sub_epi32(
                _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8((__mmask16)((1u << nb) - 1), scale + (long)r * n_blocks + g)),
                _mm512_set1_epi32(1));
            _mm512_storeu_si512(pow2[r], _mm512_slli_epi32(_mm512_max_epi32(e, _mm512_setzero_si512()), 23));
        }
        for (int k = 0; k < nb; k++) {
            const int b = g + k;
            __m512 w0[8], w1[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                const __m512 table = _mm512_mul_ps(twice, _mm512_set1_ps(pow2[r][k]));
                mxfp4_decode(packed + (long)r * row_bytes + b * (DTYPE_MXFP4_BLOCK / 2), table, &w0[r], &w1[r]);
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const float *xb = xs + (long)t * ldxs + b * DTYPE_MXFP4_BLOCK;
                const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
                _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                    acc[r][t] = _mm512_fmadd_ps(w0[r], x0, acc[r][t]);
                    acc[r][t] = _mm512_fmadd_ps(w1[r], x1, acc[r][t]);
                }
            }
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(long)t * ldy + r] = hsum16(acc[r][t]);
}

/* MXFP4 tiles of a batch take 4 rows x 4 tokens: two decoded vectors per row leave room
 * for 16 accumulators. */
#define MX_BATCH_NT 4

/* One token: tiles of 8 MXFP4 rows (272 bytes each with scales), eight independent
 * accumulation chains whose latency hides behind each other; unlike bf16 rows, 8 such rows
 * are one short contiguous stretch (medium decode, CPU time: 1 row 0.86-0.92 s, 4 rows
 * 0.68-0.95, 8 rows 0.62-0.67 for 16 tokens). */
#define MX_ONE_TOKEN_NR 8

#define MX_TILE(NR, NT) tile_mxfp4(pr, sr, cols, xs, ldxs, yt, ldy, NR, NT)

/* Rows [0, nr) against the nt (<= MX_BATCH_NT) tokens whose split inputs are xs. */
static void mxfp4_rows(const uint8_t *packed, const uint8_t *scale, int nr, const float *xs, int ldxs, int nt,
                       int cols, float *y, int ldy) {
    const long row_bytes = cols / 2, row_scales = cols / DTYPE_MXFP4_BLOCK;
    if (nt == 1) {
        int r = 0;
        for (; r + MX_ONE_TOKEN_NR <= nr; r += MX_ONE_TOKEN_NR) {
            const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
            float *yt = y + r;
            MX_TILE(MX_ONE_TOKEN_NR, 1);
        }
        for (; r < nr; r++) {
            const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
            float *yt = y + r;
            MX_TILE(1, 1);
        }
        return;
    }
    for (int r = 0; r < nr; r += TILE_NR) {
        const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
        float *yt = y + r;
        const int rows_here = nr - r < TILE_NR ? nr - r : TILE_NR;
        /* Every (rows, tokens) shape spelled out so each body is specialised. */
        switch (rows_here * 8 + nt) {
        case 4 * 8 + 4: MX_TILE(4, 4); break;
        case 4 * 8 + 3: MX_TILE(4, 3); break;
        case 4 * 8 + 2: MX_TILE(4, 2); break;
        case 3 * 8 + 4: MX_TILE(3, 4); break;
        case 3 * 8 + 3: MX_TILE(3, 3); break;
        case 3 * 8 + 2: MX_TILE(3, 2); break;
        case 2 * 8 + 4: MX_TILE(2, 4); break;
        case 2 * 8 + 3: MX_TILE(2, 3); break;
        case 2 * 8 + 2: MX_TILE(2, 2); break;
        case 1 * 8 + 4: MX_TILE(1, 4); break;
        case 1 * 8 + 3: MX_TILE(1, 3); break;
        default: MX_TILE(1, 2); break;
        }
    }
}

/* The split inputs of a tile of tokens live on the stack when they fit (always for one
 * token: KERNELS_MXFP4_MAX_COLS), else in a heap buffer; without one, one token at a time,
 * which computes the same bits. */
static void avx512_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                            int cols, float *y, int ldy) {
    float stack[KERNELS_MXFP4_MAX_COLS];
    int tile = n < MX_BATCH_NT ? n : MX_BATCH_NT;
    float *xs = stack;
    if ((long)tile * cols > KERNELS_MXFP4_MAX_COLS) {
        xs = malloc(sizeof(float) * (size_t)tile * (size_t)cols);
        if (!xs) {
            xs = stack;
            tile = 1;
        }
    }
    for (int t = 0; t < n; t += tile) {
        const int nt = n - t < tile ? n - t : tile;
        for (int i = 0; i < nt; i++)
            x_split(x + (long)(t + i) * ldx, cols, xs + (long)i * cols);
        mxfp4_rows(packed, scale, nr, xs, cols, nt, cols, y + (long)t * ldy, ldy);
    }
    if (xs != stack)
        free(xs);
}

/* The scalar argmax's answer sixteen lanes at a time: as avx2_argmax (kernels_avx2.c), each
 * lane keeps the first position of its largest value, never NaN; the lowest index among
 * the lanes holding the overall largest wins. */
static int avx512_argmax(const float *x, int n) {
    if (x[0] != x[0])
        return 0;
    const __m512 first = _mm512_set1_ps(x[0]);
    const __m512i step = _mm512_set1_epi32(64);
    __m512 best[4];
    __m512i at[4], idx[4];
    for (int k = 0; k < 4; k++) {
        best[k] = first;
        at[k] = _mm512_setzero_si512();
        idx[k] = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                  _mm512_set1_epi32(16 * k));
    }
    int i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++) {
            const __m512 v = _mm512_loadu_ps(x + i + 16 * k);
            const __mmask16 gt = _mm512_cmp_ps_mask(v, best[k], _CMP_GT_OQ);
            best[k] = _mm512_mask_mov_ps(best[k], gt, v);
            at[k] = _mm512_mask_mov_epi32(at[k], gt, idx[k]);
            idx[k] = _mm512_add_epi32(idx[k], step);
        }
    float lane_best[64];
    int lane_at[64];
    for (int k = 0; k < 4; k++) {
        _mm512_storeu_ps(lane_best + 16 * k, best[k]);
        _mm512_storeu_si512(lane_at + 16 * k, at[k]);
    }
    return kernels_argmax_finish(lane_best, lane_at, 64, x, i, n);
}

/* Twelve independent 16-lane FMA chains: enough to cover the FMA latency on both pipes. */
static double avx512_fma_loop(long reps) {
    __m512 a[12];
    const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, b);
    __m512 sum = a[0];
    for (int i = 1; i < 12; i++)
        sum = _mm512_add_ps(sum, a[i]);
    kernels_fma_sink = hsum16(sum);
    return (double)reps * 12 * 16 * 2;
}

static const kernels_impl avx512_impl = {"avx512",      avx512_mm_f32, avx512_mm_bf16, avx512_mm_mxfp4, avx512_argmax,
                                         avx512_fma_loop};

const kernels_impl *kernels_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
               ? &avx512_impl
               : NULL;
}

#else

const kernels_impl *kernels_avx512(void) {
    return NULL;
}

#endif
