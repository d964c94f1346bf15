/* forward.h - the forward pass over a batch of consecutive tokens of one sequence: the only
 * code that knows the layer order and the block attention residuals (k3-architecture
 * §3.3). Per-layer math lives in kda.c, mla.c and moe.c. */
#ifndef K3_FORWARD_H
#define K3_FORWARD_H

#include <stdint.h>

#include "model.h"

/* What a sequence carries between calls, and who watches its passes. */
typedef struct forward_state {
    float *kda;   /* (n_kda, kda_state_floats): recurrent state + conv history per KDA layer */
    float *mla;   /* (n_mla, capacity, mla_cache_row_floats): latent cache per MLA layer */
    int capacity; /* positions the MLA cache holds */
    /* NULL, or a verify pass's journal (n_kda, journal_capacity, kda_journal_row_floats):
     * each KDA layer records what its state consumed at positions journal_start onwards,
     * so the state can be brought to any of them afterwards (forward_kda_advance). */
    float *journal;
    int journal_start, journal_capacity;
    k3_activation_fn observe; /* NULL, or told every site of every pass (k3_context_observe) */
    void *observe_user;
} forward_state;

long forward_kda_state_floats(const model *m);
long forward_mla_cache_floats(const model *m, int capacity);

/* Floats of a journal for n positions (forward_state.journal). */
long forward_journal_floats(const model *m, int n);

/* Advances the KDA state of st by the first `keep` positions of a journal that was
 * recorded starting from this very state (forward_state.journal, capacity `capacity`):
 * the recurrence and the conv history only, no weights read; bit-identical to decoding
 * those positions. scratch: at least forward_scratch_floats(m, 1, ...) floats. */
void forward_kda_advance(const model *m, forward_state *st, const float *journal, int capacity, int keep,
                         float *scratch, threads *pool);

/* Tokens per forward pass unless the caller says otherwise: enough that a batch routes
 * several tokens to each expert (medium: 128 x top-8 over 256 experts, 4 each), so an
 * expert's weights are decoded once for all of them. */
#define FORWARD_DEFAULT_BATCH 128

/* The largest batch K3_BATCH_AUTO sizes: past it a pass's compute dwarfs one read of the
 * trunk (the full release: about 0.9 s of compute per token on two threads against 77-135
 * GB of streamed trunk at 0.5-2.6 GB/s, docs/SCALE.md), so larger batches save little and
 * only take memory. */
#define FORWARD_MAX_SIZED_BATCH 4096

/* The most positions one pass computes logits for (vocab floats each): a prefill pass
 * needs one; a context cuts a pass wanting more (teacher forcing, verification) to this
 * many, so the staging buffer does not grow with the batch. */
#define FORWARD_MAX_LOGIT_ROWS 32

static inline int forward_logit_rows(int batch) {
    return batch < FORWARD_MAX_LOGIT_ROWS ? batch : FORWARD_MAX_LOGIT_ROWS;
}

/* Scratch floats forward_run needs for batches of up to `batch` tokens. */
long forward_scratch_floats(const model *m, int batch, int capacity);

/* Runs ids[0..n) (positions start..start+n-1, start + n <= capacity) through the model and
 * advances st. For positions i in [first_out, n): logits (n - first_out, vocab) receives
 * their logits. Ids must be < vocab (the caller checks). Fails only when the model streams
 * and a read fails: K3_ERR_EXPERT_READ (a routed expert) or K3_ERR_IO (a trunk layer or an
 * embedding row); st is then partly advanced and the sequence must be cleared. */
k3_status forward_run(const model *m, forward_state *st, int start, const int32_t *ids, int n, int first_out,
                      float *logits, float *scratch, const kernels_impl *impl, threads *pool, k3_error *err);

#endif
