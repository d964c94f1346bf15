/* tokenizer.c - tiktoken byte-level BPE with the K3 split pattern and special tokens (see
 * tokenizer.h). Encoding follows the release's TikTokenTokenizer.encode step by step:
 *
 *   1. cut the text into chunks of 400,000 code points, and each chunk wherever a run of
 *      whitespace or non-whitespace (Python str.isspace) would exceed 25,000 code points;
 *   2. in each cut, find the special tokens (when allowed) and encode the text between
 *      them on its own;
 *   3. split that text with the pattern (match_piece below, a hand-written matcher with the
 *      pattern's leftmost-first, backtracking semantics);
 *   4. a piece that is a token is that token, otherwise BPE merges the adjacent pair of
 *      lowest rank until none is a token (ties: leftmost).
 *
 * Invalid UTF-8 bytes are single "characters" with no Unicode class (like U+FFFD: not a
 * letter, number or space); their byte tokens carry them through, so any bytes round-trip.
 * The pattern, verbatim (test/data/kimi-tokenizer/pat_str.txt), as alternatives A1..A8:
 *
 *   A1 [\p{Han}]+
 *   A2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
 *                        [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   A3 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
 *                        [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   A4 \p{N}{1,3}
 *   A5  ?[^\s\p{L}\p{N}]+[\r\n]*
 *   A6 \s*[\r\n]+
 *   A7 \s+(?!\S)
 *   A8 \s+
 */
#include "tokenizer.h"
#include "hash.h"

#include "json.h"
#include "tokenizer_unicode.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_RANK INT32_MAX /* a byte range that is not a token */
#define DEAD_PART (-2)    /* a BPE part merged into its left neighbour */
#define INVALID_CP 0xFFFFFFFFu
#define HEAP_MIN_DEFAULT 128

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

/* ---- hashing ------------------------------------------------------------------------- */

static int same_token(const k3_tokenizer *t, int32_t id, const uint8_t *p, size_t n) {
    return t->start[id + 1] - t->start[id] == n && !memcmp(t->bytes + t->start[id], p, n);
}

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

/* Inserts rank id unless its bytes are already there; returns the id holding them. */
static int32_t rank_insert(k3_tokenizer *t, int32_t id) {
    const uint8_t *p = (const uint8_t *)t->bytes + t->start[id];
    size_t n = t->start[id + 1] - t->start[id];
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & t->rank_mask;; i = (i + 1) & t->rank_mask) {
        int32_t have = t->rank_slot[i];
        if (have < 0) {
            t->rank_slot[i] = id;
            return id;
        }
        if (same_token(t, have, p, n))
            return have;
    }
}

#define SPECIAL_MASK (sizeof(((k3_tokenizer *)0)->special_slot) / sizeof(int32_t) - 1)

static int32_t special_of(const k3_tokenizer *t, const uint8_t *p, size_t n) {
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & SPECIAL_MASK;; i = (i + 1) & SPECIAL_MASK) {
        int32_t id = t->special_slot[i];
        if (id < 0)
            return -1;
        if (same_token(t, id, p, n))
            return id;
    }
}

static int32_t special_insert(k3_tokenizer *t, int32_t id) {
    const uint8_t *p = (const uint8_t *)t->bytes + t->start[id];
    size_t n = t->start[id + 1] - t->start[id];
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & SPECIAL_MASK;; i = (i + 1) & SPECIAL_MASK) {
        int32_t have = t->special_slot[i];
        if (have < 0) {
            t->special_slot[i] = id;
            return id;
        }
        if (same_token(t, have, p, n))
            return have;
    }
}

/* ---- loading ------------------------------------------------------------------------- */

