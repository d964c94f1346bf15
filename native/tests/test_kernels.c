/* test_kernels.c - the matrix kernels: every SIMD twin equals the scalar reference within
 * rounding on odd shapes, the scalar reference equals a double-precision sum, and results
 * are bit-identical whatever the batch size and the thread count. */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"
#include "kernels.h"
#include "threads.h"

/* Deterministic pseudo-random numbers in [-1, 1). */
static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct {
    kernels_matrix m;
    void *data;
    uint8_t *scale;
} test_matrix;

static test_matrix make_matrix(kernels_wtype type, int rows, int cols, unsigned seed) {
    test_matrix t = {{type, rows, cols, NULL, NULL}, NULL, NULL};
    if (type == KERNELS_F32) {
        float *d = malloc(sizeof(float) * rows * cols);
        for (int i = 0; i < rows * cols; i++)
            d[i] = rnd(&seed);
        t.data = d;
    } else if (type == KERNELS_BF16) {
        uint16_t *d = malloc(sizeof(uint16_t) * rows * cols);
        for (int i = 0; i < rows * cols; i++)
            d[i] = dtype_f32_to_bf16(rnd(&seed));
        t.data = d;
    } else {
        uint8_t *d = malloc((size_t)rows * cols / 2);
        t.scale = malloc((size_t)rows * cols / 32);
        for (int i = 0; i < rows * cols / 2; i++)
            d[i] = (uint8_t)(rnd(&seed) * 128 + 128);
        for (int i = 0; i < rows * cols / 32; i++)
            t.scale[i] = (uint8_t)(120 + (int)((rnd(&seed) + 1) * 5)); /* 2^-7 .. 2^2 */
        t.data = d;
    }
    t.m.data = t.data;
    t.m.scale = t.scale;
    return t;
}

static void free_matrix(test_matrix *t) {
    free(t->data);
    free(t->scale);
}

/* The exact value of W[r][c] as a double. */
static double weight_at(const kernels_matrix *m, int r, int c) {
    if (m->type == KERNELS_F32)
        return ((const float *)m->data)[(long)r * m->cols + c];
    if (m->type == KERNELS_BF16)
        return dtype_bf16_to_f32(((const uint16_t *)m->data)[(long)r * m->cols + c]);
    const uint8_t b = ((const uint8_t *)m->data)[(long)r * m->cols / 2 + c / 2];
    return (double)dtype_e2m1_value(c & 1 ? b >> 4 : b & 15) * dtype_e8m0_value(m->scale[(long)r * m->cols / 32 + c / 32]);
}

/* y (n tokens of m->rows) within 1e-6 of each output's sum of |w x| (plus `absolute`) of
 * the float64 sum of m times x (n rows of m->cols). */
static void check_against_double(const kernels_matrix *m, const float *x, int n, const float *y, double absolute) {
    for (int t = 0; t < n; t++)
        for (int r = 0; r < m->rows; r++) {
            double want = 0, mag = 0;
            for (int c = 0; c < m->cols; c++) {
                want += weight_at(m, r, c) * x[t * m->cols + c];
                mag += fabs(weight_at(m, r, c) * x[t * m->cols + c]);
            }
            CHECK_NEAR(y[t * m->rows + r], want, 1e-6 * mag + absolute);
        }
}

static float *make_input(int n, int cols, unsigned seed) {
    float *x = malloc(sizeof(float) * n * cols);
    for (int i = 0; i < n * cols; i++)
        x[i] = rnd(&seed);
    return x;
}

static const kernels_wtype all_types[] = {KERNELS_F32, KERNELS_BF16, KERNELS_MXFP4};

TEST(scalar_kernels_match_a_double_precision_sum) {
    for (int k = 0; k < 3; k++) {
        const int rows = 37, cols = k == 2 ? 96 : 53, n = 5;
        test_matrix w = make_matrix(all_types[k], rows, cols, 7u + k);
        float *x = make_input(n, cols, 99u), *y = malloc(sizeof(float) * n * rows);
        kernels_matmul(&kernels_scalar, &w.m, x, cols, n, y, rows, NULL);
        check_against_double(&w.m, x, n, y, 1e-7);
        free(x);
        free(y);
        free_matrix(&w);
    }
}

