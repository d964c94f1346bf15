/* mla.h - the gated NoPE multi-head latent attention token mixer with the compressed
 * latent cache, for a batch of consecutive tokens of one sequence. It knows the math of one
 * MLA layer and nothing of tensor names or layer order.
 *
 * The cache holds, per position, the normed latent c (kv_lora) followed by the shared k_pe
 * (rope dims, never rotated: K3 has no positional encoding). kv_b_proj is absorbed: the
 * query is mapped into the latent space and the attention output mapped back per head, so
 * nothing per head is cached. Softmax scale 1/sqrt(nope + rope). */
#ifndef K3_MLA_H
#define K3_MLA_H

#include "kernels.h"

typedef struct mla_dims {
    int hidden, heads;
    int q_lora, kv_lora;
    int nope, rope, v_head;
    float lora_eps; /* q_a_layernorm / kv_a_layernorm eps: 1e-6 in the reference */
    int out_gate;   /* mla_use_output_gate */
} mla_dims;

typedef struct mla_weights {
    kernels_matrix q_a;     /* (q_lora, d) */
    const float *q_a_norm;  /* (q_lora) */
    kernels_matrix q_b;     /* (heads*(nope+rope), q_lora): per head [q_nope | q_pe] */
    kernels_matrix kv_a;    /* (kv_lora+rope, d): [latent | k_pe] */
    const float *kv_a_norm; /* (kv_lora) */
    kernels_matrix kv_b;    /* (heads*(nope+v), kv_lora): per head rows [W_UK | W_UV]; f32 or bf16 */
    kernels_matrix g;       /* (heads*v, d) output gate */
    kernels_matrix o;       /* (d, heads*v) */
} mla_weights;

/* Floats per cached position. */
int mla_cache_row_floats(const mla_dims *dims);

/* Scratch floats mla_forward needs for n tokens with a cache of `capacity` positions. */
long mla_scratch_floats(const mla_dims *dims, int n, int capacity);

/* out (n, d) = MLA(x (n, d)) for tokens at positions start..start+n-1; writes their cache
 * rows (cache: (capacity, mla_cache_row_floats)), which must have room. */
void mla_forward(const mla_dims *dims, const mla_weights *w, float *cache, int start, const float *x, int n,
                 float *out, float *scratch, const kernels_impl *impl, threads *pool);

#endif
