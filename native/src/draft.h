/* draft.h - the n-gram drafter behind speculative decoding: proposes the tokens that
 * followed the current suffix elsewhere (earlier in the sequence, or in extra material an
 * editor passes: the text after the cursor, other open files, earlier completions).
 * Proposals are only proposals; verification decides. It never sees the model.
 *
 * Evidence gating (weak drafts cost more than they save): a proposal needs a suffix match
 * of at least DRAFT_MIN_MATCH tokens; when several places match equally well, the draft
 * stops where their continuations disagree; and the draft length follows the running
 * acceptance rate. Lookups go through a hash index of every trigram's positions, so a
 * proposal costs O(candidates x match length), never a scan of the text. */
#ifndef K3_DRAFT_H
#define K3_DRAFT_H

#include <stdint.h>

#include "error.h"

#define DRAFT_MIN_MATCH 3

typedef struct draft draft;

k3_status draft_new(draft **out, k3_error *err);
void draft_free(draft *d);

/* Replaces the extra material (copied and indexed). */
k3_status draft_set_material(draft *d, const int32_t *ids, int n, k3_error *err);

/* Makes the indexed sequence seq[0..n): positions past a changed prefix are dropped, new
 * ones indexed. */
k3_status draft_sync(draft *d, const int32_t *seq, int n, k3_error *err);

/* Up to `max` proposed tokens to follow seq[0..n) + `pending`, written to out; returns
 * how many (0: no confident proposal). Tokens listed in stop[0..n_stop) end a proposal
 * before them. */
int draft_propose(draft *d, int32_t pending, int max, const int32_t *stop, int n_stop, int32_t *out);

/* Tells the drafter how many of `proposed` tokens verification accepted. */
void draft_feedback(draft *d, int proposed, int accepted);

/* The running fraction of proposed tokens accepted (0.5 before any feedback). */
double draft_acceptance(const draft *d);

#endif
