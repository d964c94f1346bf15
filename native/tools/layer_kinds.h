/* layer_kinds.h - where a forward pass's time, multiply-adds and weight bytes go, by layer
 * kind, for `k3 bench`: an observer (k3_context_observe) that stamps the clock and the
 * engine's counters at each layer's end, so prefill's share of the FMA peak and decode's
 * share of the triad can be read per kind without a profiler. Observing never changes a
 * computed bit; its cost is a clock read and a few counters per layer. */
#ifndef K3_TOOLS_LAYER_KINDS_H
#define K3_TOOLS_LAYER_KINDS_H

#include <stdint.h>

#include "k3.h"

/* dense: a layer whose FFN is the dense MLP (whatever its mixer); the MoE layers by mixer;
 * lm_head: from the last layer's end to the logits (the final mix, norm and product). */
typedef enum layer_kind { LAYER_KIND_DENSE, LAYER_KIND_KDA_MOE, LAYER_KIND_MLA_MOE, LAYER_KIND_LM_HEAD, LAYER_KINDS } layer_kind;

extern const char *const layer_kind_names[LAYER_KINDS];

typedef struct layer_kind_totals {
    double seconds;
    uint64_t multiply_adds, weight_bytes;
    long spans; /* layers (lm_head: passes) counted */
} layer_kind_totals;

typedef struct layer_kinds {
    layer_kind_totals kind[LAYER_KINDS];
    long passes;
    /* The current span: its start and the mixer of the layer in it. */
    double t0;
    k3_counters c0;
    int mixer_kda;
} layer_kinds;

/* Clears the totals (between prefill and decode). */
void layer_kinds_reset(layer_kinds *lk);

/* The observer: pass with lk as its user pointer. */
void layer_kinds_observe(void *lk, const k3_activation *a);

/* Layers of a kind in one pass (totals' spans over passes), 0 when none ran. */
long layer_kinds_per_pass(const layer_kinds *lk, layer_kind k);

#endif