/* The SIMD implementations this CPU runs, NULL where it lacks one (each test says so). */
static const kernels_impl *simd_impl(int i) {
    static const char *const names[] = {"AVX2/FMA", "AVX-512", "AMX"};
    const kernels_impl *impl = i == 0 ? kernels_avx2() : i == 1 ? kernels_avx512() : kernels_amx();
    if (!impl)
        printf("  (no %s on this CPU: not tested here)\n", names[i]);
    return impl;
}

static void check_against_scalar(const kernels_impl *simd) {
    /* {3, 4160}: four tokens' MXFP4 inputs no longer fit the AVX-512 kernel's stack. */
    static const int shapes[][2] = {{1, 32},   {3, 17},   {7, 33}, {13, 100}, {5, 1},    {29, 160},
                                    {2, 4096}, {6, 15},   {9, 1040}, {4, 64},  {3, 4160}};
    for (int k = 0; k < 3; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            if (all_types[k] == KERNELS_MXFP4)
                cols = (cols + 31) / 32 * 32;
            for (int n = 1; n <= 13; n += 3) {
                test_matrix w = make_matrix(all_types[k], rows, cols, 11u * (unsigned)s + k);
                float *x = make_input(n, cols + 3, 5u), *ya = malloc(sizeof(float) * n * rows),
                      *yb = malloc(sizeof(float) * n * rows);
                kernels_matmul(&kernels_scalar, &w.m, x, cols + 3, n, ya, rows, NULL);
                kernels_matmul(simd, &w.m, x, cols + 3, n, yb, rows, NULL);
                for (int i = 0; i < n * rows; i++)
                    CHECK_NEAR(yb[i], ya[i], 2e-6 * sqrt((double)cols) * (1 + fabs(ya[i])));
                free(x);
                free(ya);
                free(yb);
                free_matrix(&w);
            }
        }
}

/* Every token count from 1 to 13 covers full and partial token tiles of each
 * implementation; rows 1 to 9 full and partial row tiles. */
TEST(simd_kernels_equal_the_scalar_reference_on_odd_shapes) {
    for (int i = 0; i < 3; i++) {
        const kernels_impl *simd = simd_impl(i);
        if (simd)
            check_against_scalar(simd);
    }
}

/* One token alone, or the same token inside a batch of 5, gives the same bits, on one
 * thread or two. The matrix is big enough (over 128K multiply-adds per token) that
 * kernels_matmul hands even a single token's product to the pool. */
TEST(matmul_is_bit_identical_across_batch_sizes_and_thread_counts) {
    threads *pool2 = NULL;
    CHECK(threads_new(2, &pool2, NULL) == K3_OK);
    const kernels_impl *impls[4] = {&kernels_scalar, kernels_avx2(), kernels_avx512(), kernels_amx()};
    for (int i = 0; i < 4; i++) {
        if (!impls[i])
            continue;
        for (int k = 0; k < 3; k++) {
            /* 13 tokens: full and partial token tiles of every implementation. MXFP4: 224
             * columns, a whole 128-column chunk and three single blocks (kernels_avx512.c). */
            const int rows = 33001, cols = k == 2 ? 224 : 133, n = 13;
            test_matrix w = make_matrix(all_types[k], rows, cols, 3u + k);
            float *x = make_input(n, cols, 17u);
            float *batch = malloc(sizeof(float) * n * rows), *threaded = malloc(sizeof(float) * n * rows),
                  *single = malloc(sizeof(float) * rows);
            kernels_matmul(impls[i], &w.m, x, cols, n, batch, rows, NULL);
            kernels_matmul(impls[i], &w.m, x, cols, n, threaded, rows, pool2);
            CHECK(memcmp(batch, threaded, sizeof(float) * n * rows) == 0);
            for (int t = 0; t < n; t++) {
                kernels_matmul(impls[i], &w.m, x + t * cols, cols, 1, single, rows, pool2);
                CHECK(memcmp(single, batch + t * rows, sizeof(float) * rows) == 0);
            }
            free(x);
            free(batch);
            free(threaded);
            free(single);
            free_matrix(&w);
        }
    }
    threads_free(pool2);
}

typedef struct {
    const kernels_impl *impl;
    const kernels_matrix *w;
    const float *x;
    int n;
    float *y;
} whole_product_job;

