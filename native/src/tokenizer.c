/* tokenizer.c - tiktoken byte-level BPE with the K3 split pattern and special tokens (see
 * tokenizer.h). Encoding follows the release's TikTokenTokenizer.encode step by step:
 *
 *   1. cut the text into chunks of 400,000 code points, and each chunk wherever a run of
 *      whitespace or non-whitespace (Python str.isspace) would exceed 25,000 code points;
 *   2. in each cut, find the special tokens (when allowed) and encode the text between
 *      them on its own;
 *   3. split that text with the pattern (pretokenize.c, a hand-written matcher with the
 *      pattern's leftmost-first, backtracking semantics);
 *   4. a piece that is a token is that token, otherwise BPE merges the adjacent pair of
 *      lowest rank until none is a token (ties: leftmost).
 *
 * Invalid UTF-8 bytes are single "characters" with no Unicode class (like U+FFFD: not a
 * letter, number or space); their byte tokens carry them through, so any bytes round-trip.
 *
 * Reading tiktoken.model and the specials into the tables is tokenizer_load.c's job; this
 * file looks tokens up in them (the lookups stay here, next to the BPE loops that call them
 * for every pair), encodes, decodes, and holds the k3.h entry points. */
#include "tokenizer_internal.h"
#include "hash.h"

#include "pretokenize.h"
#include "tokenizer_unicode.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEAD_PART (-2)    /* a BPE part merged into its left neighbour */

/* ---- hashing ------------------------------------------------------------------------- */

/* The rank whose bytes are p[0..n), or NO_RANK. */
static int32_t rank_of(const k3_tokenizer *t, const uint8_t *p, size_t n) {
    if (n == 1)
        return t->byte_rank[p[0]];
    if (n > t->max_rank_len)
        return NO_RANK;
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & t->rank_mask;; i = (i + 1) & t->rank_mask) {
        int32_t id = t->rank_slot[i];
        if (id < 0)
            return NO_RANK;
        if (same_token(t, id, p, n))
            return id;
    }
}

static int32_t special_of(const k3_tokenizer *t, const uint8_t *p, size_t n) {
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & SPECIAL_MASK;; i = (i + 1) & SPECIAL_MASK) {
        int32_t id = t->special_slot[i];
        if (id < 0)
            return -1;
        if (same_token(t, id, p, n))
            return id;
    }
}

int32_t tokenizer_vocab_size(const k3_tokenizer *t) {
    return t->n_vocab;
}

int32_t tokenizer_special_id(const k3_tokenizer *t, const char *name, size_t len) {
    if (!name || len == 0)
        return -1;
    return special_of(t, (const uint8_t *)name, len);
}

const char *tokenizer_token(const k3_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    if (len)
        *len = t->start[id + 1] - t->start[id];
    return t->bytes + t->start[id];
}

void tokenizer_set_heap_min(k3_tokenizer *t, size_t n) {
    t->heap_min = n;
}

/* ---- encoding: output ---------------------------------------------------------------- */

typedef struct sink {
    int32_t *ids;
    size_t cap, n;
    const uint8_t *text; /* the start of the text being encoded */
    size_t *starts;      /* NULL, or room for a byte offset from text per piece: then pieces */
    size_t n_starts;     /* are only found, not encoded (token healing's boundaries) */
} sink;

static inline void emit(sink *s, int32_t id) {
    if (s->n < s->cap)
        s->ids[s->n] = id;
    s->n++;
}

/* ---- encoding: BPE ------------------------------------------------------------------- */

static void *scratch(k3_tokenizer *t, size_t bytes) {
    if (bytes > t->bpe_cap) {
        size_t cap = t->bpe_cap ? t->bpe_cap : 4096;
        while (cap < bytes)
            cap *= 2;
        void *p = realloc(t->bpe, cap);
        if (!p)
            return NULL;
        t->bpe = p;
        t->bpe_cap = cap;
    }
    return t->bpe;
}

/* tiktoken's own merge loop: a scan for the lowest-ranked pair after every merge, which
 * is quadratic but fastest for the short pieces that are nearly all of real text.
 * start: (n + 1) part boundaries; rank[i]: the rank of parts i and i+1 joined. */
