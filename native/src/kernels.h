/* kernels.h - matrix products of stored weights (bf16, f32, MXFP4) with f32 activations,
 * the engine's only heavy arithmetic, and the argmax over a row of logits (a pass over the
 * whole vocabulary per decoded token, as long as a small product).
 *
 * Batch and thread invariance: every output element y[t][r] is one dot product of weight
 * row r with input row t, computed by the same instruction sequence whatever the number of
 * tokens in the call and whatever the thread that runs it. Threads split output rows;
 * rows and tokens are grouped into register tiles only so a weight row is read from memory
 * once per batch, never to change how a single dot product is accumulated. So prefill, one-
 * token decode and batched verification give bit-identical results for the same position.
 *
 * Each implementation (scalar reference, AVX2, AVX-512, AMX) fills a kernels_impl;
 * kernels_best() picks one by a run-time CPU check. Implementations agree within rounding,
 * not bit for bit (each has its own order of additions), so a process uses one of them
 * throughout. */
#ifndef K3_KERNELS_H
#define K3_KERNELS_H

#include <stdint.h>

#include "threads.h"

typedef enum kernels_wtype { KERNELS_F32, KERNELS_BF16, KERNELS_MXFP4 } kernels_wtype;

/* One token's bf16 / f32 rows stream once from memory, one row after another; the SIMD
 * kernels ask for the bytes this far ahead of the load (into L2). The hardware prefetcher
 * alone held a core to 12-18 GB/s on K3's 7168 x 7168 bf16 projections (two threads 20-25,
 * about 65-75 % of the triad); 8 KB ahead gave 29-30 (two threads 33-40, the triad's rate).
 * 1 KB gained nothing, 4 KB about two thirds of it, 16-32 KB a little less. */
#define KERNELS_ONE_TOKEN_PREFETCH_BYTES 8192

/* The most columns an MXFP4 matrix may have (config.c refuses wider experts): a kernel keeps
 * one token's input for such a matrix on its stack (64 kB). K3's widest is 3,584. */
#define KERNELS_MXFP4_MAX_COLS 16384

/* Activations that feed a product start on a 64-byte boundary wherever the engine lays
 * them out: a 16-float load that straddles two cache lines costs two, which held the
 * batched kernels about a tenth below their speed on aligned inputs. A buffer carved out
 * of scratch at an arbitrary offset takes kernels_align(p) and reserves
 * KERNELS_ALIGN_FLOATS more floats for it. */
