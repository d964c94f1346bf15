/* kernels_avx2.c - AVX2/FMA twins of the scalar dot products in kernels.c. This file alone
 * is compiled with -mavx2 -mfma; kernels_avx2() checks the CPU before handing it out.
 * Rows and tokens are served in register tiles whose bodies are specialised for their
 * shape; the instruction sequence for one (row, token) pair never depends on the tile
 * (see kernels.h). */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>
#include <math.h>

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
        __m256 a0[4][2], a1[4][2];                                                                                  \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) a0[r][t] = a1[r][t] = _mm256_setzero_ps();        \
        const int body = cols & ~15, rest = cols & ~7;                                                              \
        int c = 0;                                                                                                  \
        for (; c < body; c += 16) {                                                                                 \
            __m256 x0[2], x1[2];                                                                                    \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {                                                  \
                x0[t] = _mm256_loadu_ps(x + (long)t * ldx + c);                                                     \
                x1[t] = _mm256_loadu_ps(x + (long)t * ldx + c + 8);                                                 \
            }                                                                                                       \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                                  \
                const __m256 w0 = LOAD8(rows + (long)r * cols + c), w1 = LOAD8(rows + (long)r * cols + c + 8);      \
                _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {                                              \
                    a0[r][t] = _mm256_fmadd_ps(w0, x0[t], a0[r][t]);                                                \
                    a1[r][t] = _mm256_fmadd_ps(w1, x1[t], a1[r][t]);                                                \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        for (; c < rest; c += 8)                                                                                    \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                                  \
                const __m256 w0 = LOAD8(rows + (long)r * cols + c);                                                 \
                _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) a0[r][t] =                                     \
                    _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (long)t * ldx + c), a0[r][t]);                          \
            }                                                                                                       \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                        \
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

/* Tile shapes: one token (decode) takes four rows at a time, so four weight streams share
 * each input load; several tokens (prefill, verification) take two rows by two tokens. */
#define MM_DISPATCH(NAME, TILE, WT)                                                                                  \
    static void NAME(const WT *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {         \
        if (n == 1 && cols > 256) {                                                                                 \
            for (int r = 0; r < nr; r++)                                                                            \
                TILE(rows + (long)r * cols, cols, x, ldx, y + r, ldy, 1, 1);                                        \
            return;                                                                                                 \
        }                                                                                                           \
        if (n == 1) {                                                                                               \
            switch (nr) {                                                                                           \
            case 4: TILE(rows, cols, x, ldx, y, ldy, 4, 1); break;                                                  \
            case 3: TILE(rows, cols, x, ldx, y, ldy, 3, 1); break;                                                  \
            case 2: TILE(rows, cols, x, ldx, y, ldy, 2, 1); break;                                                  \
            default: TILE(rows, cols, x, ldx, y, ldy, 1, 1); break;                                                 \
            }                                                                                                       \
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

/* 16 packed bytes (32 nibbles, low nibble = even column) -> 32 signed int8 values equal to
 * twice the E2M1 value, in column order. */
static inline __m256i mxfp4_block_i8(const uint8_t *p) {
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i bytes = _mm_loadu_si128((const __m128i *)p);
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(bytes, mask));
    const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(bytes, 4), mask));
    /* Interleave so column 2i = lo[i], column 2i+1 = hi[i]. */
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

/* Per token: each 32-column block's products summed in two 8-lane vectors, their sum
 * scaled by the block's power of two and accumulated into one vector; hsum8 at the end. */
static inline void dot_mxfp4_body(const uint8_t *packed, const uint8_t *scale, const float *x, int ldx, int cols,
                                  float *y, const int NT) {
    __m256 acc[2];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < cols / DTYPE_MXFP4_BLOCK; b++) {
        const __m256i q = mxfp4_block_i8(packed + b * (DTYPE_MXFP4_BLOCK / 2));
        const __m128i q_lo = _mm256_castsi256_si128(q), q_hi = _mm256_extracti128_si256(q, 1);
        const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q_lo));
        const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q_lo, 8)));
        const __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q_hi));
        const __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q_hi, 8)));
        /* 2^(scale - 128) built directly in the exponent field (scale 0 or 255 never occur
         * in a valid checkpoint; scale 1 would need a subnormal and is clamped to 0). */
        const int e = (int)scale[b] - 1;
        const __m256 s = _mm256_castsi256_ps(_mm256_set1_epi32(e > 0 ? e << 23 : 0));
        for (int t = 0; t < NT; t++) {
            const float *xb = x + (long)t * ldx + b * DTYPE_MXFP4_BLOCK;
            __m256 s0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
            __m256 s1 = _mm256_mul_ps(w1, _mm256_loadu_ps(xb + 8));
            s0 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), s0);
            s1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), s1);
            acc[t] = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), s, acc[t]);
        }
    }
    for (int t = 0; t < NT; t++)
        y[t] = hsum8(acc[t]);
}

static void avx2_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                          int cols, float *y, int ldy) {
    float out[2];
    for (int r = 0; r < nr; r++) {
        const uint8_t *pr = packed + (long)r * (cols / 2), *sr = scale + (long)r * (cols / DTYPE_MXFP4_BLOCK);
        int t = 0;
        for (; t + 2 <= n; t += 2) {
            dot_mxfp4_body(pr, sr, x + (long)t * ldx, ldx, cols, out, 2);
            y[(long)t * ldy + r] = out[0];
            y[(long)(t + 1) * ldy + r] = out[1];
        }
        if (t < n) {
            dot_mxfp4_body(pr, sr, x + (long)t * ldx, ldx, cols, out, 1);
            y[(long)t * ldy + r] = out[0];
        }
    }
}

static const kernels_impl avx2_impl = {"avx2", avx2_mm_f32, avx2_mm_bf16, avx2_mm_mxfp4};

const kernels_impl *kernels_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2_impl : NULL;
}

#else

const kernels_impl *kernels_avx2(void) {
    return NULL;
}

#endif
