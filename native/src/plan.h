/* plan.h - what a model needs at given budgets and context length, component by component
 * (k3_plan of k3.h), and how an owned-trunk budget is placed (which layers are pinned, how
 * many ring slots). The same functions decide the placement the trunk and the expert cache
 * then allocate, so the plan and the allocation cannot drift apart. It allocates nothing,
 * reads no file (except MemAvailable through io.c), knows no tensor names (weights.c
 * measures a checkpoint into plan_inputs) and no model: what a context adds comes in as
 * byte counts (plan_context, measured by model_plan in model.c from the dimensions). */
#ifndef K3_PLAN_H
#define K3_PLAN_H

#include <stdint.h>

#include "config.h"
#include "k3.h"
#include "trunk.h"

/* The sizes a plan is made from: measured from a checkpoint by weights.c, or derived from
 * a config for the full-scale presets. */
typedef struct plan_inputs {
    int n_layers;
    uint64_t layer_bytes[K3_CONFIG_MAX_LAYERS]; /* (n_layers) each layer's trunk in a slot */
    uint64_t dense_file_bytes;  /* every layer's trunk tensors as stored */
    uint64_t embed_bytes, lm_head_bytes;
    uint64_t vector_bytes;      /* the f32 copies */
    uint64_t index_bytes;       /* tensor metadata and read tables */
    uint64_t expert_slot_bytes; /* the largest expert in a slot */
    uint64_t expert_pool_bytes; /* every routed expert as stored */
    int64_t experts;            /* MoE layers x experts per layer */
    int top_k;
} plan_inputs;

/* Places an owned trunk in `budget` bytes: everything pinned when it all fits; else two
 * ring slots (reads overlap compute) when the budget holds two of the largest streamed
 * layer, else one, and as many layers pinned as the rest allows, largest first.
 * K3_ERR_BUDGET below one slot of the largest layer. */
k3_status plan_trunk_layout(const plan_inputs *in, uint64_t budget, trunk_layout *out, k3_error *err);

/* Expert cache slots for `budget` bytes (at most one per expert). K3_ERR_BUDGET below top_k. */
k3_status plan_expert_slots(const plan_inputs *in, uint64_t budget, int *slots, k3_error *err);

/* What one context adds to a plan: its size and the bytes it allocates. */
typedef struct plan_context {
    int max_context, batch;
    uint64_t recurrent_state; /* KDA state and conv history */
    uint64_t kv_cache;        /* MLA latent cache for max_context positions */
    uint64_t buffers;         /* scratch, logits staging, the token list, and a verify pass's
                                 copy of the state and journal (verify.c) */
} plan_context;

/* The full plan of a model measured as `in`, at params mp (not NULL: defaults already
 * applied), with the context ctx. available 0: read MemAvailable. */
k3_status plan_make(const plan_inputs *in, const k3_model_params *mp, const plan_context *ctx, uint64_t available,
                    k3_plan *out, k3_error *err);

/* "1.23 GB" / "456.7 MB" into buf (decimal units, as the plan prints them). */
const char *plan_human(uint64_t bytes, char *buf, size_t size);

#endif
