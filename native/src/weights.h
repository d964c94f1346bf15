/* weights.h - the binding of a checkpoint's tensors to a model (weights.c, the only file that
 * knows tensor names), the dimension structs a config gives, and the plan inputs of a
 * checkpoint derived from its config alone. model.c opens the checkpoint and calls these;
 * nothing here opens a file, starts a thread or checks memory. */
#ifndef K3_WEIGHTS_H
#define K3_WEIGHTS_H

#include "config.h"
#include "error.h"
#include "plan.h"

struct model;

/* Sets m's dimension structs from m->config. */
void weights_set_dims(struct model *m);

/* Binds every tensor of m->tensors to m (config, dimensions, tensors, layers, expert array,
 * trunk and expert-cache tables already set), refusing a missing, unused or mismatched one
 * with a detail naming the tensor, the config keys and any defaults taken; then fills
 * m->inputs. dry: vectors are measured, not read (model_survey). */
k3_status weights_bind(struct model *m, int dry, k3_error *err);

/* The plan inputs of a checkpoint that matches `config` exactly as the release stores it
 * (bf16 trunk, experts back to back), derived from shapes alone: the full-scale presets. */
void weights_inputs_from_config(const k3_config *config, plan_inputs *out);

#endif