static void whole_product(void *arg, int begin, int end) {
    const whole_product_job *j = arg;
    if (begin == 0 && end > 0)
        kernels_matmul(j->impl, j->w, j->x, j->w->cols, j->n, j->y, j->w->rows, NULL);
}

/* An MXFP4 batch computed as one task of a loop that two threads share (as a routed
 * expert's products are) has the bits it has outside any loop; the AVX-512 kernel then
 * stages its outputs (kernels_avx512.c). 2,500 rows: two whole blocks of staged rows and a
 * partial one; 13 tokens: whole token tiles and a lone token. Outputs start as NaN, so a
 * value left unwritten cannot pass. */
TEST(mxfp4_batches_in_a_shared_loop_equal_those_outside) {
    threads *pool2 = NULL;
    CHECK(threads_new(2, &pool2, NULL) == K3_OK);
    const kernels_impl *impls[4] = {&kernels_scalar, kernels_avx2(), kernels_avx512(), kernels_amx()};
    const int rows = 2500, cols = 224, n = 13;
    test_matrix w = make_matrix(KERNELS_MXFP4, rows, cols, 61u);
    float *x = make_input(n, cols, 67u);
    float *want = malloc(sizeof(float) * n * rows), *got = malloc(sizeof(float) * n * rows);
    for (int i = 0; i < 4; i++) {
        if (!impls[i])
            continue;
        kernels_matmul(impls[i], &w.m, x, cols, n, want, rows, NULL);
        memset(got, 0xff, sizeof(float) * n * rows);
        whole_product_job job = {impls[i], &w.m, x, n, got};
        threads_run(pool2, 2, 1, whole_product, &job);
        CHECK(memcmp(want, got, sizeof(float) * n * rows) == 0);
    }
    free(x);
    free(want);
    free(got);
    free_matrix(&w);
    threads_free(pool2);
}

/* A batch of bf16 tokens big enough for the AVX-512 kernel to widen its rows to f32 first
 * (kernels_avx512.c: 48 tokens or more, rows of at most 1,024 columns) gives each token the
 * bits it gets alone, on one thread or two: 53 tokens (whole and partial token tiles), 1,001
 * rows (several blocks of widened rows, the last one partial, and a partial row tile), 133
 * columns (a masked tail), the rows starting 2 bytes past an aligned address as a shard's
 * may. */
TEST(widened_bf16_batches_are_bit_identical_to_single_tokens) {
    threads *pool2 = NULL;
    CHECK(threads_new(2, &pool2, NULL) == K3_OK);
    const kernels_impl *impls[4] = {&kernels_scalar, kernels_avx2(), kernels_avx512(), kernels_amx()};
    const int rows = 1001, cols = 133, n = 53;
    test_matrix w = make_matrix(KERNELS_BF16, rows + 1, cols, 29u);
    kernels_matrix shifted = w.m;
    shifted.rows = rows;
    shifted.data = (const uint16_t *)w.data + 1;
    float *x = make_input(n, cols, 31u);
    float *batch = malloc(sizeof(float) * n * rows), *threaded = malloc(sizeof(float) * n * rows),
          *single = malloc(sizeof(float) * rows);
    for (int i = 0; i < 4; i++) {
        if (!impls[i])
            continue;
        kernels_matmul(impls[i], &shifted, x, cols, n, batch, rows, NULL);
        kernels_matmul(impls[i], &shifted, x, cols, n, threaded, rows, pool2);
        CHECK(memcmp(batch, threaded, sizeof(float) * n * rows) == 0);
        for (int t = 0; t < n; t++) {
            kernels_matmul(impls[i], &shifted, x + t * cols, cols, 1, single, rows, NULL);
            CHECK(memcmp(single, batch + (long)t * rows, sizeof(float) * rows) == 0);
        }
    }
    free(x);
    free(batch);
    free(threaded);
    free(single);
    free_matrix(&w);
    threads_free(pool2);
}

/* A batch whose input is too big for an implementation to keep in cache at once, so it
 * takes the columns in slices and the tokens in groups (kernels_amx.c: about 1 MB of
 * prepared input, 130 tokens a group), gives each token the bits it gets alone: 140
 * tokens, 4,160 columns (130 MXFP4 blocks), 37 rows (a partial row tile), bf16 and MXFP4. */
