/* ops.h - the small per-token operations of the forward pass: norms, activations, softmax.
 * Each works on one vector in a fixed order (reductions accumulate in double, in eight
 * interleaved partial sums), so a token's result never depends on its neighbours in a
 * batch. e^x is the engine's own float series (ops.c), not libm's, so the array forms
 * below vectorise and give the same bits as the one-value forms. */
#ifndef K3_OPS_H
#define K3_OPS_H

/* out[i] = w[i] * x[i] / sqrt(mean(x^2) + eps); w may be NULL (no gamma). out may be x. */
void ops_rmsnorm(const float *x, const float *w, int n, float eps, float *out);

/* x /= sqrt(sum(x^2) + eps), then x *= scale (FLA's in-kernel l2norm). */
void ops_l2norm(float *x, int n, float eps, float scale);

/* SiTU-GLU: out[i] = b1*tanh(g/b1)*sigmoid(g) * (b2 > 0 ? b2*tanh(u/b2) : u). out may be g. */
void ops_situ(const float *g, const float *u, int n, float b1, float b2, float *out);

/* In-place softmax over n values. */
void ops_softmax(float *x, int n);

float ops_sigmoid(float x);
float ops_silu(float x);
float ops_softplus(float x);

/* sum x[i]^2 and sum (float)(v[i] * scale) * w[i], in double, in the fixed order above. */
double ops_sum_squares(const float *x, int n);
double ops_scaled_dot(const float *v, double scale, const float *w, int n);

/* Element-wise over n values, each exactly what the one-value form computes:
 * out = sigmoid(x) (out may be x); x = silu(x); x *= sigmoid(g); x = e^x (x clamped to
 * [-87, 88]). */
void ops_sigmoid_n(const float *x, long n, float *out);
void ops_silu_n(float *x, long n);
void ops_mul_sigmoid(float *x, const float *g, long n);
void ops_exp_n(float *x, long n);

#endif