static k3_status read_file(const char *path, char **out, size_t *len, k3_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, K3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return error_set(err, K3_ERR_IO, "%s: not a readable regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path,
                         size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            free(buf);
            return error_set(err, K3_ERR_IO, "%s: read failed after %zu of %zu bytes%s%s", path,
                             got, size, e ? ": " : "", e ? strerror(e) : "");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = '\0';
    *out = buf;
    *len = size;
    return K3_OK;
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Strict standard base64 (padded, no whitespace) of s[0..n) into out; returns the decoded
 * length, or -1 with a reason in *why. */
static long b64_decode(const char *s, size_t n, uint8_t *out, const char **why) {
    if (n == 0 || n % 4) {
        *why = n ? "its length is not a multiple of 4" : "it is empty";
        return -1;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad) {
                *why = "'=' padding is followed by data";
                return -1;
            }
            v[k] = b64_value(c);
            if (v[k] < 0) {
                *why = "it holds a character outside the base64 alphabet";
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff))) {
            *why = "its last character has bits set beyond the data";
            return -1;
        }
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)w;
    }
    return (long)o;
}

/* Parses tiktoken.model: one "<base64 of the token bytes> <rank>" per line, ranks 0, 1, 2,
 * ... in order with none missing, no two tokens with the same bytes. */
static k3_status load_ranks(k3_tokenizer *t, const char *path, const char *text, size_t len,
                            size_t *bytes_used, k3_error *err) {
    size_t n_lines = 0;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + len - p))); p++)
        n_lines++;
    n_lines++; /* a last line without a newline */
    if (n_lines > INT32_MAX - TOKENIZER_N_SPECIAL - 1)
        return error_set(err, K3_ERR_TOKENIZER, "%s: %zu lines is more ranks than ids can hold",
                         path, n_lines);
    size_t n_slots = 1024;
    while (n_slots < 2 * n_lines)
        n_slots *= 2;
    /* Rank bytes decode to at most 3/4 of the file; special names come from the config. */
    t->bytes = malloc(len + (size_t)TOKENIZER_N_SPECIAL * K3_TOKEN_MAX_BYTES + 1);
    t->start = malloc((n_lines + TOKENIZER_N_SPECIAL + 1) * sizeof *t->start);
    t->rank_slot = malloc(n_slots * sizeof *t->rank_slot);
    if (!t->bytes || !t->start || !t->rank_slot)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu ranks", path, n_lines);
    memset(t->rank_slot, 0xff, n_slots * sizeof *t->rank_slot);
    t->rank_mask = (uint32_t)(n_slots - 1);
    for (int b = 0; b < 256; b++)
        t->byte_rank[b] = NO_RANK;

    const char *end = text + len;
    size_t used = 0, line = 0;
    int32_t rank = 0;
    t->start[0] = 0;
    for (const char *p = text; p < end; rank++) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *hint = nl ? "" : " (the file does not end with a newline: is it truncated?)";
        const char *q = eol;
        if (q > p && q[-1] == '\r')
            q--;
        if (q == p)
            return error_set(err, K3_ERR_TOKENIZER, "%s:%zu: empty line where rank %d was expected%s",
                             path, line, rank, hint);
        const char *sp = memchr(p, ' ', (size_t)(q - p));
        if (!sp)
            return error_set(err, K3_ERR_TOKENIZER,
                             "%s:%zu: no rank after the token (expected '<base64> <rank>')%s",
                             path, line, hint);
        const char *why = "";
        long n = b64_decode(p, (size_t)(sp - p), (uint8_t *)t->bytes + used, &why);
        if (n < 0)
            return error_set(err, K3_ERR_TOKENIZER, "%s:%zu: the token '%.*s' is not base64: %s%s",
                             path, line, (int)(sp - p < 64 ? sp - p : 64), p, why, hint);
        if (n > K3_TOKEN_MAX_BYTES)
            return error_set(err, K3_ERR_TOKENIZER, "%s:%zu: a token of %ld bytes (at most %d)",
                             path, line, n, K3_TOKEN_MAX_BYTES);
        int64_t r = 0;
        const char *d = sp + 1;
        if (d == q)
            return error_set(err, K3_ERR_TOKENIZER, "%s:%zu: no rank after the token%s", path,
                             line, hint);
        for (; d < q; d++) {
            if (*d < '0' || *d > '9' || r > INT32_MAX)
                return error_set(err, K3_ERR_TOKENIZER,
                                 "%s:%zu: the rank '%.*s' is not a non-negative decimal integer%s",
                                 path, line, (int)(q - sp - 1 < 32 ? q - sp - 1 : 32), sp + 1, hint);
            r = r * 10 + (*d - '0');
        }
        if (r < rank)
            return error_set(err, K3_ERR_TOKENIZER,
                             "%s:%zu: rank %lld appears twice (first on line %lld)%s", path, line,
                             (long long)r, (long long)r + 1, hint);
        if (r > rank)
            return error_set(err, K3_ERR_TOKENIZER,
                             "%s:%zu: rank %lld where rank %d was expected (ranks must run 0, 1, "
                             "2, ... in order with none missing)%s",
                             path, line, (long long)r, rank, hint);
        used += (size_t)n;
        t->start[rank + 1] = (uint32_t)used;
        int32_t have = rank_insert(t, rank);
        if (have != rank)
            return error_set(err, K3_ERR_TOKENIZER,
                             "%s:%zu: rank %d has the same bytes as rank %d (line %d)%s", path,
                             line, rank, have, have + 1, hint);
        if (n == 1)
            t->byte_rank[(uint8_t)t->bytes[t->start[rank]]] = rank;
        if ((size_t)n > t->max_rank_len)
            t->max_rank_len = (size_t)n;
        p = nl ? nl + 1 : end;
    }
    if (rank == 0)
        return error_set(err, K3_ERR_TOKENIZER, "%s: no ranks (the file is empty)", path);
    for (int b = 0; b < 256; b++)
        if (t->byte_rank[b] == NO_RANK)
            return error_set(err, K3_ERR_TOKENIZER,
                             "%s: byte 0x%02x has no rank; byte-level BPE needs all 256 single "
                             "bytes (%d ranks read: is the file truncated?)",
                             path, b, rank);
    t->n_ranks = rank;
    t->n_vocab = rank + TOKENIZER_N_SPECIAL;
    *bytes_used = used;
    return K3_OK;
}

