/* ops.c - per-token vector operations (see ops.h). */
#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The loops below that run on every token are compiled three times, for AVX-512, AVX2 and
 * baseline x86-64, and picked at load time. Each clone performs the same operations in the
 * same order (no contraction into FMA: -ffp-contract=off; no reassociation), so the bits
 * never depend on the clone, the lane or the batch. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPS_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define OPS_CLONES
#endif

/* Sums in double over eight interleaved partial sums, added pairwise at the end: the same
 * order for every call, and one vector of doubles per step instead of a chain of n
 * dependent additions (a norm of 512 values was latency-bound). */
#define PARTIALS 8

OPS_CLONES
double ops_sum_squares(const float *x, int n) {
    double p[PARTIALS] = {0};
    int i = 0;
    for (; i + PARTIALS <= n; i += PARTIALS)
        for (int k = 0; k < PARTIALS; k++)
            p[k] += (double)x[i + k] * x[i + k];
    for (int k = 0; i < n; i++, k++)
        p[k] += (double)x[i] * x[i];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

OPS_CLONES
double ops_scaled_dot(const float *v, double scale, const float *w, int n) {
    double p[PARTIALS] = {0};
    int i = 0;
    for (; i + PARTIALS <= n; i += PARTIALS)
        for (int k = 0; k < PARTIALS; k++)
            p[k] += (double)(float)(v[i + k] * scale) * w[i + k];
    for (int k = 0; i < n; i++, k++)
        p[k] += (double)(float)(v[i] * scale) * w[i];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

void ops_rmsnorm(const float *x, const float *w, int n, float eps, float *out) {
    const float inv = (float)(1.0 / sqrt(ops_sum_squares(x, n) / n + eps));
    if (w)
        for (int i = 0; i < n; i++)
            out[i] = w[i] * (x[i] * inv);
    else
        for (int i = 0; i < n; i++)
            out[i] = x[i] * inv;
}

void ops_l2norm(float *x, int n, float eps, float scale) {
    const float f = (float)(scale / sqrt(ops_sum_squares(x, n) + eps));
    for (int i = 0; i < n; i++)
        x[i] *= f;
}

float ops_softplus(float x) {
    /* log(1 + e^x) without overflow for large x and without losing small values. */
    return x > 20.0f ? x : log1pf(expf(x));
}

/* SiTU runs on every expert's intermediate vector, tens of thousands of values per decoded
 * token; there, libm's tanhf and expf cost about 4 % of a decode step (perf, `small`). The
 * two functions below are straight-line float arithmetic, no branches and no calls, so the
 * compiler vectorises the loop, and they give the same bits in any lane and any batch. */

/* e^x for x clamped to [-87, 88] (so 2^n stays a normal float): x = n ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor series to r^7 (truncation below 6e-9), times 2^n built in
 * the exponent field. Within 2 ulp of expf (1.2 measured over [-87, 88]). */
static inline float exp_series(float x) {
    /* A NaN passes the clamp and would reach the int conversion (undefined behaviour): it
     * goes through as 0 and comes out as the NaN it was. A select, not a branch. */
    const float in = x;
    x = x == x ? x : 0.0f;
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float n = (x * 1.44269504f + shifter) - shifter;
    const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f; /* ln2 split: hi part exact in n * hi */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return in == in ? p * scale : in;
}

/* tanh(y): below |y| = 0.5 its odd Taylor series to y^15 (truncation below 5e-9 relative),
 * above it 1 - 2 / (e^2|y| + 1), which loses no more than a bit to cancellation there;
 * the sign restored at the end. Within 2 ulp of tanhf (1.8 measured). */
static inline float tanh_series(float y) {
    const float a = fabsf(y), a2 = a * a;
    float p = -0.00145583438f;     /* -929569 / 638512875 */
    p = p * a2 + 0.00359212803f;   /* 21844 / 6081075 */
    p = p * a2 - 0.00886323552f;   /* -1382 / 155925 */
    p = p * a2 + 0.0218694885f;    /* 62 / 2835 */
    p = p * a2 - 0.0539682540f;    /* -17 / 315 */
    p = p * a2 + 0.133333333f;     /* 2 / 15 */
    p = p * a2 - 0.333333333f;
    const float small = a + a * a2 * p;
    const float large = 1.0f - 2.0f / (exp_series(2.0f * a) + 1.0f);
    const float t = a < 0.5f ? small : large;
    return y < 0.0f ? -t : t;
}

float ops_sigmoid(float x) {
    return 1.0f / (1.0f + exp_series(-x));
}

float ops_silu(float x) {
    return x * ops_sigmoid(x);
}

OPS_CLONES
void ops_sigmoid_n(const float *x, long n, float *out) {
    for (long i = 0; i < n; i++)
        out[i] = 1.0f / (1.0f + exp_series(-x[i]));
}

OPS_CLONES
void ops_silu_n(float *x, long n) {
    for (long i = 0; i < n; i++)
        x[i] = x[i] * (1.0f / (1.0f + exp_series(-x[i])));
}

OPS_CLONES
void ops_mul_sigmoid(float *x, const float *g, long n) {
    for (long i = 0; i < n; i++)
        x[i] *= 1.0f / (1.0f + exp_series(-g[i]));
}

OPS_CLONES
void ops_exp_n(float *x, long n) {
    for (long i = 0; i < n; i++)
        x[i] = exp_series(x[i]);
}

OPS_CLONES
void ops_situ(const float *g, const float *u, int n, float b1, float b2, float *out) {
    const float inv_b1 = 1.0f / b1, inv_b2 = b2 > 0.0f ? 1.0f / b2 : 0.0f;
    for (int i = 0; i < n; i++) {
        const float gate = b1 * tanh_series(g[i] * inv_b1) / (1.0f + exp_series(-g[i]));
        const float up = b2 > 0.0f ? b2 * tanh_series(u[i] * inv_b2) : u[i];
        out[i] = gate * up;
    }
}

/* Lanes of the running maximum in ops_softmax. */
#define MAX_LANES 16

OPS_CLONES
void ops_softmax(float *x, int n) {
    /* The maximum in 16 lanes, each started at x[0] and keeping a value only when it is
     * greater: the largest value, as one running maximum finds it (a chain of n scalar
     * maxima was 40 % of softmax's time in MLA's scores). It is NaN only where x[0] is, as
     * there; lanes may differ from that only in the sign of a zero maximum, and x - (+0)
     * and x - (-0) take the same e^x below. */
    float lane[MAX_LANES];
    for (int k = 0; k < MAX_LANES; k++)
        lane[k] = x[0];
    int at = 1;
    for (; at + MAX_LANES <= n; at += MAX_LANES)
        for (int k = 0; k < MAX_LANES; k++)
            lane[k] = x[at + k] > lane[k] ? x[at + k] : lane[k];
    float m = lane[0];
    for (int k = 1; k < MAX_LANES; k++)
        m = lane[k] > m ? lane[k] : m;
    for (; at < n; at++)
        m = x[at] > m ? x[at] : m;
    double p[PARTIALS] = {0};
    int i = 0;
    for (; i + PARTIALS <= n; i += PARTIALS)
        for (int k = 0; k < PARTIALS; k++) {
            x[i + k] = exp_series(x[i + k] - m);
            p[k] += x[i + k];
        }
    for (int k = 0; i < n; i++, k++) {
        x[i] = exp_series(x[i] - m);
        p[k] += x[i];
    }
    const float inv = (float)(1.0 / (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))));
    for (i = 0; i < n; i++)
        x[i] *= inv;
}