static void bpe_scan(const k3_tokenizer *t, const uint8_t *p, size_t n, uint32_t *start,
                     int32_t *rank, sink *out) {
    size_t m = n + 1;
    for (size_t i = 0; i < m; i++) {
        start[i] = (uint32_t)i;
        rank[i] = i + 2 < m ? rank_of(t, p + i, 2) : NO_RANK;
    }
    for (;;) {
        int32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 2 < m; i++)
            if (rank[i] < best) {
                best = rank[i];
                bi = i;
            }
        if (best == NO_RANK)
            break;
        /* Join parts bi and bi+1: boundary bi+1 goes; the pairs around bi change. */
        if (bi > 0)
            rank[bi - 1] = rank_of(t, p + start[bi - 1], start[bi + 2] - start[bi - 1]);
        rank[bi] = bi + 3 < m ? rank_of(t, p + start[bi], start[bi + 3] - start[bi]) : NO_RANK;
        memmove(start + bi + 1, start + bi + 2, (m - bi - 2) * sizeof *start);
        memmove(rank + bi + 1, rank + bi + 2, (m - bi - 2) * sizeof *rank);
        m--;
    }
    for (size_t i = 0; i + 1 < m; i++)
        emit(out, rank_of(t, p + start[i], start[i + 1] - start[i]));
}

/* The same merges in n log n: parts form a linked list keyed by their first byte, and a
 * min-heap holds (rank << 32 | first byte) of every joinable pair, so the lowest rank
 * comes out first and, among equal ranks, the leftmost, exactly as the scan picks. A
 * popped entry is stale when its part's pair has changed since; pair ranks only grow
 * longer, so a stale entry never equals a live one. */
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

static void bpe_heap(const k3_tokenizer *t, const uint8_t *p, size_t n, void *work, sink *out) {
    uint32_t *nxt = work;                 /* (n + 1) first byte of the next part; n at the end */
    uint32_t *prv = nxt + n + 1;          /* (n) first byte of the previous part */
    int32_t *pair = (int32_t *)(prv + n); /* (n) rank of this part joined with the next */
    int32_t *tok = pair + n;              /* (n) this part's own token */
    uint64_t *heap = (uint64_t *)(void *)(((uintptr_t)(tok + n) + 7) & ~(uintptr_t)7); /* (3n) */
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)i + 1;
        prv[i] = (uint32_t)i - 1;
        tok[i] = t->byte_rank[p[i]];
        pair[i] = i + 1 < n ? rank_of(t, p + i, 2) : NO_RANK;
        if (pair[i] != NO_RANK)
            heap_push(heap, &hn, (uint64_t)pair[i] << 32 | i);
    }
    nxt[n] = (uint32_t)n;
    while (hn) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t s = (uint32_t)top;
        int32_t r = (int32_t)(top >> 32);
        if (pair[s] != r)
            continue;
        uint32_t gone = nxt[s];
        tok[s] = r;
        pair[gone] = DEAD_PART;
        nxt[s] = nxt[gone];
        if (nxt[s] < n)
            prv[nxt[s]] = s;
        pair[s] = nxt[s] < n ? rank_of(t, p + s, nxt[nxt[s]] - s) : NO_RANK;
        if (pair[s] != NO_RANK)
            heap_push(heap, &hn, (uint64_t)pair[s] << 32 | s);
        if (s > 0) {
            uint32_t l = prv[s];
            pair[l] = rank_of(t, p + l, nxt[s] - l);
            if (pair[l] != NO_RANK)
                heap_push(heap, &hn, (uint64_t)pair[l] << 32 | l);
        }
    }
    for (uint32_t s = 0; s < n; s = nxt[s])
        emit(out, tok[s]);
}

static k3_status encode_piece(k3_tokenizer *t, const uint8_t *p, size_t n, sink *out,
                              k3_error *err) {
    int32_t r = rank_of(t, p, n);
    if (r != NO_RANK) {
        emit(out, r);
        return K3_OK;
    }
    if (n < t->heap_min) {
        void *w = scratch(t, (n + 1) * (sizeof(uint32_t) + sizeof(int32_t)));
        if (!w)
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for a %zu-byte piece", n);
        bpe_scan(t, p, n, w, (int32_t *)((uint32_t *)w + n + 1), out);
    } else {
        void *w = scratch(t, (4 * n + 1) * sizeof(uint32_t) + 8 + 3 * n * sizeof(uint64_t));
        if (!w)
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for a %zu-byte piece", n);
        bpe_heap(t, p, n, w, out);
    }
    return K3_OK;
}

/* ---- encoding: the text -------------------------------------------------------------- */

/* The leftmost special name in s[from..to) (longest at that position): K3_OK with *at,
 * *len and *id set, or the position `to` when there is none. */
