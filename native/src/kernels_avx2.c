/* kernels_avx2.c - AVX2/FMA twins of the scalar dot products in kernels.c. This file alone
 * is compiled with -mavx2 -mfma; kernels_avx2() checks the CPU before handing it out.
 * Rows and tokens are served in register tiles whose bodies are specialised for their
 * shape; the instruction sequence for one (row, token) pair never depends on the tile
 * (see kernels.h). */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "dtype.h"

static inline float hsum8(__m256 v) {
    const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);             /* lanes i + (i+4) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));    /* + lanes 2,3 */
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1)); /* + lane 1 */
    return _mm_cvtss_f32(s);
}

static inline __m256 bf16x8(const uint16_t *p) {
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m256 f32x8(const float *p) {
    return _mm256_loadu_ps(p);
}

/* The body for a tile of NR rows x NT tokens, constants at every call so the accumulators
 * stay in registers. Per (row, token): two 8-lane accumulators over 16-column steps, then
 * 8-column steps into the first, then hsum8(a0 + a1), then a scalar tail. That sequence is
 * the same for every tile shape, which is what makes the result batch-invariant; the shape
 * only decides how often a weight vector or an input vector is loaded. */
#define MM_BODY(NAME, WT, LOAD8, SCALAR)                                                                             \
    static inline __attribute__((always_inline)) void NAME(const WT *rows, int cols, const float *x, int ldx,      \
                                                           float *y, int ldy, const int NR, const int NT) {        \
        __m256 a0[2][2], a1[2][2];                                                                                  \
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) a0[r][t] = a1[r][t] = _mm256_setzero_ps();        \
        const int body = cols & ~15, rest = cols & ~7;                                                              \
        int c = 0;                                                                                                  \
        for (; c < body; c += 16) {                                                                                 \
            if (NR == 1 && NT == 1) /* one token: a stream from memory (kernels.h) */                               \
                _mm_prefetch((const char *)(rows + c) + KERNELS_ONE_TOKEN_PREFETCH_BYTES, _MM_HINT_T1);             \
            __m256 x0[2], x1[2];                                                                                    \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {                                                  \
                x0[t] = _mm256_loadu_ps(x + (long)t * ldx + c);                                                     \
                x1[t] = _mm256_loadu_ps(x + (long)t * ldx + c + 8);                                                 \
            }                                                                                                       \
            _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {                                                  \
                const __m256 w0 = LOAD8(rows + (long)r * cols + c), w1 = LOAD8(rows + (long)r * cols + c + 8);      \
                _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {                                              \
                    a0[r][t] = _mm256_fmadd_ps(w0, x0[t], a0[r][t]);                                                \
                    a1[r][t] = _mm256_fmadd_ps(w1, x1[t], a1[r][t]);                                                \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        for (; c < rest; c += 8)                                                                                    \
            _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {                                                  \
                const __m256 w0 = LOAD8(rows + (long)r * cols + c);                                                 \
                _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) a0[r][t] =                                     \
                    _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (long)t * ldx + c), a0[r][t]);                          \
            }                                                                                                       \
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {                                                  \
            const WT *row = rows + (long)r * cols;                                                                  \
            const float *xt = x + (long)t * ldx;                                                                    \
            float acc = hsum8(_mm256_add_ps(a0[r][t], a1[r][t]));                                                   \
            for (int k = rest; k < cols; k++)                                                                       \
                acc += SCALAR(row[k]) * xt[k];                                                                      \
            y[(long)t * ldy + r] = acc;                                                                             \
        }                                                                                                           \
    }

static inline float same_f32(float v) {
    return v;
}

MM_BODY(mm_bf16_tile, uint16_t, bf16x8, dtype_bf16_to_f32)
MM_BODY(mm_f32_tile, float, f32x8, same_f32)

/* Bytes of weights from which one token's rows are read as two streams, the first half
 * of the rows alternating with the second: two sequential streams a megabyte or more apart
 * kept more reads in flight than one (lm_head-shaped product: 10-17 % faster); closer
 * together, or four of them, they were slower than one. */
#define TWO_STREAMS_BYTES (2L << 20)

/* Tile shapes: one token (decode) takes one row at a time, sequential weight streams,
 * which read memory faster than interleaving neighbouring rows (measured: 512 x 256 bf16
 * products 2-3x faster than with four rows sharing each input load); several tokens
 * (prefill, verification) take two rows by two tokens so each weight row is read once per
 * pair of tokens. */
