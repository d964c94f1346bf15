/* model.h - a loaded K3 model: dimensions, and every weight bound to the math modules'
 * structs. model.c opens, plans and frees it; weights.c binds its tensors (it alone knows
 * tensor names); forward.c runs it (it alone knows layer order). Matrices point into the mapped shards, or, with an owned trunk, are
 * templates whose data trunk.c fills per slot; routed experts are mapped or come from
 * expert_cache.c. Small vectors (norm weights, biases, conv taps, attention-residual query
 * vectors) are always f32 copies. */
#ifndef K3_MODEL_H
#define K3_MODEL_H

#include <pthread.h>
#include <stdatomic.h>

#include "config.h"
#include "expert_cache.h"
#include "kda.h"
#include "kernels.h"
#include "mla.h"
#include "moe.h"
#include "plan.h"
#include "safetensors.h"
#include "trunk.h"
#include "weights.h"

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
    model_layer *layers;          /* (n_layers) with an owned trunk: templates, data NULL */
    moe_expert *experts;          /* (moe layers, n_experts) backing the layers' moe.experts; NULL with a cache */
    float **owned;                /* the f32 copies of small vectors, freed with the model */
    int n_owned, cap_owned;
    /* memory (plan.c, trunk.c, expert_cache.c) */
    k3_model_params params;
    plan_inputs inputs;           /* the sizes plans are made from */
    trunk *trunk;                 /* the owned trunk; NULL when mapped */
    expert_cache *cache;          /* the routed-expert cache; NULL when mapped */
    pthread_mutex_t stream_lock;  /* held by a forward pass while the model streams */
    pthread_mutex_t stats_lock;   /* guards the two fields below */
    uint64_t forward_passes;
    double forward_seconds;
    int locks_ready;
    /* Set once a pass finds a shard changed under the model, or faults reading one
     * (model_check_files, model_fault): from then on every pass refuses with changed_err. */
    atomic_int changed;
    k3_error changed_err; /* written once, under stats_lock, before changed is set */
    /* Tests only: K3_TEST_SKIP_FILE_CHECK=1 at open skips the stat() at each pass, so a
     * shard changed between passes is met by the reads themselves (SIGBUS, model_fault). */
    int skip_file_check;
} model;

/* The public handle (k3.h) around a loaded model. */
struct k3_model {
    model *m;
};

/* Loads and binds the checkpoint in dir; every tensor's name, dtype and shape is checked
 * against the config. params NULL: everything mapped. The model's part of the plan is
 * checked against MemAvailable before the trunk and the expert cache allocate. */
k3_status model_load(const char *dir, const k3_model_params *params, model **out, k3_error *err);

/* As model_load without reading or allocating any weight (vectors are measured, not
 * copied): enough for model->inputs and plans, not for running. */
k3_status model_survey(const char *dir, const k3_model_params *params, model **out, k3_error *err);
void model_free(model *m);

/* The plan (k3_plan) of m's dimensions measured as `in` at params mp and a context as cp
 * (either NULL: the defaults). available 0: read MemAvailable. */
k3_status model_plan(const model *m, const plan_inputs *in, const k3_model_params *mp, const k3_context_params *cp,
                     uint64_t available, k3_plan *out, k3_error *err);

/* K3_ERR_BUDGET when the per-context part of m's plan for a context as cp (recurrent state,
 * KV cache, buffers) exceeds MemAvailable now; the detail gives both numbers (model.c). */
k3_status model_check_context(const model *m, const k3_context_params *cp, k3_error *err);

/* Where a forward pass begins: K3_ERR_IO when m's shards are no longer the files loaded
 * (st_check_unchanged) or a pass already found so; the first such failure is kept and every
 * later call repeats it, so no pass reads a changed mapping again. */
k3_status model_check_files(model *m, k3_error *err);

/* A pass faulted reading m's mapped weights at addr (fault.h): records K3_ERR_IO naming the
 * shard, the offset and the file's size when loaded and now, as model_check_files then
 * repeats it, and returns it. */
k3_status model_fault(model *m, const void *addr, k3_error *err);

#endif