TEST(sliced_batches_are_bit_identical_to_single_tokens) {
    const kernels_impl *impls[4] = {&kernels_scalar, kernels_avx2(), kernels_avx512(), kernels_amx()};
    const int rows = 37, cols = 4160, n = 140;
    float *x = make_input(n, cols, 37u);
    float *batch = malloc(sizeof(float) * n * rows), *single = malloc(sizeof(float) * rows);
    for (int k = 1; k < 3; k++) {
        test_matrix w = make_matrix(all_types[k], rows, cols, 43u + k);
        for (int i = 0; i < 4; i++) {
            if (!impls[i])
                continue;
            kernels_matmul(impls[i], &w.m, x, cols, n, batch, rows, NULL);
            for (int t = 0; t < n; t += 13) {
                kernels_matmul(impls[i], &w.m, x + (long)t * cols, cols, 1, single, rows, NULL);
                CHECK(memcmp(single, batch + (long)t * rows, sizeof(float) * rows) == 0);
            }
        }
        free_matrix(&w);
    }
    free(x);
    free(batch);
    free(single);
}

/* MXFP4 blocks with scales at the edges: 0 and 1 (values below f32's normal range, which
 * the SIMD kernels take as 0), 2 and 252 (the smallest and largest whose every value bf16
 * holds as a normal number: kernels_amx.c's vector case), 253 (past it: values up to 3 only,
 * so that the products stay finite) and an ordinary 126. Rows 0-5 have one of them in all
 * three blocks (a pair and a last odd one), rows 6-8 a mix; inputs of about 1e-30. Every
 * implementation is within 1e-6 of each output's sum of |w x| of the float64 sum (so a
 * wrong value in a row of tiny scales shows), and a batch gives each token its bits alone. */
TEST(mxfp4_scales_at_the_edges_match_the_reference_and_single_tokens) {
    static const uint8_t edges[] = {0, 1, 2, 126, 252, 253};
    const int rows = 9, cols = 96, n = 13;
    test_matrix w = make_matrix(KERNELS_MXFP4, rows, cols, 61u);
    uint8_t *packed = w.data;
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < 3; b++) {
            const uint8_t e = edges[(r < 6 ? r : r + b) % 6];
            w.scale[3 * r + b] = e;
            for (int i = 0; e == 253 && i < 32; i++) { /* codes of magnitude 3 or less */
                uint8_t *byte = &packed[(long)r * cols / 2 + 16 * b + i / 2];
                const int shift = 4 * (i & 1), code = *byte >> shift & 15;
                if ((code & 7) > 5)
                    *byte = (uint8_t)((*byte & ~(15 << shift)) | ((code & 8) | 5) << shift);
            }
        }
    float *x = make_input(n, cols, 67u);
    for (int i = 0; i < n * cols; i++)
        x[i] *= 1e-30f;
    float *got = malloc(sizeof(float) * n * rows), *single = malloc(sizeof(float) * rows);
    const kernels_impl *impls[4] = {&kernels_scalar, kernels_avx2(), kernels_avx512(), kernels_amx()};
    for (int i = 0; i < 4; i++) {
        if (!impls[i])
            continue;
        kernels_matmul(impls[i], &w.m, x, cols, n, got, rows, NULL);
        check_against_double(&w.m, x, n, got, 1e-37);
        for (int t = 0; t < n; t++) {
            kernels_matmul(impls[i], &w.m, x + (long)t * cols, cols, 1, single, rows, NULL);
            CHECK(memcmp(single, got + (long)t * rows, sizeof(float) * rows) == 0);
        }
    }
    free(x);
    free(got);
    free(single);
    free_matrix(&w);
}

/* A set of products of one input equals each product on its own, bit for bit, on one
 * thread or two and for one token or a batch: row counts not multiples of the set's 32-row
 * units, all three weight types, one set big enough for the pool and one that is not. */