/* Reads the special-token names of tokenizer_config.json's added_tokens_decoder into the
 * slots after the ranks; a slot it does not name is <|reserved_token_{id}|>, as the
 * release's tokenization_kimi.py spells it. */
static k3_status load_specials(k3_tokenizer *t, const char *path, size_t used, k3_error *err) {
    json_doc *doc;
    k3_status st = json_parse_file(path, &doc, err);
    if (st != K3_OK)
        return st;
    const char *names[TOKENIZER_N_SPECIAL] = {0};
    size_t lens[TOKENIZER_N_SPECIAL] = {0};
    const json_value *dec = json_get(json_root(doc), "added_tokens_decoder");
    if (json_type(dec) != JSON_OBJECT) {
        st = error_set(err, K3_ERR_TOKENIZER,
                       "%s: \"added_tokens_decoder\" is %s, expected an object of special tokens",
                       path, json_type_name(json_type(dec)));
        goto done;
    }
    for (size_t i = 0; i < json_len(dec); i++) {
        const json_value *v = json_at(dec, i);
        const char *key = json_key(v, NULL);
        char *kend;
        errno = 0;
        long long id = strtoll(key, &kend, 10);
        if (!*key || *kend || key[0] == '-' || key[0] == '+' || errno) {
            st = error_set(err, K3_ERR_TOKENIZER,
                           "%s: added_tokens_decoder key \"%.64s\" is not a token id", path, key);
            goto done;
        }
        if (id < t->n_ranks || id >= t->n_vocab) {
            st = error_set(err, K3_ERR_TOKENIZER,
                           "%s: added_tokens_decoder id %lld is outside the %d special slots after "
                           "the %d ranks of tiktoken.model (%d..%d): the two files do not belong "
                           "together, or tiktoken.model is truncated",
                           path, id, TOKENIZER_N_SPECIAL, t->n_ranks, t->n_ranks, t->n_vocab - 1);
            goto done;
        }
        size_t n;
        const char *s = json_string(json_get(v, "content"), &n);
        if (!s || n == 0 || n > K3_TOKEN_MAX_BYTES) {
            st = error_set(err, K3_ERR_TOKENIZER,
                           "%s: added_tokens_decoder[\"%s\"].content must be a string of 1 to %d "
                           "bytes",
                           path, key, K3_TOKEN_MAX_BYTES);
            goto done;
        }
        names[id - t->n_ranks] = s;
        lens[id - t->n_ranks] = n;
    }
    memset(t->special_slot, 0xff, sizeof t->special_slot);
    for (int k = 0; k < TOKENIZER_N_SPECIAL; k++) {
        int32_t id = t->n_ranks + k;
        char *dst = t->bytes + used;
        size_t n = lens[k];
        if (names[k])
            memcpy(dst, names[k], n);
        else
            n = (size_t)snprintf(dst, K3_TOKEN_MAX_BYTES, "<|reserved_token_%d|>", id);
        used += n;
        t->start[id + 1] = (uint32_t)used;
        int32_t have = special_insert(t, id);
        if (have != id) {
            st = error_set(err, K3_ERR_TOKENIZER, "%s: special tokens %d and %d are both named \"%.*s\"",
                           path, have, id, (int)n, dst);
            goto done;
        }
        uint8_t first = (uint8_t)dst[0];
        t->special_first[first >> 3] |= (uint8_t)(1u << (first & 7));
        size_t j = 0;
        while (j < t->n_special_len && t->special_len[j] > n)
            j++;
        if (j == t->n_special_len || t->special_len[j] != n) {
            memmove(t->special_len + j + 1, t->special_len + j,
                    (t->n_special_len - j) * sizeof *t->special_len);
            t->special_len[j] = n;
            t->n_special_len++;
        }
    }
done:
    json_free(doc);
    return st;
}

