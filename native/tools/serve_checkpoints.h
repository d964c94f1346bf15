/* serve_checkpoints.h - prefill for `k3 serve` (serve_checkpoints.c): a prompt resumes
 * where the context already holds a prefix of it, and its boundaries are checkpointed. */
#ifndef K3_SERVE_CHECKPOINTS_H
#define K3_SERVE_CHECKPOINTS_H

#include "serve.h"

/* Makes the sequence exactly ids, checkpointing each boundary past the resume point and
 * the end. *reused: prompt tokens not recomputed (the first sync's report). */
k3_status serve_prefill(server *s, const int32_t *ids, int n, int *bounds, int n_bounds, int *reused);

#endif
