/* kda.h - the Kimi Delta Attention token mixer (linear attention with a per-head recurrent
 * state), for a batch of consecutive tokens of one sequence. It knows the math of one KDA
 * layer and nothing of tensor names, layer order or other layers.
 *
 * State carried between calls: per head S[key][value] (head_dim x head_dim, fp32), and the
 * short-conv history, the last conv_k-1 PRE-conv projections of q, k and v. Tokens are run
 * through the recurrence one at a time in order (decay -> delta write -> read), so a batch
 * of n tokens gives bit-identical results to n calls of one token. A batch can also
 * journal each token's inputs to the state, so the state before it can later be advanced
 * by any prefix of the batch without the weights (a verify pass cut back to its accepted
 * drafts). */
#ifndef K3_KDA_H
#define K3_KDA_H

#include "kernels.h"

typedef struct kda_dims {
    int hidden;    /* d */
    int heads;     /* H */
    int head_dim;  /* D (keys and values) */
    int conv_k;    /* short-conv taps */
    int gate_rank; /* rows of f_a_proj */
    int lower_bound_gate; /* 1: g = lb*sigmoid(exp(A_log)*z); 0: g = -exp(A_log)*softplus(z) */
    float gate_lower_bound;
    float norm_eps; /* o_norm eps (rms_norm_eps) */
} kda_dims;

typedef struct kda_weights {
    kernels_matrix q, k, v;  /* (H*D, d) */
    kernels_matrix f_a;      /* (gate_rank, d) */
    kernels_matrix f_b;      /* (H*D, gate_rank) */
    kernels_matrix b;        /* (H, d) */
    kernels_matrix g;        /* (H*D, d) full-rank output gate */
    kernels_matrix o;        /* (d, H*D) */
    const float *conv[3];    /* q, k, v taps: (conv_k, H*D), oldest tap first (the checkpoint's
                                (H*D, conv_k) reordered at load, weights.c) */
    const float *a_log;      /* (H): the first H entries of the stored (padded) A_log */
    const float *dt_bias;    /* (H*D) */
    const float *o_norm;     /* (D), shared by all heads */
} kda_weights;

/* Floats of carried state for one layer: S plus the conv history. */
long kda_state_floats(const kda_dims *dims);

/* Scratch floats kda_forward needs for a batch of n tokens. */
long kda_scratch_floats(const kda_dims *dims, int n);

/* Floats a journal keeps per token: what the recurrence and the conv history consumed
 * (the pre-conv q, k, v projections, the normalised k, v, the decay and beta), so the
 * state can later be advanced by any prefix of those tokens without the weights. */
long kda_journal_row_floats(const kda_dims *dims);

/* out (n, d) = KDA(x (n, d)), x being the input_layernorm output; state (kda_state_floats)
 * is read and advanced by n tokens. journal: NULL, or (n, kda_journal_row_floats) rows
 * that receive each token's inputs to the state. */
void kda_forward(const kda_dims *dims, const kda_weights *w, float *state, const float *x, int n, float *out,
                 float *scratch, float *journal, const kernels_impl *impl, threads *pool);

/* Advances state by the first `keep` tokens of a journal that kda_forward wrote starting
 * from this very state: bit-identical to having run kda_forward on those tokens alone,
 * at the cost of the recurrence only (no weight is read, no output computed). scratch:
 * H*D floats. */
void kda_advance_journal(const kda_dims *dims, float *state, const float *journal, int keep, float *scratch,
                         threads *pool);

#endif
