/* axpy_rows.h - out[t] += a[t][s] * row[s] for s in order: a run of axpy's per token, with
 * the sums of a tile of tokens and columns held in registers across the rows.
 * MLA uses it twice (mla.c): the query absorption (a token's q_nope weights the W_UK rows)
 * and the weighted sum of cache rows (a token's attention weights, each token over the
 * positions up to its own). Each output element is the scalar loop's
 *     for s in [0, len_t): out[t][c] = out[t][c] + (a[t][s] * row[s][c])
 * with the product rounded, then the sum (no fused multiply-add: -ffp-contract=off), so
 * the bits never depend on the tile, the clone or the batch. */
#ifndef K3_AXPY_ROWS_H
#define K3_AXPY_ROWS_H

#include "isa.h"

/* For t < nt and c < cols: out[t * ldo + c] += sum over s < len0 + step * t, in order, of
 * a[t * lda + s] * rows[s * ldr + c]. step >= 0 (0: every token takes len0 rows; 1: a
 * causal group, each token one position further than the one before). */
void axpy_rows(const float *rows, long ldr, const float *a, long lda, int len0, int step, int nt, int cols,
               float *out, long ldo);

/* The same with the variant of one instruction-set level (isa.h; the CPU must run it):
 * axpy_rows uses isa_best()'s. */
void axpy_rows_with(isa_level level, const float *rows, long ldr, const float *a, long lda, int len0, int step,
                    int nt, int cols, float *out, long ldo);

#endif
