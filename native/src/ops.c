/* ops.c - per-token vector operations (see ops.h). */
#include "ops.h"

#include <math.h>

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

void ops_situ(const float *g, const float *u, int n, float b1, float b2, float *out) {
    for (int i = 0; i < n; i++) {
        const float gate = b1 * tanhf(g[i] / b1) * ops_sigmoid(g[i]);
        const float up = b2 > 0.0f ? b2 * tanhf(u[i] / b2) : u[i];
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
