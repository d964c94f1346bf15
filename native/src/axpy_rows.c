/* axpy_rows.c - out[t] += a[t][s] * row[s], rows in order (see axpy_rows.h).
 * A row at a time over every token, as the loop it replaces ran, loads and stores each
 * token's sums for every row: MLA's weighted sum was two thirds load, add and store of
 * them (perf annotate, 1024-token prefill of `medium`). Here a tile of 4 tokens x 32
 * columns keeps its 8 vectors of sums in registers across all its rows, so a row's 32
 * columns are loaded once for 4 tokens and nothing is stored until the tile ends. */
#include "axpy_rows.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time: element-wise in
 * each, the same operations in the same order, so the clones agree bit for bit. */
#define AXPY_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define AXPY_CLONES
#endif

/* GCC's vector extension: a 16-float register in the AVX-512 clone, two in AVX2. */
typedef float axpy_vec __attribute__((vector_size(64)));
#define VEC_FLOATS 16

/* Unaligned moves (macros: a function returning the vector would change the ABI of the
 * default clone). */
#define VEC_LOAD(v, p) memcpy(&(v), (p), sizeof(axpy_vec))
#define VEC_STORE(p, v) memcpy((p), &(v), sizeof(axpy_vec))

/* Tokens and vectors of columns in a tile: 4 x 2 sums take 8 of AVX-512's 32 registers
 * (16 of AVX2's 16); one token alone takes 4 vectors. */
#define TILE_TOKENS 4
#define TILE_VECS 2
#define LONE_VECS 4

/* Tokens [t0, t0 + NT), columns [c0, c0 + NV * 16). Every token takes the first
 * len0 + step * t0 rows together; with step > 0 each later token then its own few more,
 * in order. */
static inline __attribute__((always_inline)) void tile(const float *rows, long ldr, const float *a, long lda,
                                                      int len0, int step, int t0, const int NT, const int NV, int c0,
                                                      float *out, long ldo) {
    axpy_vec acc[TILE_TOKENS][LONE_VECS];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4") for (int b = 0; b < NV; b++)
            VEC_LOAD(acc[t][b], out + (long)(t0 + t) * ldo + c0 + VEC_FLOATS * b);
    const int common = len0 + step * t0;
    for (int s = 0; s < common; s++) {
        const float *r = rows + (long)s * ldr + c0;
        axpy_vec w[LONE_VECS];
        _Pragma("GCC unroll 4") for (int b = 0; b < NV; b++)
            VEC_LOAD(w[b], r + VEC_FLOATS * b);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const float at = a[(long)(t0 + t) * lda + s];
            _Pragma("GCC unroll 4") for (int b = 0; b < NV; b++)
                acc[t][b] = acc[t][b] + w[b] * at;
        }
    }
    _Pragma("GCC unroll 4") for (int t = 1; t < NT && step > 0; t++)
        for (int s = common; s < len0 + step * (t0 + t); s++) {
            const float *r = rows + (long)s * ldr + c0;
            const float at = a[(long)(t0 + t) * lda + s];
            _Pragma("GCC unroll 4") for (int b = 0; b < NV; b++) {
                axpy_vec w;
                VEC_LOAD(w, r + VEC_FLOATS * b);
                acc[t][b] = acc[t][b] + w * at;
            }
        }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4") for (int b = 0; b < NV; b++)
            VEC_STORE(out + (long)(t0 + t) * ldo + c0 + VEC_FLOATS * b, acc[t][b]);
}

/* Columns [c0, cols) of token t, one at a time: the columns past the last whole vector. */
static void columns_left(const float *rows, long ldr, const float *a, int len, int c0, int cols, float *out) {
    for (int s = 0; s < len; s++) {
        const float *r = rows + (long)s * ldr;
        for (int c = c0; c < cols; c++)
            out[c] = out[c] + a[s] * r[c];
    }
}

AXPY_CLONES
void axpy_rows(const float *rows, long ldr, const float *a, long lda, int len0, int step, int nt, int cols,
               float *out, long ldo) {
    const int tile_cols = TILE_VECS * VEC_FLOATS;
    int t0 = 0;
    for (; t0 + TILE_TOKENS <= nt; t0 += TILE_TOKENS) {
        int c0 = 0;
        for (; c0 + tile_cols <= cols; c0 += tile_cols)
            tile(rows, ldr, a, lda, len0, step, t0, TILE_TOKENS, TILE_VECS, c0, out, ldo);
        for (; c0 + VEC_FLOATS <= cols; c0 += VEC_FLOATS)
            tile(rows, ldr, a, lda, len0, step, t0, TILE_TOKENS, 1, c0, out, ldo);
        for (int t = t0; t < t0 + TILE_TOKENS && c0 < cols; t++)
            columns_left(rows, ldr, a + (long)t * lda, len0 + step * t, c0, cols, out + (long)t * ldo);
    }
    for (; t0 < nt; t0++) {
        int c0 = 0;
        for (; c0 + LONE_VECS * VEC_FLOATS <= cols; c0 += LONE_VECS * VEC_FLOATS)
            tile(rows, ldr, a, lda, len0, step, t0, 1, LONE_VECS, c0, out, ldo);
        for (; c0 + VEC_FLOATS <= cols; c0 += VEC_FLOATS)
            tile(rows, ldr, a, lda, len0, step, t0, 1, 1, c0, out, ldo);
        if (c0 < cols)
            columns_left(rows, ldr, a + (long)t0 * lda, len0 + step * t0, c0, cols, out + (long)t0 * ldo);
    }
}