k3_status tokenizer_open(const char *dir, k3_tokenizer **out, k3_error *err) {
    *out = NULL;
    if (!dir)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "tokenizer: no directory given");
    size_t dlen = strlen(dir);
    char *model = malloc(dlen + 32), *config = malloc(dlen + 32);
    k3_tokenizer *t = calloc(1, sizeof *t);
    char *text = NULL;
    size_t len = 0, used = 0;
    k3_status st;
    if (!model || !config || !t) {
        st = error_set(err, K3_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto fail;
    }
    snprintf(model, dlen + 32, "%s/tiktoken.model", dir);
    snprintf(config, dlen + 32, "%s/tokenizer_config.json", dir);
    t->heap_min = HEAP_MIN_DEFAULT;
    if ((st = read_file(model, &text, &len, err)) != K3_OK)
        goto fail;
    if ((st = load_ranks(t, model, text, len, &used, err)) != K3_OK)
        goto fail;
    if ((st = load_specials(t, config, used, err)) != K3_OK)
        goto fail;
    free(text);
    free(model);
    free(config);
    *out = t;
    return K3_OK;
fail:
    free(text);
    free(model);
    free(config);
    tokenizer_close(t);
    return st;
}

void tokenizer_close(k3_tokenizer *t) {
    if (!t)
        return;
    free(t->bytes);
    free(t->start);
    free(t->rank_slot);
    free(t->cp);
    free(t->cls);
    free(t->off);
    free(t->bpe);
    free(t);
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

/* ---- encoding: output, characters (utf8.h), the split pattern ------------------------ */

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

#define U_LETTER (TOKENIZER_UNICODE_LU | TOKENIZER_UNICODE_LL | TOKENIZER_UNICODE_LO)
#define U_HAN TOKENIZER_UNICODE_HAN
#define U_NUM TOKENIZER_UNICODE_N
#define U_SPACE TOKENIZER_UNICODE_SPACE

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] */
static inline int is_upper(unsigned c) {
    return (c & (TOKENIZER_UNICODE_LU | TOKENIZER_UNICODE_LO | TOKENIZER_UNICODE_M)) && !(c & U_HAN);
}
/* [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] */
static inline int is_lower(unsigned c) {
    return (c & (TOKENIZER_UNICODE_LL | TOKENIZER_UNICODE_LO | TOKENIZER_UNICODE_M)) && !(c & U_HAN);
}
static inline int is_crlf(uint32_t cp) {
    return cp == '\r' || cp == '\n';
}
/* [^\s\p{L}\p{N}] */
static inline int is_punct(unsigned c) {
    return !(c & (U_LETTER | U_NUM | U_SPACE));
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at e: the end of the optional contraction. */
static size_t contraction(const uint32_t *cp, size_t e, size_t end) {
    if (e + 1 >= end || cp[e] != '\'')
        return e;
    uint32_t a = tokenizer_unicode_fold_ascii(cp[e + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return e + 2;
    if (e + 2 < end && (a == 'r' || a == 'v' || a == 'l')) {
        uint32_t b = tokenizer_unicode_fold_ascii(cp[e + 2]);
        if ((a == 'l' && b == 'l') || (a != 'l' && b == 'e'))
            return e + 3;
    }
    return e;
}

/* A2 after its optional first character, at q: upper* lower+ contraction?. The greedy
 * upper* gives back characters until a lower can follow, so lower+ starts at the run's end
 * if that is a lower, else at the last lower inside the run (Lm, Lo and M are both). */
static size_t word_lower(const uint32_t *cp, const uint8_t *cls, size_t q, size_t end) {
    size_t j = q;
    while (j < end && is_upper(cls[j]))
        j++;
    size_t s = j;
    if (!(j < end && is_lower(cls[j]))) {
        while (s > q && !is_lower(cls[s - 1]))
            s--;
        if (s == q)
            return 0;
        s--;
    }
    size_t e = s + 1;
    while (e < end && is_lower(cls[e]))
        e++;
    return contraction(cp, e, end);
}

/* A3 after its optional first character, at q: upper+ lower* contraction?. */
static size_t word_upper(const uint32_t *cp, const uint8_t *cls, size_t q, size_t end) {
    if (q >= end || !is_upper(cls[q]))
        return 0;
    size_t e = q + 1;
    while (e < end && is_upper(cls[e]))
        e++;
    while (e < end && is_lower(cls[e]))
        e++;
    return contraction(cp, e, end);
}

/* The end of the piece the pattern matches at character p of cp/cls[..end) (p < end):
 * the first alternative that matches, as a backtracking engine finds it. Every character
 * starts some alternative, so pieces tile the text. */
static size_t match_piece(const uint32_t *cp, const uint8_t *cls, size_t p, size_t end) {
    unsigned c = cls[p];
    size_t q;
    if (c & U_HAN) { /* A1 */
        for (q = p + 1; q < end && (cls[q] & U_HAN); q++) {
        }
        return q;
    }
    /* A2 then A3, each first with [^\r\n\p{L}\p{N}] taken and then without. Marks belong to
     * that class and to the letter classes, so both tries matter. */
    int first = !(c & (U_LETTER | U_NUM)) && !is_crlf(cp[p]);
    if (first && (q = word_lower(cp, cls, p + 1, end)))
        return q;
    if ((q = word_lower(cp, cls, p, end)))
        return q;
    if (first && (q = word_upper(cp, cls, p + 1, end)))
        return q;
    if ((q = word_upper(cp, cls, p, end)))
        return q;
    if (c & U_NUM) { /* A4 */
        for (q = p + 1; q < end && q < p + 3 && (cls[q] & U_NUM); q++) {
        }
        return q;
    }
    /* A5 */
    q = cp[p] == ' ' && p + 1 < end && is_punct(cls[p + 1]) ? p + 1 : p;
    if (is_punct(cls[q])) {
        for (q++; q < end && is_punct(cls[q]); q++) {
        }
        while (q < end && is_crlf(cp[q]))
            q++;
        return q;
    }
    if (c & U_SPACE) {
        size_t w = p + 1;
        while (w < end && (cls[w] & U_SPACE))
            w++;
        /* A6: \s* gives back characters until the last CR or LF of the run. */
        for (q = w; q > p && !is_crlf(cp[q - 1]); q--) {
        }
        if (q > p)
            return q;
        /* A7: all of the run at the end of the text, else all but its last character. */
        if (w == end)
            return w;
        if (w - p >= 2)
            return w - 1;
        return w; /* A8 */
    }
    return p + 1; /* unreachable: every class is covered above */
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
        size_t q = match_piece(t->cp, t->cls, p, b);
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
