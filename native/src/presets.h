/* presets.h - the memory presets' internals shared with tests: the plan of the full-scale
 * release under any budgets, from its config alone (no checkpoint). The public side (the
 * table, "auto") is in k3.h. */
#ifndef K3_PRESETS_H
#define K3_PRESETS_H

#include "error.h"
#include "k3.h"

/* The plan of the released Kimi K3 (93 layers, 896 experts, bf16 trunk, MXFP4 experts)
 * under mp for a context as cp (either may be NULL: defaults); available is taken as 0
 * (unknown). K3_ERR_BUDGET below a floor, as for a checkpoint. */
k3_status presets_release_plan(const k3_model_params *mp, const k3_context_params *cp, k3_plan *out, k3_error *err);

/* A model holding only the release's dimensions and plan inputs (no weights). */
struct model;
k3_status presets_release_model(struct model **out, k3_error *err);

#endif