static void find_special(const k3_tokenizer *t, const uint8_t *s, size_t from, size_t to,
                         size_t *at, size_t *len, int32_t *id) {
    for (size_t i = from; i < to; i++) {
        if (!(t->special_first[s[i] >> 3] & (1u << (s[i] & 7))))
            continue;
        for (size_t k = 0; k < t->n_special_len; k++) {
            size_t n = t->special_len[k];
            if (n > to - i)
                continue;
            int32_t hit = special_of(t, s + i, n);
            if (hit >= 0) {
                *at = i;
                *len = n;
                *id = hit;
                return;
            }
        }
    }
    *at = to;
    *len = 0;
    *id = -1;
}

/* Splits characters [a, b) of the decoded chunk (bytes base[off[a] .. off[b])) into pieces
 * and encodes each. */
static k3_status encode_ordinary(k3_tokenizer *t, const uint8_t *base, size_t a, size_t b,
                                 sink *out, k3_error *err) {
    for (size_t p = a; p < b;) {
        size_t q = pretokenize_match_piece(t->cp, t->cls, p, b);
        if (out->starts) {
            out->starts[out->n_starts++] = (size_t)(base + t->off[p] - out->text);
            p = q;
            continue;
        }
        k3_status st = encode_piece(t, base + t->off[p], t->off[q] - t->off[p], out, err);
        if (st != K3_OK)
            return st;
        p = q;
    }
    return K3_OK;
}

/* One cut of the release (characters [a, b) of the chunk) as tiktoken encodes it: special
 * names where allowed, ordinary text between them. */
static k3_status encode_cut(k3_tokenizer *t, const uint8_t *base, size_t a, size_t b,
                            int allow_special, sink *out, k3_error *err) {
    size_t ci = a;
    const uint32_t *off = t->off;
    while (ci < b) {
        size_t at = off[b], len = 0;
        int32_t id = -1;
        if (allow_special)
            find_special(t, base, off[ci], off[b], &at, &len, &id);
        size_t cj = ci;
        while (cj < b && off[cj] < at)
            cj++;
        k3_status st = encode_ordinary(t, base, ci, cj, out, err);
        if (st != K3_OK)
            return st;
        if (id < 0)
            break;
        if (out->starts)
            out->starts[out->n_starts++] = (size_t)(base + at - out->text);
        emit(out, id);
        while (cj < b && off[cj] < at + len)
            cj++;
        ci = cj;
    }
    return K3_OK;
}

static k3_status grow_chars(k3_tokenizer *t, size_t n, k3_error *err) {
    if (n <= t->chars_cap)
        return K3_OK;
    size_t cap = t->chars_cap ? t->chars_cap : 1024;
    while (cap < n)
        cap *= 2;
    if (cap > TOKENIZER_MAX_ENCODE_CHARS)
        cap = TOKENIZER_MAX_ENCODE_CHARS;
    uint32_t *cp = realloc(t->cp, cap * sizeof *cp);
    if (cp)
        t->cp = cp;
    uint8_t *cls = realloc(t->cls, cap);
    if (cls)
        t->cls = cls;
    uint32_t *off = realloc(t->off, (cap + 1) * sizeof *off);
    if (off)
        t->off = off;
    if (!cp || !cls || !off)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu characters", cap);
    t->chars_cap = cap;
    return K3_OK;
}

/* Encodes text[0..len) into out (which counts past its cap). */
static k3_status encode_text(k3_tokenizer *t, const char *text, size_t len, int allow_special, sink *out,
                             k3_error *err) {
    const uint8_t *s = (const uint8_t *)text;
    size_t pos = 0;
    while (pos < len) {
        /* Decode one chunk of at most TOKENIZER_MAX_ENCODE_CHARS characters. */
        const uint8_t *base = s + pos;
        size_t n = 0, b = 0, avail = len - pos;
        while (b < avail && n < TOKENIZER_MAX_ENCODE_CHARS) {
            if (n == t->chars_cap) {
                k3_status st = grow_chars(t, n + 1, err);
                if (st != K3_OK)
                    return st;
            }
            uint32_t cp;
            size_t k = base[b] < 0x80 ? (cp = base[b], 1) : utf8_decode(base + b, avail - b, &cp, NULL);
            if (!k) { /* an invalid byte is a character of its own, with no Unicode class */
                cp = INVALID_CP;
                k = 1;
            }
            t->cp[n] = cp;
            t->cls[n] = cp == INVALID_CP ? 0 : (uint8_t)tokenizer_unicode_class(cp);
            t->off[n] = (uint32_t)b;
            b += k;
            n++;
        }
        t->off[n] = (uint32_t)b;
        /* Cut where a run of spaces or non-spaces would exceed TOKENIZER_MAX_RUN_CHARS
         * (the release's _split_whitespaces_or_nonwhitespaces). */
        size_t cut = 0, run = 0;
        int in_space = n && (t->cls[0] & TOKENIZER_UNICODE_PYSPACE);
        for (size_t i = 0; i < n; i++) {
            int sp = (t->cls[i] & TOKENIZER_UNICODE_PYSPACE) != 0;
            if (sp != in_space) {
                run = 1;
                in_space = sp;
            } else if (++run > TOKENIZER_MAX_RUN_CHARS) {
                k3_status st = encode_cut(t, base, cut, i, allow_special, out, err);
                if (st != K3_OK)
                    return st;
                cut = i;
                run = 1;
            }
        }
        k3_status st = encode_cut(t, base, cut, n, allow_special, out, err);
        if (st != K3_OK)
            return st;
        pos += b;
    }
    return K3_OK;
}

