/* ops.h - the small per-token operations of the forward pass: norms, activations, softmax.
 * Each works on one vector in a fixed order (reductions accumulate in double), so a
 * token's result never depends on its neighbours in a batch. */
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

#endif
