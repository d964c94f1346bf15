/* test_axpy_rows.c - axpy_rows and each variant this CPU runs against the one-element-at-a-
 * time loop they stand for, bit for bit: whole tiles, lone tokens, columns past the last vector, strided rows and
 * outputs, every token its own count of rows (step 1) or the same (step 0), and sums that
 * start from what the output already holds. */
#include <string.h>

#include "axpy_rows.h"
#include "harness.h"

/* out[t][c] = out[t][c] + a[t][s] * rows[s][c], s in order: each product rounded, then the
 * sum (the build compiles without contraction into FMA). */
static void reference(const float *rows, long ldr, const float *a, long lda, int len0, int step, int nt, int cols,
                      float *out, long ldo) {
    for (int t = 0; t < nt; t++)
        for (int s = 0; s < len0 + step * t; s++)
            for (int c = 0; c < cols; c++)
                out[t * ldo + c] = out[t * ldo + c] + a[t * lda + s] * rows[s * ldr + c];
}

/* Values whose sums round at every step: products and partial sums of mixed magnitude. */
static float value(unsigned i) {
    const unsigned h = i * 2654435761u;
    return ((float)(h >> 8) / 16777216.0f - 0.5f) * (float)(1u << (h % 7));
}

TEST(axpy_rows_gives_the_loops_bits_for_every_tile_shape_stride_and_step) {
    enum { MAX_ROWS = 80, MAX_COLS = 100, MAX_T = 11, LDR = 113, LDA = 97, LDO = 107 };
    static float rows[MAX_ROWS * LDR], a[MAX_T * LDA], got[MAX_T * LDO], want[MAX_T * LDO],
        start[MAX_T * LDO];
    for (unsigned i = 0; i < MAX_ROWS * LDR; i++)
        rows[i] = value(i);
    for (unsigned i = 0; i < MAX_T * LDA; i++)
        a[i] = value(i + 7919u) * 0.125f;
    const int cols_cases[] = {1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 100};
    int cases = 0;
    for (int ci = 0; ci < (int)(sizeof cols_cases / sizeof cols_cases[0]); ci++)
        for (int nt = 1; nt <= MAX_T; nt++)
            for (int step = 0; step <= 1; step++)
                for (int len0 = step; len0 <= MAX_ROWS - step * MAX_T; len0 += 23) {
                    const int cols = cols_cases[ci];
                    for (unsigned i = 0; i < MAX_T * LDO; i++)
                        start[i] = want[i] = value(i + 104729u); /* sums go on from these */
                    reference(rows, LDR, a, LDA, len0, step, nt, cols, want, LDO);
                    for (int v = ISA_BASE; v <= ISA_AVX512 + 1; v++) {
                        memcpy(got, start, sizeof got);
                        if (v > ISA_AVX512)
                            axpy_rows(rows, LDR, a, LDA, len0, step, nt, cols, got, LDO);
                        else if (isa_supported((isa_level)v))
                            axpy_rows_with((isa_level)v, rows, LDR, a, LDA, len0, step, nt, cols, got, LDO);
                        else
                            continue;
                        if (memcmp(got, want, sizeof got) != 0) {
                            harness_fail(__FILE__, __LINE__, "variant %d, cols %d, %d tokens, step %d, len0 %d: bits differ",
                                         v, cols, nt, step, len0);
                            return;
                        }
                        cases++;
                    }
                }
    CHECK(cases > 2000); /* the baseline, the widest, and whatever lies between */
}