#define MM_DISPATCH(NAME, TILE, WT)                                                                                  \
    static void NAME(const WT *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {         \
        if (n == 1) {                                                                                               \
            int r = 0;                                                                                              \
            if ((long)nr * cols * (long)sizeof(WT) >= TWO_STREAMS_BYTES) {                                          \
                const int half = nr / 2;                                                                            \
                for (; r < half; r++) {                                                                             \
                    TILE(rows + (long)r * cols, cols, x, ldx, y + r, ldy, 1, 1);                                    \
                    TILE(rows + (long)(r + half) * cols, cols, x, ldx, y + r + half, ldy, 1, 1);                    \
                }                                                                                                   \
                r = 2 * half;                                                                                       \
            }                                                                                                       \
            for (; r < nr; r++)                                                                                     \
                TILE(rows + (long)r * cols, cols, x, ldx, y + r, ldy, 1, 1);                                        \
            return;                                                                                                 \
        }                                                                                                           \
        for (int r = 0; r < nr; r += 2) {                                                                           \
            const WT *rr = rows + (long)r * cols;                                                                   \
            int t = 0;                                                                                              \
            if (nr - r >= 2) {                                                                                      \
                for (; t + 2 <= n; t += 2)                                                                          \
                    TILE(rr, cols, x + (long)t * ldx, ldx, y + (long)t * ldy + r, ldy, 2, 2);                       \
                if (t < n)                                                                                          \
                    TILE(rr, cols, x + (long)t * ldx, ldx, y + (long)t * ldy + r, ldy, 2, 1);                       \
            } else {                                                                                                \
                for (; t + 2 <= n; t += 2)                                                                          \
                    TILE(rr, cols, x + (long)t * ldx, ldx, y + (long)t * ldy + r, ldy, 1, 2);                       \
                if (t < n)                                                                                          \
                    TILE(rr, cols, x + (long)t * ldx, ldx, y + (long)t * ldy + r, ldy, 1, 1);                       \
            }                                                                                                       \
        }                                                                                                           \
    }

MM_DISPATCH(avx2_mm_bf16, mm_bf16_tile, uint16_t)
MM_DISPATCH(avx2_mm_f32, mm_f32_tile, float)

/* Columns 8j..8j+7 of a block as floats equal to twice their E2M1 value: the four packed
 * bytes are broadcast, lane i shifted so its nibble (low nibble = even column) sits in the
 * low bits, the magnitude looked up by vpermps (which reads only the low three bits) and the
 * nibble's top bit moved into the sign. One cross-lane shuffle per eight columns: unpacking
 * bytes to int8 and widening to int32 took several per eight, and shuffles were the
 * bottleneck of single-token MXFP4 products. */
static inline __m256 mxfp4_x8(const uint8_t *p) {
    const __m256 twice = _mm256_setr_ps(0, 1, 2, 3, 4, 6, 8, 12);
    const __m256i down = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i up = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    uint32_t word;
    memcpy(&word, p, sizeof word);
    const __m256i v = _mm256_set1_epi32((int)word);
    const __m256 mag = _mm256_permutevar8x32_ps(twice, _mm256_srlv_epi32(v, down));
    const __m256i sign = _mm256_and_si256(_mm256_sllv_epi32(v, up), _mm256_set1_epi32((int)0x80000000u));
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

/* Per token: each 32-column block's products summed in two 8-lane vectors, their sum
 * scaled by the block's power of two and accumulated into one vector; hsum8 at the end.
 * The same sequence for NT = 1 and 2 (batch invariance, see kernels.h). */
static inline __attribute__((always_inline)) void dot_mxfp4_body(const uint8_t *packed, const uint8_t *scale,
                                                                 const float *x, int ldx, int cols, float *y,
                                                                 int ldy, const int NT) {
    __m256 acc[2];
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    const int n_blocks = cols / DTYPE_MXFP4_BLOCK;
    for (int b0 = 0; b0 < n_blocks; b0 += 8) {
        /* 2^(scale - 128) for up to eight blocks, built directly in the exponent field
         * (scale 0 or 255 never occur in a valid checkpoint; scale 1 would need a subnormal
         * and is clamped to 0). Stored so each block broadcasts its own with one load. */
        int32_t pow2[8];
        const int nb = n_blocks - b0 < 8 ? n_blocks - b0 : 8;
        if (nb == 8) {
            const __m256i e = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(scale + b0))),
                                               _mm256_set1_epi32(1));
            _mm256_storeu_si256((__m256i *)pow2, _mm256_slli_epi32(_mm256_max_epi32(e, _mm256_setzero_si256()), 23));
        } else {
            for (int k = 0; k < nb; k++) {
                const int e = (int)scale[b0 + k] - 1;
                pow2[k] = e > 0 ? e << 23 : 0;
            }
        }
        for (int k = 0; k < nb; k++) {
            const int b = b0 + k;
            const uint8_t *p = packed + b * (DTYPE_MXFP4_BLOCK / 2);
            const __m256 w0 = mxfp4_x8(p), w1 = mxfp4_x8(p + 4), w2 = mxfp4_x8(p + 8), w3 = mxfp4_x8(p + 12);
            const __m256 s = _mm256_broadcast_ss((const float *)&pow2[k]);
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {
                const float *xb = x + (long)t * ldx + b * DTYPE_MXFP4_BLOCK;
                __m256 s0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
                __m256 s1 = _mm256_mul_ps(w1, _mm256_loadu_ps(xb + 8));
                s0 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), s0);
                s1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), s1);
                acc[t] = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), s, acc[t]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) y[(long)t * ldy] = hsum8(acc[t]);
}

