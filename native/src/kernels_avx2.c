/* kernels_avx2.c - AVX2/FMA twins of the scalar dot products in kernels.c. This file alone
 * is compiled with -mavx2 -mfma; kernels_avx2() checks the CPU before handing it out.
 * Per token, bf16/f32 accumulate 16 columns per step in two 8-lane accumulators, reduced in
 * a fixed order, then add a scalar tail; MXFP4 sums each 32-column block as integers * x
 * and scales the block sum, like the scalar reference. The instruction sequence for one
 * token never depends on how many tokens share the call (see kernels.h). */
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

static void avx2_dot_bf16(const uint16_t *row, const float *x, int ldx, int n, int cols, float *y) {
    __m256 a0[KERNELS_TILE], a1[KERNELS_TILE];
    for (int t = 0; t < n; t++)
        a0[t] = a1[t] = _mm256_setzero_ps();
    const int body = cols & ~15;
    for (int c = 0; c < body; c += 16) {
        const __m256 w0 = bf16x8(row + c), w1 = bf16x8(row + c + 8);
        for (int t = 0; t < n; t++) {
            const float *xt = x + (long)t * ldx + c;
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), a1[t]);
        }
    }
    for (int t = 0; t < n; t++) {
        const float *xt = x + (long)t * ldx;
        float acc = hsum8(_mm256_add_ps(a0[t], a1[t]));
        for (int c = body; c < cols; c++)
            acc += dtype_bf16_to_f32(row[c]) * xt[c];
        y[t] = acc;
    }
}

static void avx2_dot_f32(const float *row, const float *x, int ldx, int n, int cols, float *y) {
    __m256 a0[KERNELS_TILE], a1[KERNELS_TILE];
    for (int t = 0; t < n; t++)
        a0[t] = a1[t] = _mm256_setzero_ps();
    const int body = cols & ~15;
    for (int c = 0; c < body; c += 16) {
        const __m256 w0 = _mm256_loadu_ps(row + c), w1 = _mm256_loadu_ps(row + c + 8);
        for (int t = 0; t < n; t++) {
            const float *xt = x + (long)t * ldx + c;
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), a1[t]);
        }
    }
    for (int t = 0; t < n; t++) {
        const float *xt = x + (long)t * ldx;
        float acc = hsum8(_mm256_add_ps(a0[t], a1[t]));
        for (int c = body; c < cols; c++)
            acc += row[c] * xt[c];
        y[t] = acc;
    }
}

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

static void avx2_dot_mxfp4(const uint8_t *packed, const uint8_t *scale, const float *x, int ldx, int n, int cols,
                           float *y) {
    float acc[KERNELS_TILE] = {0};
    for (int b = 0; b < cols / DTYPE_MXFP4_BLOCK; b++) {
        const __m256i q = mxfp4_block_i8(packed + b * (DTYPE_MXFP4_BLOCK / 2));
        const __m128i q_lo = _mm256_castsi256_si128(q), q_hi = _mm256_extracti128_si256(q, 1);
        const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q_lo));
        const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q_lo, 8)));
        const __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q_hi));
        const __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q_hi, 8)));
        const float s = ldexpf(1.0f, (int)scale[b] - 128);
        for (int t = 0; t < n; t++) {
            const float *xb = x + (long)t * ldx + b * DTYPE_MXFP4_BLOCK;
            __m256 s0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
            __m256 s1 = _mm256_mul_ps(w1, _mm256_loadu_ps(xb + 8));
            s0 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), s0);
            s1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), s1);
            acc[t] += hsum8(_mm256_add_ps(s0, s1)) * s;
        }
    }
    for (int t = 0; t < n; t++)
        y[t] = acc[t];
}

static const kernels_impl avx2_impl = {"avx2", avx2_dot_f32, avx2_dot_bf16, avx2_dot_mxfp4};

const kernels_impl *kernels_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2_impl : NULL;
}

#else

const kernels_impl *kernels_avx2(void) {
    return NULL;
}

#endif
