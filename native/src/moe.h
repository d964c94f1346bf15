/* moe.h - the channel mixers: the SiTU-GLU MLP (dense first layer, shared experts) and the
 * latent mixture of experts, for a batch of tokens. It knows the math of one FFN and nothing
 * of tensor names or layer order; routed experts are mapped, or borrowed one at a time from
 * expert_cache.h, which reads them while the shared experts run.
 *
 * Latent MoE (k3-architecture §3.7): an fp32 sigmoid router on the full-width input, the
 * correction bias used for selection only, renormalised top-k weights; experts run on the
 * down-projected latent, their weighted sum is RMS-normed, then projected up; shared
 * experts run on the full-width input and are added unweighted. Each token's experts are
 * summed in ascending expert order, whatever the batch, so batching never changes a bit,
 * and whatever the cache, so where expert bytes come from never changes one either. */
#ifndef K3_MOE_H
#define K3_MOE_H

#include "error.h"
#include "kernels.h"

typedef struct moe_mlp {
    kernels_matrix gate, up; /* (inter, d) */
    kernels_matrix down;     /* (d, inter) */
} moe_mlp;

typedef struct moe_expert {
    kernels_matrix w1, w3; /* gate, up: (inter, latent), MXFP4 in the release */
    kernels_matrix w2;     /* down: (latent, inter) */
} moe_expert;

typedef struct moe_dims {
    int hidden;
    int n_experts, top_k;
    int latent;     /* routed_expert_hidden_size */
    int inter;      /* moe_intermediate_size */
    int shared_inter; /* width of the fused shared-expert MLP (0: none) */
    int renormalize;
    float routed_scale;
    int latent_norm; /* latent_moe_use_norm */
    float norm_eps;
    float situ_beta, situ_linear_beta; /* linear beta 0: no cap on the up branch */
} moe_dims;

typedef struct moe_weights {
    kernels_matrix router;     /* (n_experts, d) */
    const float *router_bias;  /* (n_experts) e_score_correction_bias */
    kernels_matrix down_proj;  /* routed_expert_down_proj (latent, d) */
    kernels_matrix up_proj;    /* routed_expert_up_proj (d, latent) */
    const float *latent_norm;  /* (latent) */
    const moe_expert *experts; /* (n_experts), or NULL when they come from cache */
    struct expert_cache *cache; /* the routed-expert cache (expert_cache.h), or NULL */
    int cache_layer;           /* this layer's index among MoE layers, for the cache */
    moe_mlp shared;            /* used when dims.shared_inter > 0 */
} moe_weights;

/* The next MoE layer's router, to guess its experts early (expert_cache_prefetch): its
 * weights (router and correction bias; they must be in memory now, not streamed) and a
 * stand-in for its input, built by the caller from what it has now. The guess applies that
 * router's top-k rule to x. */
typedef struct moe_next {
    const moe_weights *w;
    const float *x; /* (n, d) */
} moe_next;

/* Scratch floats for moe_mlp_forward / moe_forward with n tokens. */
long moe_mlp_scratch_floats(int inter, int n);
long moe_scratch_floats(const moe_dims *dims, int n);

/* out (n, d) = down(situ(gate x, up x)). */
void moe_mlp_forward(const moe_mlp *w, int d, int inter, float beta, float linear_beta, const float *x, int n,
                     float *out, float *scratch, const kernels_impl *impl, threads *pool);

/* out (n, d) = latent MoE + shared experts of x (n, d), the post_attention_layernorm output.
 * If selected is not NULL it receives each token's chosen experts (n, top_k), ascending.
 * With a cache, the chosen experts are handed to it as soon as the router has run, and the
 * shared experts and the latent projection run while they are read. K3_ERR_EXPERT_READ
 * (out then undefined) when one could not be read; without a cache it cannot fail. With a
 * cache and next not NULL, the next layer's likely experts are handed to the cache as a
 * guess right after this layer's; the guess is computed in scratch this layer overwrites
 * later and changes no bit of out. */
k3_status moe_forward(const moe_dims *dims, const moe_weights *w, const moe_next *next, const float *x, int n,
                      float *out, int *selected, float *scratch, const kernels_impl *impl, threads *pool,
                      k3_error *err);

#endif
