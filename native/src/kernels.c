/* kernels.c - the scalar reference products, the split of rows across threads shared by
 * every implementation, and the choice of implementation. Each dot accumulates in column order
 * into one float, except MXFP4, which sums each 32-column block of (2*E2M1 integer) * x
 * first and then adds block_sum * 2^(scale - 128): the same block structure the SIMD twin
 * uses, so both round alike. */
#include "kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtype.h"

static void scalar_mm_f32(const float *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < n; t++) {
            const float *row = rows + (long)r * cols, *xt = x + (long)t * ldx;
            float acc = 0.0f;
            for (int c = 0; c < cols; c++)
                acc += row[c] * xt[c];
            y[(long)t * ldy + r] = acc;
        }
}

static void scalar_mm_bf16(const uint16_t *rows, int nr, const float *x, int ldx, int n, int cols, float *y,
                           int ldy) {
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < n; t++) {
            const uint16_t *row = rows + (long)r * cols;
            const float *xt = x + (long)t * ldx;
            float acc = 0.0f;
            for (int c = 0; c < cols; c++)
                acc += dtype_bf16_to_f32(row[c]) * xt[c];
            y[(long)t * ldy + r] = acc;
        }
}

/* Twice the E2M1 magnitude, signed: exact small integers. */
static const float mxfp4_twice[16] = {0, 1, 2, 3, 4, 6, 8, 12, -0.0f, -1, -2, -3, -4, -6, -8, -12};

static void scalar_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                            int cols, float *y, int ldy) {
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < n; t++) {
            const uint8_t *pr = packed + (long)r * (cols / 2), *sr = scale + (long)r * (cols / DTYPE_MXFP4_BLOCK);
            const float *xt = x + (long)t * ldx;
            float acc = 0.0f;
            for (int b = 0; b < cols / DTYPE_MXFP4_BLOCK; b++) {
                const uint8_t *p = pr + b * (DTYPE_MXFP4_BLOCK / 2);
                const float *xb = xt + b * DTYPE_MXFP4_BLOCK;
                float block = 0.0f;
                for (int i = 0; i < DTYPE_MXFP4_BLOCK / 2; i++) {
                    block += mxfp4_twice[p[i] & 15] * xb[2 * i];
                    block += mxfp4_twice[p[i] >> 4] * xb[2 * i + 1];
                }
                acc += block * ldexpf(1.0f, (int)sr[b] - 128);
            }
            y[(long)t * ldy + r] = acc;
        }
}

static int scalar_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

int kernels_argmax_finish(const float *lane_best, const int *lane_at, int lanes, const float *x, int from, int n) {
    float best_v = x[0];
    int best_i = 0;
    for (int j = 0; j < lanes; j++)
        if (lane_best[j] > best_v || (lane_best[j] == best_v && lane_at[j] < best_i)) {
            best_v = lane_best[j];
            best_i = lane_at[j];
        }
    for (int i = from; i < n; i++)
        if (x[i] > best_v) {
            best_v = x[i];
            best_i = i;
        }
    return best_i;
}

/* Twelve chains of a = a * m + b (a multiply and an add: the reference never fuses). */
static double scalar_fma_loop(long reps) {
    float a[12];
    const float m = 0.999999f, b = 1e-7f;
    for (int i = 0; i < 12; i++)
        a[i] = (float)i;
    for (long r = 0; r < reps; r++)
        for (int i = 0; i < 12; i++)
            a[i] = a[i] * m + b;
    float sum = 0.0f;
    for (int i = 0; i < 12; i++)
        sum += a[i];
    kernels_fma_sink = sum;
    return (double)reps * 12 * 2;
}

const kernels_impl kernels_scalar = {.name = "scalar",
                                     .mm_f32 = scalar_mm_f32,
                                     .mm_bf16 = scalar_mm_bf16,
                                     .mm_mxfp4 = scalar_mm_mxfp4,
                                     .argmax = scalar_argmax,
                                     .fma_loop = scalar_fma_loop};

const kernels_impl *kernels_best(void) {
    static const kernels_impl *chosen;
    if (!chosen) {
        const char *force = getenv("K3_KERNELS");
        const int level = !force                      ? 2
                          : !strcmp(force, "scalar") ? 0
                          : !strcmp(force, "avx2")   ? 1
                          : !strcmp(force, "amx")    ? 3
                                                     : 2;
        const kernels_impl *tiles = level >= 3 ? kernels_amx() : NULL, *wide = level >= 2 ? kernels_avx512() : NULL,
                           *avx2 = level >= 1 ? kernels_avx2() : NULL;
        chosen = tiles ? tiles : wide ? wide : avx2 ? avx2 : &kernels_scalar;
    }
    return chosen;
}