k3_status tokenizer_encode(k3_tokenizer *t, const char *text, size_t len, int allow_special,
                           int32_t *ids, size_t cap, size_t *n_ids, k3_error *err) {
    *n_ids = 0;
    if ((!text && len) || (!ids && cap))
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "tokenize: NULL text or ids");
    sink out = {ids, cap, 0, (const uint8_t *)text, NULL, 0};
    const k3_status st = encode_text(t, text, len, allow_special, &out, err);
    if (st != K3_OK)
        return st;
    *n_ids = out.n;
    if (out.n > cap && (ids || cap))
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "the text needs %zu ids and the buffer holds %zu", out.n, cap);
    return K3_OK;
}

/* The piece starts of text[0..len) into starts (room for len + 1), their count in *n. */
static k3_status piece_starts(k3_tokenizer *t, const char *text, size_t len, size_t *starts, size_t *n,
                              k3_error *err) {
    sink out = {NULL, 0, 0, (const uint8_t *)text, starts, 0};
    const k3_status st = encode_text(t, text, len, 0, &out, err);
    *n = out.n_starts;
    return st;
}

/* Characters of every class the split pattern tells apart, and the endings of its
 * contractions ('s, 're, ...: A2/A3 join them to the word before an apostrophe): appending
 * any of them to a text must leave its pieces up to a healing boundary as they are. */
static const char *const PROBES[] = {"a", "A", "1", " ", "\t", "\n", ".", "_", "'", "\"", "(", "\xe4\xb8\xad",
                                     "s", "t", "m", "d", "re", "ve", "ll", "S", "T", "M", "D", "RE", "VE", "LL"};

k3_status tokenizer_last_piece(k3_tokenizer *t, const char *text, size_t len, size_t *start, k3_error *err) {
    *start = 0;
    if (!text && len)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "last piece: NULL text");
    if (len == 0)
        return K3_OK;
    size_t *a = malloc(sizeof *a * (2 * len + 10)), *b = a ? a + len + 1 : NULL;
    char *probe = malloc(len + 4);
    k3_status st = a && probe ? K3_OK : error_set(err, K3_ERR_OUT_OF_MEMORY, "last piece: out of memory for %zu bytes", len);
    size_t na = 0, nb = 0;
    if (st == K3_OK)
        st = piece_starts(t, text, len, a, &na, err);
    /* The last piece's start, moved back a piece while the text before it, encoded on its
     * own, is cut differently ("\t\t" alone is one piece, two before "}"), or while some
     * next character would cut the text before it differently (a contraction joining
     * "don" + "'" + "t", say). */
    size_t k = na ? na - 1 : 0;
    for (; st == K3_OK && k > 0; k--) {
        st = piece_starts(t, text, a[k], b, &nb, err);
        int stable = st == K3_OK && nb == k && !memcmp(a, b, sizeof *a * k);
        memcpy(probe, text, len);
        for (size_t p = 0; stable && st == K3_OK && p < sizeof PROBES / sizeof *PROBES; p++) {
            const size_t pl = strlen(PROBES[p]);
            memcpy(probe + len, PROBES[p], pl);
            st = piece_starts(t, probe, len + pl, b, &nb, err);
            /* The same starts up to `at`, and `at` among them. */
            stable = nb > k && !memcmp(a, b, sizeof *a * (k + 1));
        }
        if (stable)
            break;
    }
    if (st == K3_OK)
        *start = na ? a[k] : 0;
    free(a);
    free(probe);
    return st;
}

/* ---- decoding ------------------------------------------------------------------------ */

