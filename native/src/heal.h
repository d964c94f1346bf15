/* heal.h - token healing's byte-prefix constraint on generation (docs/PROMPTS.md, "Token
 * healing"). A prompt that ends in the middle of what would be one token (after an
 * indentation run, a partial word or number) is backed off by its caller to the start of
 * its last piece, and the removed bytes are handed to k3_generate: the first generated
 * tokens must spell them. A token is allowed while its bytes are a prefix of what remains
 * to be spelled, or when they spell all of it and go on; special tokens never are. Greedy
 * under the constraint means the allowed token with the largest logit (the lowest id on
 * ties, as kernels' argmax). It knows nothing of the model: only bytes and logits. */
#ifndef K3_HEAL_H
#define K3_HEAL_H

#include <stddef.h>
#include <stdint.h>

#include "k3.h"

typedef struct heal {
    const k3_tokenizer *tok;
    const uint8_t *bytes; /* (n) the text to spell, owned by the caller */
    size_t n;
    size_t done;     /* bytes spelled by the tokens emitted so far */
    int32_t n_ranks; /* ids below this are ordinary tokens; the rest are specials */
} heal;

/* A constraint over bytes[0..n) (n 0: none). */
void heal_init(heal *h, const k3_tokenizer *tok, const char *bytes, size_t n);

/* True while some of the bytes are still to be spelled. */
static inline int heal_active(const heal *h) {
    return h->done < h->n;
}

/* The offset reached when `id` is generated at offset `at` (at < n, id allowed there). */
size_t heal_advance(const heal *h, size_t at, int32_t id);

/* True when `id` may be generated at offset `at` (at < n). */
int heal_allows(const heal *h, size_t at, int32_t id);

/* The allowed id with the largest logit at offset `at` (at < n), or -1 when no token of
 * the vocabulary is allowed (a byte-level vocabulary always has one). */
int32_t heal_argmax(const heal *h, size_t at, const float *logits);

/* How many of draft[0..n_draft) can follow at offset `at` without breaking the
 * constraint: the drafter's proposal is cut before the first token that would. */
int heal_allowed_prefix(const heal *h, size_t at, const int32_t *draft, int n_draft);

#endif