#define KERNELS_ALIGN_FLOATS 16
static inline float *kernels_align(float *p) {
    return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* A weight matrix W[rows][cols] in place (nn.Linear layout: y = W x). */
typedef struct kernels_matrix {
    kernels_wtype type;
    int rows, cols;
    const void *data;     /* f32/bf16: (rows, cols); MXFP4: packed nibbles (rows, cols/2) */
    const uint8_t *scale; /* MXFP4 only: E8M0 (rows, cols/32) */
} kernels_matrix;

/* y[t*ldy + r] = dot(row r, x + t*ldx) for r < nr (nr >= 1), t < n: nr consecutive rows
 * of a matrix with `cols` columns starting at `rows` (MXFP4: packed nibbles and their
 * scales). How an implementation tiles rows and tokens is its own business; what one
 * (row, token) pair computes must not depend on it. */
typedef struct kernels_impl {
    const char *name;
    void (*mm_f32)(const float *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy);
    void (*mm_bf16)(const uint16_t *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy);
    void (*mm_mxfp4)(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n, int cols,
                     float *y, int ldy);
    /* Index of the largest of x[0..n), n >= 1: the first one on ties; a value wins only by
     * comparing greater than the best so far, so NaN never does (and x[0] = NaN gives 0).
     * Every implementation returns exactly the scalar loop's answer. */
    int (*argmax)(const float *x, int n);
    /* A register-resident loop of this implementation's multiply-add, independent chains
     * enough to fill the pipes: `reps` rounds; returns the FLOPs it did (2 per lane and
     * multiply-add). What a benchmark divides by time for the machine's peak. */
    double (*fma_loop)(long reps);
    /* Optional (NULL in the sets that read x as it is): a bf16 or MXFP4 product's input made
     * once, before its rows are handed out, into the form this set's products read, so
     * that every chunk of rows a thread takes does not make it again. Returns it (held by
     * the calling thread until its next call), or NULL where this product makes its own;
     * the _prepared products then read it beside x (x only if they must fall back). */
    const void *(*prepare)(const float *x, int ldx, int n, int cols, kernels_wtype type);
    void (*mm_bf16_prepared)(const uint16_t *rows, int nr, const float *x, int ldx, const void *xp, int n, int cols,
                             float *y, int ldy);
    void (*mm_mxfp4_prepared)(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx,
                              const void *xp, int n, int cols, float *y, int ldy);
} kernels_impl;

extern const kernels_impl kernels_scalar;
/* Where fma_loop leaves its result, so that the loop is not optimised away. */
extern volatile float kernels_fma_sink;
/* NULL when this build or this CPU has no AVX2/FMA. */
const kernels_impl *kernels_avx2(void);
/* NULL when this build or this CPU (or its OS) has no AVX-512 F/BW/VL/DQ. */
const kernels_impl *kernels_avx512(void);
/* NULL when this build or this CPU has no AMX-TILE/AMX-BF16 (with AVX-512), or the OS
 * refuses this process the tile state. Its bf16 and MXFP4 products run on the tile unit
 * (kernels_amx.c); f32 products, argmax and the peak loop are the AVX-512 set's. Chosen
 * only when asked for (K3_KERNELS=amx): batches run faster, one token slower
 * (docs/PERFORMANCE.md). */
const kernels_impl *kernels_amx(void);
/* The default implementation for this CPU: AVX-512, else AVX2, else the scalar reference.
 * K3_KERNELS=scalar, =avx2, =avx512 or =amx in the environment forces one (for comparisons
 * and for testing each path on one machine); a forced one this CPU lacks falls back to the
 * next slower. */
const kernels_impl *kernels_best(void);

/* Bytes of weights kernels_matmul has streamed since the process started (each call adds
 * its matrix once, however many tokens it serves): what a benchmark divides by tokens to
 * get the bytes a decoded token touches. */
uint64_t kernels_weight_bytes_read(void);

/* Adds weight bytes read outside kernels_matmul (e.g. the MLA query absorption). */
void kernels_note_bytes_read(uint64_t bytes);

/* The end of a SIMD argmax: lanes[j] holds the first position of the largest value among
 * lane j's positions (lane_best[j] its value, never NaN); the answer over x[0..from) is the
 * lowest such position holding the overall largest, then x[from..n) is scanned as the
 * scalar loop would. */
int kernels_argmax_finish(const float *lane_best, const int *lane_at, int lanes, const float *x, int from, int n);

/* Multiply-adds the products have done since the process started: matrix products, and
 * what mla.c and kda.c note (attention scores and sums, the recurrent state's updates). */
uint64_t kernels_multiply_adds(void);
void kernels_note_multiply_adds(uint64_t count);

/* FLOP/s of impl's fma_loop on n_threads threads at once, best of three runs of about
 * `seconds` each. */
double kernels_fma_peak(const kernels_impl *impl, int n_threads, double seconds);

/* Bytes one call to kernels_matmul reads from w. */
uint64_t kernels_matrix_bytes(const kernels_matrix *w);

/* Y[t][r] = sum_c W[r][c] * X[t][c] for t < n, r < rows. X: (n, ldx) with ldx >= cols;
 * Y: (n, ldy) with ldy >= rows. Rows are split across the pool's threads. */
void kernels_matmul(const kernels_impl *impl, const kernels_matrix *w, const float *x, int ldx, int n, float *y,
                    int ldy, threads *pool);

/* One product of a set that share their input: y (n, ldy) = w x. */
typedef struct kernels_product {
    const kernels_matrix *w;
    float *y;
    int ldy;
} kernels_product;

/* kernels_matmul for each of `count` products of the same X, as one loop over all their
 * rows for a single token: one hand-out to the pool instead of one per product, and every
 * thread streams from several matrices at once (a KDA layer's q, k, v, g, f_a and b). The
 * same rows compute the same bits as kernels_matmul. Batches of tokens run the products
 * one after another. */
void kernels_matmul_same_input(const kernels_impl *impl, const kernels_product *products, int count,
                               const float *x, int ldx, int n, threads *pool);

#endif