static void avx2_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                          int cols, float *y, int ldy) {
    for (int r = 0; r < nr; r++) {
        const uint8_t *pr = packed + (long)r * (cols / 2), *sr = scale + (long)r * (cols / DTYPE_MXFP4_BLOCK);
        int t = 0;
        for (; t + 2 <= n; t += 2)
            dot_mxfp4_body(pr, sr, x + (long)t * ldx, ldx, cols, y + (long)t * ldy + r, ldy, 2);
        if (t < n)
            dot_mxfp4_body(pr, sr, x + (long)t * ldx, ldx, cols, y + (long)t * ldy + r, ldy, 1);
    }
}

/* The scalar argmax's answer (see kernels.h) eight lanes at a time. Every lane starts from
 * x[0] at index 0 and takes a value only when strictly greater, so each keeps the first
 * position of the largest value among its own positions, never NaN; four independent sets
 * of lanes hide the compare-and-blend latency. The first position of the overall largest
 * value is then the lowest index among the lanes holding it. */
static int avx2_argmax(const float *x, int n) {
    if (x[0] != x[0])
        return 0;
    const __m256 first = _mm256_set1_ps(x[0]);
    const __m256i step = _mm256_set1_epi32(32);
    __m256 best[4];
    __m256i at[4], idx[4];
    for (int k = 0; k < 4; k++) {
        best[k] = first;
        at[k] = _mm256_setzero_si256();
        idx[k] = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * k));
    }
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
            const __m256 gt = _mm256_cmp_ps(v, best[k], _CMP_GT_OQ);
            best[k] = _mm256_blendv_ps(best[k], v, gt);
            at[k] = _mm256_blendv_epi8(at[k], idx[k], _mm256_castps_si256(gt));
            idx[k] = _mm256_add_epi32(idx[k], step);
        }
    float lane_best[32];
    int lane_at[32];
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(lane_best + 8 * k, best[k]);
        _mm256_storeu_si256((__m256i *)(lane_at + 8 * k), at[k]);
    }
    return kernels_argmax_finish(lane_best, lane_at, 32, x, i, n);
}

/* Twelve independent 8-lane FMA chains: enough to cover the FMA latency on both pipes. */
static double avx2_fma_loop(long reps) {
    __m256 a[12];
    const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, b);
    __m256 sum = a[0];
    for (int i = 1; i < 12; i++)
        sum = _mm256_add_ps(sum, a[i]);
    kernels_fma_sink = hsum8(sum);
    return (double)reps * 12 * 8 * 2;
}

static const kernels_impl avx2_impl = {.name = "avx2",
                                      .mm_f32 = avx2_mm_f32,
                                      .mm_bf16 = avx2_mm_bf16,
                                      .mm_mxfp4 = avx2_mm_mxfp4,
                                      .argmax = avx2_argmax,
                                      .fma_loop = avx2_fma_loop};

const kernels_impl *kernels_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2_impl : NULL;
}

#else

const kernels_impl *kernels_avx2(void) {
    return NULL;
}

#endif
