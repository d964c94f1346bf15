/* heal.c - the byte-prefix constraint of token healing (see heal.h). A constrained step
 * scans every ordinary token once (a first-byte test rejects nearly all of them), so it
 * costs a fraction of a millisecond even for K3's 163,840 ids, and it runs only for the
 * one or two steps that spell the healed bytes. */
#include "heal.h"

#include <string.h>

#include "tokenizer.h"

void heal_init(heal *h, const k3_tokenizer *tok, const char *bytes, size_t n) {
    h->tok = tok;
    h->bytes = (const uint8_t *)bytes;
    h->n = bytes ? n : 0;
    h->done = 0;
    h->n_ranks = tok ? tokenizer_vocab_size(tok) - TOKENIZER_N_SPECIAL : 0;
}

/* Token id's bytes against bytes[at..n): allowed when one is a prefix of the other. */
static int compatible(const heal *h, size_t at, const uint8_t *t, size_t len) {
    const size_t rest = h->n - at;
    return len > 0 && memcmp(t, h->bytes + at, len < rest ? len : rest) == 0;
}

int heal_allows(const heal *h, size_t at, int32_t id) {
    if (id < 0 || id >= h->n_ranks)
        return 0;
    size_t len;
    const char *t = tokenizer_token(h->tok, id, &len);
    return t && compatible(h, at, (const uint8_t *)t, len);
}

size_t heal_advance(const heal *h, size_t at, int32_t id) {
    size_t len = 0;
    tokenizer_token(h->tok, id, &len);
    return at + len < h->n ? at + len : h->n;
}

int32_t heal_argmax(const heal *h, size_t at, const float *logits) {
    const uint8_t first = h->bytes[at];
    int32_t best = -1;
    for (int32_t id = 0; id < h->n_ranks; id++) {
        size_t len;
        const uint8_t *t = (const uint8_t *)tokenizer_token(h->tok, id, &len);
        if (len == 0 || t[0] != first || !compatible(h, at, t, len))
            continue;
        if (best < 0 || logits[id] > logits[best])
            best = id;
    }
    return best;
}

int heal_allowed_prefix(const heal *h, size_t at, const int32_t *draft, int n_draft) {
    for (int k = 0; k < n_draft && at < h->n; k++) {
        if (!heal_allows(h, at, draft[k]))
            return k;
        at = heal_advance(h, at, draft[k]);
    }
    return n_draft; /* every token checked, or the constraint ended: the rest are free */
}