typedef struct {
    const kernels_impl *impl;
    const kernels_matrix *w;
    const float *x;
    int ldx, n;
    float *y;
    int ldy;
    const void *xp; /* x as impl->prepare made it, or NULL */
} matmul_job;

/* Rows [r0, r1) in one call: the implementation walks them itself, so a chunk costs one
 * indirect call however many rows it holds. */
static void matmul_rows(void *arg, int r0, int r1) {
    const matmul_job *j = arg;
    const kernels_matrix *w = j->w;
    const int nr = r1 - r0;
    float *y = j->y + r0;
    switch (w->type) {
    case KERNELS_F32:
        j->impl->mm_f32((const float *)w->data + (long)r0 * w->cols, nr, j->x, j->ldx, j->n, w->cols, y, j->ldy);
        break;
    case KERNELS_BF16:
        if (j->xp)
            j->impl->mm_bf16_prepared((const uint16_t *)w->data + (long)r0 * w->cols, nr, j->x, j->ldx, j->xp, j->n,
                                      w->cols, y, j->ldy);
        else
            j->impl->mm_bf16((const uint16_t *)w->data + (long)r0 * w->cols, nr, j->x, j->ldx, j->n, w->cols, y,
                             j->ldy);
        break;
    case KERNELS_MXFP4: {
        const uint8_t *packed = (const uint8_t *)w->data + (long)r0 * (w->cols / 2),
                      *scale = w->scale + (long)r0 * (w->cols / DTYPE_MXFP4_BLOCK);
        if (j->xp)
            j->impl->mm_mxfp4_prepared(packed, scale, nr, j->x, j->ldx, j->xp, j->n, w->cols, y, j->ldy);
        else
            j->impl->mm_mxfp4(packed, scale, nr, j->x, j->ldx, j->n, w->cols, y, j->ldy);
        break;
    }
    }
}

static atomic_uint_least64_t weight_bytes_read, multiply_adds;

volatile float kernels_fma_sink;

uint64_t kernels_multiply_adds(void) {
    return atomic_load(&multiply_adds);
}

void kernels_note_multiply_adds(uint64_t count) {
    atomic_fetch_add(&multiply_adds, count);
}

typedef struct {
    const kernels_impl *impl;
    long reps;
    double flops;
} peak_run;