TEST(matmul_same_input_equals_the_products_one_by_one) {
    threads *pool2 = NULL;
    CHECK(threads_new(2, &pool2, NULL) == K3_OK);
    const kernels_impl *impl = kernels_best();
    const int cols = 160, n_tok = 3;
    for (int big = 0; big < 2; big++) {
        const int rows[3] = {big ? 1000 : 7, big ? 45 : 33, big ? 513 : 1};
        test_matrix w[3];
        kernels_product set[3];
        float *want[3];
        float *x = make_input(n_tok, cols, 23u);
        for (int i = 0; i < 3; i++) {
            w[i] = make_matrix(all_types[i], rows[i], cols, 40u + i);
            set[i] = (kernels_product){&w[i].m, malloc(sizeof(float) * n_tok * rows[i]), rows[i]};
            want[i] = malloc(sizeof(float) * n_tok * rows[i]);
            kernels_matmul(impl, &w[i].m, x, cols, n_tok, want[i], rows[i], NULL);
        }
        for (int threaded = 0; threaded < 2; threaded++) {
            for (int i = 0; i < 3; i++) /* NaN: a row left unwritten cannot pass */
                memset(set[i].y, 0xff, sizeof(float) * n_tok * rows[i]);
            for (int t = 0; t < n_tok; t++) {
                kernels_product one[3];
                for (int i = 0; i < 3; i++)
                    one[i] = (kernels_product){set[i].w, set[i].y + (long)t * rows[i], rows[i]};
                kernels_matmul_same_input(impl, one, 3, x + (long)t * cols, cols, 1, threaded ? pool2 : NULL);
            }
            for (int i = 0; i < 3; i++)
                CHECK(memcmp(set[i].y, want[i], sizeof(float) * n_tok * rows[i]) == 0);
            for (int i = 0; i < 3; i++)
                memset(set[i].y, 0xff, sizeof(float) * n_tok * rows[i]);
            kernels_matmul_same_input(impl, set, 3, x, cols, n_tok, threaded ? pool2 : NULL);
            for (int i = 0; i < 3; i++)
                CHECK(memcmp(set[i].y, want[i], sizeof(float) * n_tok * rows[i]) == 0);
        }
        for (int i = 0; i < 3; i++) {
            free(set[i].y);
            free(want[i]);
            free_matrix(&w[i]);
        }
        free(x);
    }
    threads_free(pool2);
}

/* The argmax answers exactly as the scalar loop: first index on ties (including ties
 * spread across SIMD lanes and in the tail), NaN never chosen unless it is x[0]. */
static void check_argmax(const kernels_impl *simd) {
    static const int lengths[] = {1, 2, 7, 31, 32, 33, 63, 64, 65, 95, 1000, 4099};
    float *x = malloc(sizeof(float) * 4099);
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const int n = lengths[l];
        for (int kind = 0; kind < 7; kind++) {
            unsigned seed = 31u * (unsigned)l + (unsigned)kind;
            for (int i = 0; i < n; i++)
                x[i] = rnd(&seed);
            if (kind == 1) /* a few distinct values: many ties at the maximum */
                for (int i = 0; i < n; i++)
                    x[i] = (float)(int)(x[i] * 2);
            if (kind == 2) /* all equal, signed zeros mixed in */
                for (int i = 0; i < n; i++)
                    x[i] = i % 3 ? 0.0f : -0.0f;
            if (kind == 3) /* NaN first */
                x[0] = NAN;
            if (kind == 4) /* NaN scattered and the maximum in the tail */
                for (int i = 1; i < n; i += 5)
                    x[i] = NAN;
            if (kind == 4 || kind == 5)
                x[n - 1] = 2.0f;
            if (kind == 6) /* -inf everywhere but one late NaN */
                for (int i = 0; i < n; i++)
                    x[i] = i == n / 2 && i > 0 ? NAN : -INFINITY;
            CHECK_INT(simd->argmax(x, n), kernels_scalar.argmax(x, n));
        }
    }
    /* Known answers: the first of equal maxima, in different lanes and sets of lanes. */
    for (int i = 0; i < 100; i++)
        x[i] = 0.0f;
    x[70] = x[41] = x[99] = 1.0f;
    CHECK_INT(kernels_scalar.argmax(x, 100), 41);
    CHECK_INT(simd->argmax(x, 100), 41);
    free(x);
}

TEST(simd_argmax_equals_the_scalar_reference_on_ties_nan_and_odd_lengths) {
    for (int i = 0; i < 3; i++) {
        const kernels_impl *simd = simd_impl(i);
        if (simd)
            check_argmax(simd);
    }
}
