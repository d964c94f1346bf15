/* run_dump.h - `k3 MODEL_DIR ... --dump-activations DIR`: every site the forward passes
 * report (k3.h, "activations") written to DIR, one file per site named after the reference
 * module (model.layers.3.self_attn.f32, model.layers.1.block_sparse_moe.gate.i32, ...), raw
 * little-endian float32 (int32 for the chosen experts), row p holding sequence position p,
 * and DIR/activations.json indexing them with the token ids. A later pass over the same
 * positions overwrites their rows, so after speculation or full recompute each file holds
 * the values of the final sequence. model.norm and lm_head rows exist only for positions
 * whose logits were computed (every position with --tf-check); others are zero.
 * docs/ACTIVATIONS.md shows how to compare a dump with the Hugging Face reference. */
#ifndef K3_RUN_DUMP_H
#define K3_RUN_DUMP_H

#include <stdint.h>

#include "k3.h"

typedef struct run_dump run_dump;

/* Creates DIR (and its parents) and attaches to ctx: every later pass is written. Returns
 * NULL after printing why. */
run_dump *run_dump_start(const char *dir, k3_context *ctx);

/* Detaches, writes DIR/activations.json for the sequence ids (n) and frees d. Returns 0, or
 * -1 after printing the first failed write (naming the file) or the index's failure. */
int run_dump_finish(run_dump *d, k3_context *ctx, const int32_t *ids, int n);

/* Detaches and frees without writing the index (a failed run); NULL is a no-op. */
void run_dump_abandon(run_dump *d, k3_context *ctx);

#endif
