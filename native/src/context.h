/* context.h - the inside of a k3_context, shared by the files that implement its parts of
 * k3.h: decode.c (decoding), checkpoint.c (snapshots, checkpoints, k3_sync), generate.c
 * (k3_generate) and state.c (saved state). Nothing outside those files sees it. */
#ifndef K3_CONTEXT_H
#define K3_CONTEXT_H

#include <stdatomic.h>
#include <stddef.h>

#include "error.h"
#include "forward.h"
#include "k3.h"
#include "model.h"

/* A copy of the carried state at one length. Rolling back within a sequence needs only
 * the KDA part (MLA rows below `length` are never rewritten); a checkpoint that must
 * survive the sequence changing also keeps the MLA rows and the tokens. */
typedef struct context_snapshot {
    int length;
    int32_t next;    /* greedy token after position length-1 (-1 when length is 0) */
    float *logits;   /* (vocab) the logits after position length-1; NULL when unknown */
    float *kda;      /* (forward_kda_state_floats) */
    float *mla;      /* (n_mla, length, row) or NULL for a rollback-only snapshot */
    int32_t *tokens; /* (length) or NULL for a rollback-only snapshot */
    size_t bytes;
    unsigned long last_used;
} context_snapshot;

struct k3_context {
    k3_model *model;
    k3_context_params params;
    const kernels_impl *impl;
    threads *pool;
    forward_state state;
    int32_t *tokens; /* (max_context) the sequence so far */
    int length;
    int32_t next;    /* greedy token after the last decoded position; -1 when empty */
    float *scratch;  /* (forward_scratch_floats(batch)) */
    float *logits;   /* (forward_logit_rows(batch), vocab) staging for positions whose logits the caller
                        did not ask for */
    /* (vocab) the logits after the last decoded position, which token healing constrains;
     * valid only when last_logits_valid (not after a saved state is loaded: the format
     * does not carry them). */
    float *last_logits;
    int last_logits_valid;
    /* Cancellation is aimed at one call: call_seq is odd while a cancellable call runs;
     * k3_cancel() records the running call's number in cancel_seq, which can then never
     * match a later call. */
    atomic_uint call_seq, cancel_seq;
    k3_error err;
    /* checkpoint.c */
    context_snapshot *checkpoints; /* (n_checkpoints) */
    int n_checkpoints;
    size_t checkpoint_limit, checkpoint_bytes;
    unsigned long use_clock;
    context_snapshot rollback; /* verify.c's pre-verification snapshot (kda only) */
    float *journal;            /* (forward_journal_floats(journal_capacity)) the last verify pass's */
    int journal_capacity;      /* positions the journal holds */
    const float *verify_rows;  /* (n, vocab) the last verify pass's logits: logits or verify_logits */
    float *verify_logits;      /* (verify_logits_rows, vocab) for a pass cut into several forward passes */
    int verify_logits_rows;
    /* generate.c's measured seconds of a serial step and of a verified position (0: not yet),
     * kept across k3_generate calls: they belong to the model, machine and thread count. */
    double spec_step_seconds; /* generate.c's pacing: a serial step (0: not measured) */
    double spec_extra_seconds; /* and what a drafted position adds (negative: not measured) */
};

/* Decodes ids[0..n) after the current sequence (see k3_decode), with argmax of every
 * position in argmax (n) when not NULL. Sets ctx->next. Errors go to ctx->err. */
k3_status context_decode(k3_context *ctx, const int32_t *ids, int n, float *logits, int n_logits, int32_t *argmax);

/* A verify pass (verify.c): decodes ids[0..n) after the sequence with every position's
 * argmax (n), remembering enough to cut the sequence back to any of them without a second
 * pass. *rows receives where the pass's logits (n, vocab) are, valid until the next
 * decode (the staging buffer itself when one forward pass computed them all, so nothing
 * is copied). context_verify_keep() then keeps the first `keep` (0..n) of those
 * positions: the state, length, next token and last logits are then bit for bit those of
 * decoding only them. */
k3_status context_verify(k3_context *ctx, const int32_t *ids, int n, int32_t *argmax, const float **rows);
void context_verify_keep(k3_context *ctx, int keep);

/* Forgets the sequence (state to zero, length 0). */
void context_clear(k3_context *ctx);

/* Bracket every cancellable public call (k3_decode, k3_sync, k3_generate). */
void context_enter(k3_context *ctx);
void context_leave(k3_context *ctx);

/* True when k3_cancel() was called during the current call. */
int context_cancel_requested(k3_context *ctx);

/* Snapshots (checkpoint.c). with_history: also the MLA rows and tokens, so the snapshot
 * can be restored after the sequence has changed. */
k3_status context_snapshot_take(k3_context *ctx, context_snapshot *snap, int with_history);
void context_snapshot_restore(k3_context *ctx, const context_snapshot *snap);
void context_snapshot_free(context_snapshot *snap);
void context_checkpoints_free(k3_context *ctx);

#endif
