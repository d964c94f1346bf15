/* axpy_rows.c - out[t] += a[t][s] * row[s], rows in order (see axpy_rows.h).
 * A row at a time over every token, as the loop it replaces ran, loads and stores each
 * token's sums for every row: MLA's weighted sum was two thirds load, add and store of
 * them (perf annotate, 1024-token prefill of `medium`). Here a tile of 4 tokens keeps its
 * sums in registers across all its rows, so a row's columns are loaded once for 4 tokens
 * and nothing is stored until the tile ends.
 *
 * Three variants, one per instruction set (isa.h picks one): GCC's vector extension in
 * the register width of each (a 64-byte vector compiled for AVX2 went through the stack:
 * 11x slower than the loop it replaced). Each is element-wise, the same operations in the
 * same order, so they agree bit for bit. Weighted sum of 1024 positions for 32 tokens,
 * 512 columns (K3's), from cache, this VM: the old loop 1.11 ms built for AVX-512 and
 * 1.60 ms for AVX2; AVX-512 4 x 4 vectors 0.35 ms (4 x 2: 0.44); AVX2 4 x 2 0.68 ms. */
#include "axpy_rows.h"

#include <string.h>

#include "isa.h"

/* Unaligned moves (macros: a function returning the vector would change the ABI of the
 * baseline variant). */
#define VEC_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define VEC_STORE(p, v) memcpy((p), &(v), sizeof(v))

/* Tokens in a tile. */
#define TILE_TOKENS 4

/* One variant: TILE_VECS vectors of VF floats per token in a tile of 4 tokens (4 x TV sums
 * in registers), LONE_VECS for a token alone. tile_##S takes tokens [t0, t0 + NT) and
 * columns [c0, c0 + NV * VF): every token the first len0 + step * t0 rows together, then
 * with step > 0 each later token its own few more, in order. */
#define AXPY_VARIANT(S, TARGET, VF, TV, LV)                                                                          \
    typedef float vec_##S __attribute__((vector_size(VF * 4)));                                                     \
    static inline __attribute__((always_inline)) TARGET void tile_##S(const float *rows, long ldr, const float *a,   \
                                                                      long lda, int len0, int step, int t0,          \
                                                                      const int NT, const int NV, int c0,            \
                                                                      float *out, long ldo) {                        \
        vec_##S acc[TILE_TOKENS][LV];                                                                               \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)                                                        \
            _Pragma("GCC unroll 8") for (int b = 0; b < NV; b++)                                                    \
                VEC_LOAD(acc[t][b], out + (long)(t0 + t) * ldo + c0 + VF * b);                                      \
        const int common = len0 + step * t0;                                                                        \
        for (int s = 0; s < common; s++) {                                                                          \
            const float *r = rows + (long)s * ldr + c0;                                                             \
            vec_##S w[LV];                                                                                          \
            _Pragma("GCC unroll 8") for (int b = 0; b < NV; b++) VEC_LOAD(w[b], r + VF * b);                        \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {                                                  \
                const float at = a[(long)(t0 + t) * lda + s];                                                       \
                _Pragma("GCC unroll 8") for (int b = 0; b < NV; b++) acc[t][b] = acc[t][b] + w[b] * at;            \
            }                                                                                                       \
        }                                                                                                           \
        if (step > 0) {                                                                                             \
            _Pragma("GCC unroll 8") for (int t = 1; t < NT; t++) for (int s = common; s < len0 + step * (t0 + t);  \
                                                                     s++) {                                         \
                const float *r = rows + (long)s * ldr + c0;                                                         \
                const float at = a[(long)(t0 + t) * lda + s];                                                       \
                _Pragma("GCC unroll 8") for (int b = 0; b < NV; b++) {                                              \
                    vec_##S w;                                                                                      \
                    VEC_LOAD(w, r + VF * b);                                                                        \
                    acc[t][b] = acc[t][b] + w * at;                                                                 \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)                                                        \
            _Pragma("GCC unroll 8") for (int b = 0; b < NV; b++)                                                    \
                VEC_STORE(out + (long)(t0 + t) * ldo + c0 + VF * b, acc[t][b]);                                     \
    }                                                                                                               \
    static TARGET void axpy_rows_##S(const float *rows, long ldr, const float *a, long lda, int len0, int step,      \
                                     int nt, int cols, float *out, long ldo) {                                      \
        int t0 = 0;                                                                                                 \
        for (; t0 + TILE_TOKENS <= nt; t0 += TILE_TOKENS) {                                                         \
            int c0 = 0;                                                                                             \
            for (; c0 + TV * VF <= cols; c0 += TV * VF)                                                             \
                tile_##S(rows, ldr, a, lda, len0, step, t0, TILE_TOKENS, TV, c0, out, ldo);                         \
            for (; c0 + VF <= cols; c0 += VF)                                                                       \
                tile_##S(rows, ldr, a, lda, len0, step, t0, TILE_TOKENS, 1, c0, out, ldo);                          \
            for (int t = t0; t < t0 + TILE_TOKENS && c0 < cols; t++)                                                \
                columns_left(rows, ldr, a + (long)t * lda, len0 + step * t, c0, cols, out + (long)t * ldo);         \
        }                                                                                                           \
        for (; t0 < nt; t0++) {                                                                                     \
            int c0 = 0;                                                                                             \
            for (; c0 + LV * VF <= cols; c0 += LV * VF)                                                             \
                tile_##S(rows, ldr, a, lda, len0, step, t0, 1, LV, c0, out, ldo);                                   \
            for (; c0 + VF <= cols; c0 += VF)                                                                       \
                tile_##S(rows, ldr, a, lda, len0, step, t0, 1, 1, c0, out, ldo);                                    \
            if (c0 < cols)                                                                                          \
                columns_left(rows, ldr, a + (long)t0 * lda, len0 + step * t0, c0, cols, out + (long)t0 * ldo);      \
        }                                                                                                           \
    }

/* Columns [c0, cols) of one token, one at a time: those past the last whole vector. */
static void columns_left(const float *rows, long ldr, const float *a, int len, int c0, int cols, float *out) {
    for (int s = 0; s < len; s++) {
        const float *r = rows + (long)s * ldr;
        for (int c = c0; c < cols; c++)
            out[c] = out[c] + a[s] * r[c];
    }
}

/* Sums in registers: AVX-512 4 x 4 of its 32, AVX2 4 x 2 of its 16, SSE 4 x 2 of its 16. */
#ifdef ISA_X86
AXPY_VARIANT(avx512, ISA_TARGET_AVX512, 16, 4, 4)
AXPY_VARIANT(avx2, ISA_TARGET_AVX2, 8, 2, 4)
#endif
AXPY_VARIANT(base, ISA_TARGET_BASE, 4, 2, 4)

void axpy_rows_with(isa_level level, const float *rows, long ldr, const float *a, long lda, int len0, int step,
                    int nt, int cols, float *out, long ldo) {
#ifdef ISA_X86
    if (level == ISA_AVX512) {
        axpy_rows_avx512(rows, ldr, a, lda, len0, step, nt, cols, out, ldo);
        return;
    }
    if (level == ISA_AVX2) {
        axpy_rows_avx2(rows, ldr, a, lda, len0, step, nt, cols, out, ldo);
        return;
    }
#endif
    axpy_rows_base(rows, ldr, a, lda, len0, step, nt, cols, out, ldo);
}

void axpy_rows(const float *rows, long ldr, const float *a, long lda, int len0, int step, int nt, int cols,
               float *out, long ldo) {
    axpy_rows_with(isa_best(), rows, ldr, a, lda, len0, step, nt, cols, out, ldo);
}
