/* verify.c - the verify pass of speculative decoding, and cutting it back to the accepted
 * positions without a second pass. MLA needs nothing for that: rows past the kept length
 * are never read and get overwritten. KDA's state is recurrent and updated in place, so
 * the pass keeps (a) a snapshot of the state before it and (b) a journal of what each
 * layer's recurrence and conv history consumed at each position; keeping k positions
 * restores the snapshot and runs the recurrence over the first k journal rows, reading no
 * weights. Keeping the state after every position instead would cost H D D floats per
 * position and layer (434 MB per position on K3: 96 heads of 128, 69 KDA layers); the
 * journal costs 6 H D + H (20 MB per position on K3, 1/21 of that), and its recurrence
 * costs what the pass's own did for those positions: no weights, a small fraction of a
 * pass that reads them. */
#include <stdlib.h>
#include <string.h>

#include "context.h"

k3_status context_verify(k3_context *c, const int32_t *ids, int n, int32_t *argmax, const float **rows) {
    const model *m = c->model->m;
    if (n > c->journal_capacity) {
        const long floats = forward_journal_floats(m, n);
        float *grown = realloc(c->journal, sizeof(float) * (size_t)(floats ? floats : 1));
        if (!grown)
            return error_set(&c->err, K3_ERR_OUT_OF_MEMORY,
                             "verify pass of %d positions: out of memory for its journal (%.1f MB)", n, floats * 4e-6);
        c->journal = grown;
        c->journal_capacity = n;
    }
    /* One forward pass computes every row into the staging buffer, which is then read in
     * place; a pass cut into several (a batch below n) gathers them into verify_logits. */
    const int one_pass = n <= c->params.batch && n <= forward_logit_rows(c->params.batch);
    if (!one_pass && n > c->verify_logits_rows) {
        float *grown = realloc(c->verify_logits, sizeof(float) * (size_t)n * m->vocab);
        if (!grown)
            return error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "verify pass of %d positions: out of memory for its logits",
                             n);
        c->verify_logits = grown;
        c->verify_logits_rows = n;
    }
    k3_status s = context_snapshot_take(c, &c->rollback, 0);
    if (s != K3_OK)
        return s;
    c->state.journal = c->journal;
    c->state.journal_start = c->length;
    c->state.journal_capacity = c->journal_capacity;
    s = context_decode(c, ids, n, one_pass ? NULL : c->verify_logits, one_pass ? 0 : n, argmax);
    c->state.journal = NULL;
    c->verify_rows = one_pass ? c->logits : c->verify_logits;
    *rows = c->verify_rows;
    /* Cancelled between the passes of a long verify (a small batch): none of it was
     * verified, so none of it stays. (A failed read has cleared the sequence instead.) */
    if (s == K3_ERR_CANCELLED && c->length > c->rollback.length)
        context_snapshot_restore(c, &c->rollback);
    return s;
}

void context_verify_keep(k3_context *c, int keep) {
    const model *m = c->model->m;
    const int start = c->rollback.length;
    if (keep >= c->length - start)
        return;
    context_snapshot_restore(c, &c->rollback);
    if (keep == 0)
        return;
    forward_kda_advance(m, &c->state, c->journal, c->journal_capacity, keep, c->scratch, c->pool);
    const float *row = c->verify_rows + (size_t)(keep - 1) * m->vocab;
    c->length = start + keep; /* the kept ids are already in c->tokens */
    c->next = c->impl->argmax(row, m->vocab);
    memcpy(c->last_logits, row, sizeof(float) * (size_t)m->vocab);
    c->last_logits_valid = 1;
}
