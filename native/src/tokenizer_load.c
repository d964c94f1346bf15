/* tokenizer_load.c - reading a tokenizer from disk into the tables of tokenizer_internal.h:
 * tiktoken.model (base64 token bytes and their ranks, checked line by line) and the special
 * tokens of tokenizer_config.json, then the two hash tables over them; and freeing it all.
 * It is separate from tokenizer.c because checking files and naming what is wrong in them
 * is a different job from encoding text; it never encodes or decodes. */
#include "tokenizer_internal.h"
#include "hash.h"

#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
