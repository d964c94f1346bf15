/* ops.c - per-token vector operations (see ops.h). */
#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

void ops_rmsnorm(const float *x, const float *w, int n, float eps, float *out) {
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++)
        out[i] = w ? w[i] * (x[i] * inv) : x[i] * inv;
}

void ops_l2norm(float *x, int n, float eps, float scale) {
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float f = (float)(scale / sqrt(ss + eps));
    for (int i = 0; i < n; i++)
        x[i] *= f;
}

float ops_sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

float ops_silu(float x) {
    return x * ops_sigmoid(x);
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* Eight lanes where the CPU has AVX2; the same operations in the same order either way
 * (no contraction into FMA: -ffp-contract=off), so the bits do not depend on the clone. */
__attribute__((target_clones("avx2", "default")))
#endif
void ops_situ(const float *g, const float *u, int n, float b1, float b2, float *out) {
    const float inv_b1 = 1.0f / b1, inv_b2 = b2 > 0.0f ? 1.0f / b2 : 0.0f;
    for (int i = 0; i < n; i++) {
        const float gate = b1 * tanh_series(g[i] * inv_b1) / (1.0f + exp_series(-g[i]));
        const float up = b2 > 0.0f ? b2 * tanh_series(u[i] * inv_b2) : u[i];
        out[i] = gate * up;
    }
}

void ops_softmax(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > m)
            m = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}
