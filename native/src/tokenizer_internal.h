/* tokenizer_internal.h - what the tokenizer's own files share: the tables of a loaded
 * tokenizer (filled by tokenizer_load.c, read by tokenizer.c's encoder and decoder) and the
 * byte comparison both hash tables probe with. Not for other modules: they use tokenizer.h
 * or k3.h. */
#ifndef K3_TOKENIZER_INTERNAL_H
#define K3_TOKENIZER_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "tokenizer.h"

#define NO_RANK INT32_MAX /* a byte range that is not a token */
#define INVALID_CP 0xFFFFFFFFu /* a byte that is not UTF-8: a character with no Unicode class */
#define HEAP_MIN_DEFAULT 128 /* pieces this long or longer are merged with the heap */

struct k3_tokenizer {
    int32_t n_ranks;
    int32_t n_vocab;          /* n_ranks + TOKENIZER_N_SPECIAL */
    char *bytes;              /* every token's bytes, by id; a special's are its name */
    uint32_t *start;          /* (n_vocab + 1): id's bytes are bytes[start[id] .. start[id + 1]) */
    size_t max_rank_len;      /* longest rank token: longer byte ranges are never tokens */
    int32_t byte_rank[256];   /* the rank of each single byte */
    int32_t *rank_slot;       /* open addressing over rank ids, -1 empty; rank_mask + 1 slots */
    uint32_t rank_mask;
    int32_t special_slot[1024]; /* the same over special ids */
    uint8_t special_first[32];  /* bitmap of the first bytes of special names */
    size_t special_len[TOKENIZER_N_SPECIAL]; /* distinct special name lengths, longest first */
    size_t n_special_len;
    size_t heap_min;

    /* Scratch reused across calls (one thread at a time). */
    uint32_t *cp;  /* (chars_cap) code point of each character of a chunk, or INVALID_CP */
    uint8_t *cls;  /* (chars_cap) its tokenizer_unicode class */
    uint32_t *off; /* (chars_cap + 1) its byte offset from the chunk start */
    size_t chars_cap;
    void *bpe;     /* BPE work arrays, bpe_cap bytes */
    size_t bpe_cap;

    k3_error err;
};

#define SPECIAL_MASK (sizeof(((k3_tokenizer *)0)->special_slot) / sizeof(int32_t) - 1)

/* Whether token id's bytes are p[0..n): the probe of the rank and special tables. */
static inline int same_token(const k3_tokenizer *t, int32_t id, const uint8_t *p, size_t n) {
    return t->start[id + 1] - t->start[id] == n && !memcmp(t->bytes + t->start[id], p, n);
}

#endif