static void *peak_thread(void *arg) {
    peak_run *r = arg;
    r->flops = r->impl->fma_loop(r->reps);
    return NULL;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

double kernels_fma_peak(const kernels_impl *impl, int n_threads, double seconds) {
    enum { MAX_THREADS = 64 };
    n_threads = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    /* Calibrate on one thread, then run every thread for about `seconds`. */
    long reps = 1 << 16;
    for (;;) {
        const double t0 = seconds_now();
        impl->fma_loop(reps);
        const double dt = seconds_now() - t0;
        if (dt > seconds / 8 || reps > (1L << 40)) {
            reps = (long)(reps * (seconds / (dt > 1e-9 ? dt : 1e-9)));
            break;
        }
        reps *= 4;
    }
    double best = 0.0;
    for (int round = 0; round < 3; round++) {
        pthread_t tid[MAX_THREADS];
        peak_run run[MAX_THREADS];
        int started[MAX_THREADS] = {0};
        const double t0 = seconds_now();
        for (int i = 0; i < n_threads; i++) {
            run[i] = (peak_run){impl, reps, 0.0};
            /* A thread that cannot start counts as nothing: the peak reads low, never high. */
            started[i] = i > 0 && pthread_create(&tid[i], NULL, peak_thread, &run[i]) == 0;
        }
        peak_thread(&run[0]);
        double flops = run[0].flops;
        for (int i = 1; i < n_threads; i++)
            if (started[i] && pthread_join(tid[i], NULL) == 0)
                flops += run[i].flops;
        const double rate = flops / (seconds_now() - t0);
        best = rate > best ? rate : best;
    }
    return best;
}

uint64_t kernels_weight_bytes_read(void) {
    return atomic_load(&weight_bytes_read);
}

void kernels_note_bytes_read(uint64_t bytes) {
    atomic_fetch_add(&weight_bytes_read, bytes);
}

uint64_t kernels_matrix_bytes(const kernels_matrix *w) {
    const uint64_t cells = (uint64_t)w->rows * (uint64_t)w->cols;
    switch (w->type) {
    case KERNELS_F32: return cells * 4;
    case KERNELS_BF16: return cells * 2;
    case KERNELS_MXFP4: return cells / 2 + cells / DTYPE_MXFP4_BLOCK;
    }
    return 0;
}

void kernels_matmul(const kernels_impl *impl, const kernels_matrix *w, const float *x, int ldx, int n, float *y,
                    int ldy, threads *pool) {
    atomic_fetch_add(&weight_bytes_read, kernels_matrix_bytes(w));
    atomic_fetch_add(&multiply_adds, (uint64_t)w->rows * (uint64_t)w->cols * (uint64_t)n);
    matmul_job job = {impl, w, x, ldx, n, y, ldy, NULL};
    if (impl->prepare && w->type != KERNELS_F32)
        job.xp = impl->prepare(x, ldx, n, w->cols, w->type);
    /* Grain: enough rows per chunk to amortise the hand-out, small enough to balance. For
     * one token, products of 8 MB or more go in chunks of at least 4 MB, so an
     * implementation can read a chunk as two streams megabytes apart (kernels_avx2.c);
     * smaller ones in one chunk per thread: workers are awake and join at once, and each
     * extra chunk restarts a stream (2-thread decode on small, alternating runs: 4, 2 and
     * 1 chunks per thread 140.2, 147.5 and 150.4 tokens/s).
     * Products under 128K multiply-adds run on the calling thread: below that a chunk
     * streams in a few microseconds, about what handing it over costs (threads.c keeps
     * workers awake through a step; a 512 x 512 product is 256K). Which thread computes
     * a row never changes its bits (kernels.h). */
    const uint64_t bytes = kernels_matrix_bytes(w), row_bytes = w->rows > 0 ? bytes / (uint64_t)w->rows : 0;
    int grain = w->rows >= 1024 ? 64 : 16;
    if (n == 1 && bytes >= ((uint64_t)8 << 20))
        grain = (int)(((uint64_t)4 << 20) / row_bytes);
    else if (n == 1)
        grain = (w->rows + threads_count(pool) - 1) / threads_count(pool);
    const uint64_t work = (uint64_t)w->rows * (uint64_t)w->cols * (uint64_t)n;
    threads_run(work < (1u << 17) ? NULL : pool, w->rows, grain, matmul_rows, &job);
}

/* Rows per unit of a set's loop: a unit is the smallest piece handed to a thread. */
#define SET_UNIT_ROWS 32
#define SET_MAX 8

typedef struct {
    const kernels_impl *impl;
    const kernels_product *products;
    int count;
    const float *x;
    int ldx;
    int first_unit[SET_MAX + 1]; /* product i owns units [first_unit[i], first_unit[i+1]) */
} set_job;

/* Units [u0, u1): for each product they overlap, one call over its rows in that range. */
static void set_units(void *arg, int u0, int u1) {
    const set_job *j = arg;
    for (int i = 0; i < j->count && u0 < u1; i++) {
        const int lo = j->first_unit[i], hi = j->first_unit[i + 1];
        if (u0 >= hi)
            continue;
        const int end = u1 < hi ? u1 : hi;
        const kernels_matrix *w = j->products[i].w;
        const int r0 = (u0 - lo) * SET_UNIT_ROWS, r1 = (end - lo) * SET_UNIT_ROWS;
        matmul_job one = {j->impl, w, j->x, j->ldx, 1, j->products[i].y, j->products[i].ldy, NULL};
        matmul_rows(&one, r0, r1 < w->rows ? r1 : w->rows);
        u0 = end;
    }
}

void kernels_matmul_same_input(const kernels_impl *impl, const kernels_product *products, int count,
                               const float *x, int ldx, int n, threads *pool) {
    if (n != 1 || count > SET_MAX) {
        for (int i = 0; i < count; i++)
            kernels_matmul(impl, products[i].w, x, ldx, n, products[i].y, products[i].ldy, pool);
        return;
    }
    set_job job = {impl, products, count, x, ldx, {0}};
    uint64_t work = 0;
    for (int i = 0; i < count; i++) {
        const kernels_matrix *w = products[i].w;
        atomic_fetch_add(&weight_bytes_read, kernels_matrix_bytes(w));
        work += (uint64_t)w->rows * (uint64_t)w->cols;
        atomic_fetch_add(&multiply_adds, (uint64_t)w->rows * (uint64_t)w->cols);
        job.first_unit[i + 1] = job.first_unit[i] + (w->rows + SET_UNIT_ROWS - 1) / SET_UNIT_ROWS;
    }
    /* As kernels_matmul: one chunk per thread, the calling thread alone under 128K
     * multiply-adds. */
    const int units = job.first_unit[count], per = threads_count(pool);
    threads_run(work < (1u << 17) ? NULL : pool, units, (units + per - 1) / per, set_units, &job);
}