k3_status tokenizer_decode(const k3_tokenizer *t, const int32_t *ids, size_t n_ids, char *out,
                           size_t cap, size_t *n_bytes, k3_error *err) {
    *n_bytes = 0;
    if ((!ids && n_ids) || (!out && cap))
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "detokenize: NULL ids or buffer");
    size_t need = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return error_set(err, K3_ERR_TOKEN, "ids[%zu] = %d is outside the vocabulary (0..%d)",
                             i, ids[i], t->n_vocab - 1);
        size_t n = t->start[ids[i] + 1] - t->start[ids[i]];
        if (need + n <= cap)
            memcpy(out + need, t->bytes + t->start[ids[i]], n);
        need += n;
    }
    *n_bytes = need;
    if (need > cap && (out || cap))
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "the text needs %zu bytes and the buffer holds %zu", need, cap);
    return K3_OK;
}

k3_status tokenizer_decode_stream(const k3_tokenizer *t, k3_detokenize_stream *stream,
                                  int32_t id, char *out, size_t cap, size_t *n_bytes,
                                  k3_error *err) {
    *n_bytes = 0;
    if (!stream || (!out && cap) || stream->n_held > 3)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "detokenize: bad stream or buffer");
    if (id < 0 || id >= t->n_vocab)
        return error_set(err, K3_ERR_TOKEN, "id %d is outside the vocabulary (0..%d)", id,
                         t->n_vocab - 1);
    size_t n = t->start[id + 1] - t->start[id];
    size_t total = stream->n_held + n;
    if (total > cap)
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "the stream needs %zu bytes and the buffer holds %zu", total, cap);
    memcpy(out, stream->held, stream->n_held);
    memcpy(out + stream->n_held, t->bytes + t->start[id], n);
    size_t keep = utf8_incomplete_tail((const unsigned char *)out, total);
    memcpy(stream->held, out + total - keep, keep);
    stream->n_held = (unsigned)keep;
    *n_bytes = total - keep;
    return K3_OK;
}

/* ---- the public API (k3.h) ----------------------------------------------------------- */

k3_status k3_tokenizer_open(const char *dir, k3_tokenizer **out, char *detail,
                            size_t detail_size) {
    k3_error err;
    error_clear(&err);
    if (!out) {
        if (detail && detail_size)
            snprintf(detail, detail_size, "k3_tokenizer_open: NULL out");
        return K3_ERR_INVALID_ARGUMENT;
    }
    k3_status st = tokenizer_open(dir, out, &err);
    if (detail && detail_size)
        snprintf(detail, detail_size, "%s", st == K3_OK ? "" : err.detail);
    return st;
}

void k3_tokenizer_close(k3_tokenizer *tok) {
    tokenizer_close(tok);
}

const char *k3_tokenizer_error(const k3_tokenizer *tok) {
    return tok ? tok->err.detail : "";
}

int32_t k3_tokenizer_vocab_size(const k3_tokenizer *tok) {
    return tokenizer_vocab_size(tok);
}

int32_t k3_tokenizer_special_id(const k3_tokenizer *tok, const char *name) {
    return name ? tokenizer_special_id(tok, name, strlen(name)) : -1;
}

const char *k3_tokenizer_token(const k3_tokenizer *tok, int32_t id, size_t *len) {
    return tokenizer_token(tok, id, len);
}

k3_status k3_tokenizer_last_piece(k3_tokenizer *tok, const char *text, size_t len, size_t *start) {
    error_clear(&tok->err);
    return tokenizer_last_piece(tok, text, len, start, &tok->err);
}

k3_status k3_tokenize(k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                      int32_t *ids, size_t cap, size_t *n_ids) {
    error_clear(&tok->err);
    return tokenizer_encode(tok, text, len, allow_special, ids, cap, n_ids, &tok->err);
}

k3_status k3_detokenize(k3_tokenizer *tok, const int32_t *ids, size_t n_ids, char *out,
                        size_t cap, size_t *n_bytes) {
    error_clear(&tok->err);
    return tokenizer_decode(tok, ids, n_ids, out, cap, n_bytes, &tok->err);
}

k3_status k3_detokenize_stream_next(k3_tokenizer *tok, k3_detokenize_stream *stream, int32_t id,
                                    char *out, size_t cap, size_t *n_bytes) {
    error_clear(&tok->err);
    return tokenizer_decode_stream(tok, stream, id, out, cap, n_bytes, &tok->err);
}

size_t k3_detokenize_stream_end(k3_detokenize_stream *stream, char *out) {
    size_t n = stream->n_held > 3 ? 3 : stream->n_held;
    memcpy(out, stream->held, n);
    stream->n_held = 0;
    return n;
}
