/* model.h - a loaded K3 model: dimensions, and every weight bound to the math modules'
 * structs. weights.c fills it (it alone knows tensor names); forward.c runs it (it alone
 * knows layer order). Matrices point into the mapped shards; only small vectors (norm
 * weights, biases, conv taps, attention-residual query vectors) are f32 copies. */
#ifndef K3_MODEL_H
#define K3_MODEL_H

#include "config.h"
#include "kda.h"
#include "kernels.h"
#include "mla.h"
#include "moe.h"
#include "safetensors.h"

typedef struct model_layer {
    int is_kda;       /* token mixer: KDA, else MLA */
    int is_moe;       /* channel mixer: latent MoE, else the dense MLP */
    int state_index;  /* index among KDA layers (is_kda) or among MLA layers */
    const float *input_norm, *post_norm; /* (d) */
    const float *attn_res_query;         /* (d) self_attention_res_norm * self_attention_res_proj */
    const float *mlp_res_query;          /* (d) mlp_res_norm * mlp_res_proj */
    kda_weights kda;
    mla_weights mla;
    moe_mlp dense;
    moe_weights moe;
} model_layer;

typedef struct model {
    k3_config config;
    st_set *tensors;
    int hidden, vocab, n_layers;
    int attn_res_block; /* 0: plain residual stream */
    int n_kda, n_mla;
    float norm_eps;
    int dense_inter;
    kda_dims kda;
    mla_dims mla;
    moe_dims moe;
    kernels_matrix embed;   /* (vocab, d) */
    kernels_matrix lm_head; /* (vocab, d) */
    const float *final_norm;      /* (d) */
    const float *out_res_query;   /* (d) output_attn_res_norm * output_attn_res_proj */
    model_layer *layers;          /* (n_layers) */
    moe_expert *experts;          /* (moe layers, n_experts) backing the layers' moe.experts */
    float **owned;                /* the f32 copies of small vectors, freed with the model */
    int n_owned, cap_owned;
} model;

/* The public handle (k3.h) around a loaded model. */
struct k3_model {
    model *m;
};

/* Loads and binds the checkpoint in dir; every tensor's name, dtype and shape is checked
 * against the config. */
k3_status model_load(const char *dir, model **out, k3_error *err);
void model_free(model *m);

#endif
