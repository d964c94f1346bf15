/* json.c - the strict JSON parser behind json.h. One recursive-descent pass over the text.
 *
 * Memory: before parsing, one scan bounds the number of values (every value but the root
 * follows its own '[', ',' or ':', so values <= 1 + count of those bytes) and the string
 * bytes (a decoded string plus its terminator is never longer than its quoted source), and
 * the document is allocated once at that size. Values under construction sit on a stack
 * that grows down from the end of the value area; when a container closes, its children
 * leave the stack and are moved, contiguous and in order, to the front of the area, so
 * json_at() is an index. A value is either on the stack or at the front, never both,
 * which is why the two regions cannot collide.
 *
 * Not here: writing JSON, incremental input, comments or any other extension. */
#include "json.h"

#include "hash.h"
#include "utf8.h"
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct json_value {
    const char *key; /* object member: its decoded key; NULL elsewhere */
    union {
        double d;                 /* a number that is not `integral` */
        int64_t i;                /* a number that is `integral` */
        const char *str;          /* NUL-terminated, `len` bytes */
        const json_value *items;  /* array elements or object members, `len` of them */
        bool b;
    } u;
    uint32_t len;
    uint32_t key_len;
    uint8_t kind;     /* json_kind */
    uint8_t integral; /* a number with an exact int64 value, held in u.i */
};

struct json_doc {
    const json_value *root;
    /* the value area and the string pool follow in the same allocation */
};

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "json.c scans 8 bytes at a time and assumes a little-endian machine"
#endif

/* Integers up to 2^53 are exact in a double. */
#define JSON_EXACT_DOUBLE_INT 9007199254740992.0

/* ---- allocation (with the test hook) ------------------------------------------------ */

static long fault_countdown;

void json_fault_alloc(long n) {
    fault_countdown = n;
}

static void *json_malloc(size_t size) {
    if (fault_countdown > 0 && --fault_countdown == 0)
        return NULL;
    return malloc(size ? size : 1);
}

/* ---- parser state and errors ---------------------------------------------------------- */

typedef struct parser {
    const unsigned char *s;
    size_t n;
    size_t pos;
    json_value *vals; /* value area: final values at [0, done), the stack at [top, cap) */
    size_t cap;
    size_t done;
    size_t top;
    char *pool; /* decoded strings */
    size_t pool_used;
    int depth;
    uint64_t *dup; /* scratch hash table for the duplicate-key check */
    size_t dup_cap;
    const char *name;
    k3_error *err;
} parser;

/* Describes the byte at pos for "found ..." in messages. */
static void describe(const parser *p, size_t pos, char *buf, size_t size) {
    if (pos >= p->n)
        snprintf(buf, size, "end of input");
    else if (p->s[pos] >= 0x20 && p->s[pos] < 0x7f)
        snprintf(buf, size, "'%c'", p->s[pos]);
    else
        snprintf(buf, size, "byte 0x%02x", p->s[pos]);
}

/* Records a K3_ERR_FORMAT detail "name: line L, column C (byte B): message". */
__attribute__((format(printf, 3, 4))) static k3_status fail_at(parser *p, size_t pos,
                                                              const char *fmt, ...) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < p->n; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else if ((p->s[i] & 0xc0) != 0x80) {
            col++;
        }
    }
    char msg[K3_ERROR_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(p->err, K3_ERR_FORMAT, "%s%sline %zu, column %zu (byte %zu): %s",
                     p->name ? p->name : "", p->name ? ": " : "", line, col, pos, msg);
}

static k3_status fail_expected(parser *p, const char *what) {
    char found[32];
    describe(p, p->pos, found, sizeof found);
    return fail_at(p, p->pos, "expected %s, found %s", what, found);
}

/* ---- the value stack -------------------------------------------------------------------- */

static k3_status push(parser *p, const json_value *v) {
    if (p->top <= p->done) /* impossible if the pre-scan bound holds */
        return error_set(p->err, K3_ERR_INTERNAL, "json: value area bound exceeded");
    p->vals[--p->top] = *v;
    return K3_OK;
}

/* Moves the newest `count` stack values (pushed in document order) to the front, in
 * document order, and returns where they start. */
static const json_value *collect(parser *p, size_t count) {
    if (count == 0)
        return NULL;
    json_value *block = p->vals + p->top;
    for (size_t a = 0, b = count - 1; a < b; a++, b--) {
        json_value t = block[a];
        block[a] = block[b];
        block[b] = t;
    }
    json_value *dst = p->vals + p->done;
    memmove(dst, block, count * sizeof *dst);
    p->done += count;
    p->top += count;
    return dst;
}

/* ---- scanning 8 bytes at a time ----------------------------------------------------------
 * The masks flag bytes by their high bit. A borrow can also flag a byte above (later than)
 * a truly flagged one, never below it and never miss one: so the lowest flag is exact and
 * a popcount is an upper bound, which is all the callers use. */

#define ONES 0x0101010101010101u
#define HIGHS 0x8080808080808080u

static inline uint64_t bytes_equal(uint64_t w, unsigned char c) {
    uint64_t x = w ^ (ONES * c);
    return (x - ONES) & ~x & HIGHS;
}

/* Bytes that end the plain-ASCII run of a string: '"', '\\', < 0x20, >= 0x80. */
static inline uint64_t string_stops(uint64_t w) {
    return bytes_equal(w, '"') | bytes_equal(w, '\\') | ((w - ONES * 0x20) & ~w & HIGHS) | (w & HIGHS);
}

/* ---- whitespace, literals -------------------------------------------------------------------- */

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            break;
        p->pos++;
    }
}

static k3_status parse_literal(parser *p, const char *word, json_kind kind, bool b) {
    size_t len = strlen(word);
    if (p->n - p->pos < len || memcmp(p->s + p->pos, word, len) != 0) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", word);
        return fail_expected(p, want);
    }
    p->pos += len;
    json_value v = {0};
    v.kind = (uint8_t)kind;
    v.u.b = b;
    return push(p, &v);
}

/* ---- strings -------------------------------------------------------------------- */

/* 1 for bytes that end the plain-ASCII fast path inside a string. */
static const unsigned char string_special[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1,
    [0x80] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

static int hex4(const unsigned char *s, size_t avail, unsigned *out) {
    if (avail < 4)
        return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* Decodes the string starting at the '"' under p->pos into the pool. */
static k3_status parse_string(parser *p, const char **out, uint32_t *out_len) {
    const unsigned char *s = p->s;
    const size_t n = p->n, start = p->pos;
    size_t i = start + 1;
    char *const begin = p->pool + p->pool_used;
    char *d = begin;
    for (;;) {
        /* d - pool <= i - 1 (decoded text never outruns its source), so an 8-byte store
         * at d stays inside the pool, which is n + 1 bytes, whenever i + 8 <= n */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            memcpy(d, &w, 8);
            uint64_t stops = string_stops(w);
            if (stops) {
                size_t k = (size_t)__builtin_ctzll(stops) / 8;
                d += k;
                i += k;
                break;
            }
            d += 8;
            i += 8;
        }
        while (i < n && !string_special[s[i]])
            *d++ = (char)s[i++];
        if (i >= n)
            return fail_at(p, start, "unterminated string");
        unsigned char c = s[i];
        if (c == '"') {
            i++;
            break;
        }
        if (c < 0x20)
            return fail_at(p, i, "control character 0x%02x in a string must be escaped", c);
        if (c >= 0x80) {
            size_t len = utf8_decode(s + i, n - i, NULL, NULL);
            if (len == 0)
                return fail_at(p, i, "invalid UTF-8 byte 0x%02x in a string", c);
            memcpy(d, s + i, len);
            d += len;
            i += len;
            continue;
        }
        /* a backslash escape */
        if (i + 1 >= n)
            return fail_at(p, start, "unterminated string");
        unsigned char e = s[i + 1];
        switch (e) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '/': *d++ = '/'; break;
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!hex4(s + i + 2, n - i - 2, &cp))
                return fail_at(p, i, "expected four hex digits after \\u");
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return fail_at(p, i, "lone low surrogate \\u%04x in a string", cp);
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (n - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' ||
                    !hex4(s + i + 8, n - i - 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return fail_at(p, i,
                                   "high surrogate \\u%04x is not followed by a low surrogate "
                                   "\\uDC00..\\uDFFF", cp);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            d = utf8_encode(d, cp);
            i += 4;
            break;
        }
        default:
            return fail_at(p, i, "invalid escape '\\%c' in a string",
                           e >= 0x20 && e < 0x7f ? e : '?');
        }
        i += 2;
    }
    size_t len = (size_t)(d - begin);
    *d = '\0';
    p->pool_used += len + 1;
    p->pos = i;
    *out = begin;
    *out_len = (uint32_t)len; /* the input is < 4 GiB, so is every string */
    return K3_OK;
}

/* ---- numbers ---------------------------------------------------------------------------- */

static bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

/* strtod in the C locale's syntax whatever the process locale is: the token's '.' is
 * replaced by the current decimal point before conversion. */
static k3_status token_to_double(parser *p, size_t start, size_t len, double *out) {
    const char *dp = localeconv()->decimal_point;
    size_t dpl = dp && dp[0] ? strlen(dp) : 1;
    char small[80];
    size_t need = len + dpl + 1;
    char *buf = need <= sizeof small ? small : json_malloc(need);
    if (!buf)
        return error_set(p->err, K3_ERR_OUT_OF_MEMORY, "json: out of memory for a number");
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        char c = (char)p->s[start + i];
        if (c == '.' && dp && dp[0]) {
            memcpy(buf + k, dp, dpl);
            k += dpl;
        } else {
            buf[k++] = c;
        }
    }
    buf[k] = '\0';
    *out = strtod(buf, NULL);
    if (buf != small)
        free(buf);
    return K3_OK;
}

static k3_status parse_number(parser *p) {
    const unsigned char *s = p->s;
    const size_t n = p->n, start = p->pos;
    size_t i = start;
    bool neg = false, frac = false, expo = false;
    if (s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= n || !is_digit(s[i])) {
        p->pos = i;
        return fail_expected(p, "a digit after '-'");
    }
    const size_t digits = i;
    if (s[i] == '0') {
        i++;
        if (i < n && is_digit(s[i]))
            return fail_at(p, start, "a number must not have a leading zero");
    } else {
        while (i < n && is_digit(s[i]))
            i++;
    }
    const size_t digits_end = i;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !is_digit(s[i])) {
            p->pos = i;
            return fail_expected(p, "a digit after the decimal point");
        }
        while (i < n && is_digit(s[i]))
            i++;
        frac = true;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit(s[i])) {
            p->pos = i;
            return fail_expected(p, "a digit in the exponent");
        }
        while (i < n && is_digit(s[i]))
            i++;
        expo = true;
    }

    json_value v = {0};
    v.kind = JSON_NUMBER;
    uint64_t mag = 0;
    bool fits = !frac && !expo && digits_end - digits <= 19;
    if (fits) {
        const uint64_t limit = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
        for (size_t k = digits; k < digits_end && fits; k++) {
            uint64_t dgt = (uint64_t)(s[k] - '0');
            if (mag > (limit - dgt) / 10)
                fits = false;
            else
                mag = mag * 10 + dgt;
        }
    }
    if (fits) {
        v.integral = 1;
        /* -(mag - 1) - 1 reaches INT64_MIN without overflowing */
        v.u.i = !neg ? (int64_t)mag : mag == 0 ? 0 : -(int64_t)(mag - 1) - 1;
    } else {
        double d = 0;
        k3_status st = token_to_double(p, start, i - start, &d);
        if (st != K3_OK)
            return st;
        if (!isfinite(d))
            return fail_at(p, start, "number %.*s is out of the range of a double",
                           (int)(i - start > 40 ? 40 : i - start), (const char *)s + start);
        if (d == floor(d) && fabs(d) <= JSON_EXACT_DOUBLE_INT) {
            v.integral = 1;
            v.u.i = (int64_t)d;
        } else {
            v.u.d = d;
        }
    }
    p->pos = i;
    return push(p, &v);
}

/* ---- containers -------------------------------------------------------------------------- */

static bool same_key(const json_value *a, const json_value *b) {
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* Fails if two members of the object at `open` (its '{') share a key. */
static k3_status check_duplicate_keys(parser *p, const json_value *m, size_t count, size_t open) {
    const json_value *dup = NULL;
    if (count <= 16) {
        for (size_t a = 1; a < count && !dup; a++)
            for (size_t b = 0; b < a; b++)
                if (same_key(&m[a], &m[b])) {
                    dup = &m[a];
                    break;
                }
    } else {
        size_t cap = 32;
        while (cap < 2 * count)
            cap *= 2;
        if (cap > p->dup_cap) {
            free(p->dup);
            p->dup = json_malloc(cap * sizeof *p->dup);
            p->dup_cap = p->dup ? cap : 0;
            if (!p->dup)
                return error_set(p->err, K3_ERR_OUT_OF_MEMORY,
                                 "json: out of memory checking %zu object keys", count);
        }
        memset(p->dup, 0, cap * sizeof *p->dup);
        /* a slot holds the high half of the key's hash and the member index + 1, so
         * keys are compared only when their hashes agree */
        for (size_t a = 0; a < count && !dup; a++) {
            const uint64_t h = hash_bytes(m[a].key, m[a].key_len);
            const uint64_t tag = h & 0xffffffff00000000u;
            size_t slot = (size_t)h & (cap - 1);
            while (p->dup[slot]) {
                const uint64_t e = p->dup[slot];
                if ((e & 0xffffffff00000000u) == tag && same_key(&m[a], &m[(uint32_t)e - 1])) {
                    dup = &m[a];
                    break;
                }
                slot = (slot + 1) & (cap - 1);
            }
            p->dup[slot] = tag | (uint64_t)(a + 1);
        }
    }
    if (dup)
        return fail_at(p, open, "duplicate key '%.200s' in the object that starts here", dup->key);
    return K3_OK;
}

static k3_status parse_value(parser *p);

static k3_status enter(parser *p) {
    if (++p->depth > JSON_MAX_DEPTH)
        return fail_at(p, p->pos, "arrays and objects nested deeper than %d", JSON_MAX_DEPTH);
    return K3_OK;
}

static k3_status parse_array(parser *p) {
    k3_status st = enter(p);
    if (st != K3_OK)
        return st;
    p->pos++;
    size_t count = 0;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            if ((st = parse_value(p)) != K3_OK)
                return st;
            count++;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                skip_ws(p);
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == ']') {
                p->pos++;
                break;
            }
            return fail_expected(p, "',' or ']' after an array element");
        }
    }
    p->depth--;
    json_value v = {0};
    v.kind = JSON_ARRAY;
    v.len = (uint32_t)count;
    v.u.items = collect(p, count);
    return push(p, &v);
}

static k3_status parse_object(parser *p) {
    k3_status st = enter(p);
    if (st != K3_OK)
        return st;
    const size_t open = p->pos;
    p->pos++;
    size_t count = 0;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return fail_expected(p, count ? "a string key after ','" : "a string key or '}'");
            const char *key;
            uint32_t key_len;
            if ((st = parse_string(p, &key, &key_len)) != K3_OK)
                return st;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return fail_expected(p, "':' after an object key");
            p->pos++;
            skip_ws(p);
            if ((st = parse_value(p)) != K3_OK)
                return st;
            p->vals[p->top].key = key;
            p->vals[p->top].key_len = key_len;
            count++;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                skip_ws(p);
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == '}') {
                p->pos++;
                break;
            }
            return fail_expected(p, "',' or '}' after an object member");
        }
    }
    p->depth--;
    json_value v = {0};
    v.kind = JSON_OBJECT;
    v.len = (uint32_t)count;
    v.u.items = collect(p, count);
    if ((st = check_duplicate_keys(p, v.u.items, count, open)) != K3_OK)
        return st;
    return push(p, &v);
}

static k3_status parse_value(parser *p) {
    if (p->pos >= p->n)
        return fail_expected(p, "a value");
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_object(p);
    case '[': return parse_array(p);
    case 't': return parse_literal(p, "true", JSON_BOOL, true);
    case 'f': return parse_literal(p, "false", JSON_BOOL, false);
    case 'n': return parse_literal(p, "null", JSON_NULL, false);
    case '"': {
        json_value v = {0};
        v.kind = JSON_STRING;
        k3_status st = parse_string(p, &v.u.str, &v.len);
        return st != K3_OK ? st : push(p, &v);
    }
    default:
        if (c == '-' || is_digit(c))
            return parse_number(p);
        return fail_expected(p, "a value (object, array, string, number, true, false or null)");
    }
}

/* ---- documents -------------------------------------------------------------------------- */

/* An upper bound on the number of values: see the top comment. */
static size_t count_value_bound(const unsigned char *s, size_t n) {
    size_t count = 1, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        count += (size_t)__builtin_popcountll(bytes_equal(w, ',') | bytes_equal(w, ':') |
                                              bytes_equal(w, '['));
    }
    for (; i < n; i++)
        count += (s[i] == ',') | (s[i] == ':') | (s[i] == '[');
    return count;
}

k3_status json_parse(const char *text, size_t len, const char *name, json_doc **out,
                     k3_error *err) {
    *out = NULL;
    if (!text && len)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "json_parse: NULL text");
    if (len >= UINT32_MAX)
        return error_set(err, K3_ERR_FORMAT, "%s%sdocument of %zu bytes is larger than 4 GiB",
                         name ? name : "", name ? ": " : "", len);
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    const size_t cap = count_value_bound(s, len);
    const size_t head = (sizeof(json_doc) + sizeof(json_value) - 1) / sizeof(json_value);
    json_value *area = json_malloc((head + cap) * sizeof(json_value) + len + 1);
    if (!area)
        return error_set(err, K3_ERR_OUT_OF_MEMORY,
                         "%s%sout of memory for a document of %zu bytes (%zu values at most)",
                         name ? name : "", name ? ": " : "", len, cap);
    json_doc *doc = (json_doc *)(void *)area;
    parser p = {
        .s = s,
        .n = len,
        .vals = area + head,
        .cap = cap,
        .top = cap,
        .pool = (char *)(area + head + cap),
        .name = name,
        .err = err,
    };
    if (len >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)
        p.pos = 3;
    skip_ws(&p);
    k3_status st = parse_value(&p);
    if (st == K3_OK) {
        skip_ws(&p);
        if (p.pos != p.n)
            st = fail_expected(&p, "end of input after the JSON value");
    }
    free(p.dup);
    if (st != K3_OK) {
        free(area);
        return st;
    }
    doc->root = collect(&p, 1);
    *out = doc;
    return K3_OK;
}

k3_status json_parse_file(const char *path, json_doc **out, k3_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, K3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return error_set(err, K3_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return error_set(err, K3_ERR_IO, "%s: not a regular file", path);
    }
    /* The text is mapped, not read: nothing is copied, and the document keeps no pointer
     * into it, so it is unmapped as soon as parsing ends. */
    size_t size = (size_t)sb.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return error_set(err, K3_ERR_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
    if (map)
        posix_madvise(map, size, POSIX_MADV_SEQUENTIAL);
    k3_status st = json_parse(map ? map : "", size, path, out, err);
    if (map)
        munmap(map, size);
    return st;
}

void json_free(json_doc *doc) {
    free(doc);
}

/* ---- accessors -------------------------------------------------------------------------- */

const json_value *json_root(const json_doc *doc) {
    return doc ? doc->root : NULL;
}

json_kind json_type(const json_value *v) {
    return v ? (json_kind)v->kind : JSON_NONE;
}

const char *json_type_name(json_kind kind) {
    switch (kind) {
    case JSON_NONE: return "missing";
    case JSON_NULL: return "null";
    case JSON_BOOL: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "unknown";
}

size_t json_len(const json_value *v) {
    if (!v || (v->kind != JSON_ARRAY && v->kind != JSON_OBJECT && v->kind != JSON_STRING))
        return 0;
    return v->len;
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->kind != JSON_OBJECT || !key)
        return NULL;
    size_t len = strlen(key);
    for (uint32_t i = 0; i < obj->len; i++) {
        const json_value *m = &obj->u.items[i];
        if (m->key_len == len && memcmp(m->key, key, len) == 0)
            return m;
    }
    return NULL;
}

const json_value *json_at(const json_value *v, size_t i) {
    if (!v || (v->kind != JSON_ARRAY && v->kind != JSON_OBJECT) || i >= v->len)
        return NULL;
    return &v->u.items[i];
}

const char *json_key(const json_value *member, size_t *len) {
    if (!member || !member->key)
        return NULL;
    if (len)
        *len = member->key_len;
    return member->key;
}

const char *json_string(const json_value *v, size_t *len) {
    if (!v || v->kind != JSON_STRING)
        return NULL;
    if (len)
        *len = v->len;
    return v->u.str;
}

bool json_string_is(const json_value *v, const char *s) {
    return v && v->kind == JSON_STRING && strlen(s) == v->len && memcmp(v->u.str, s, v->len) == 0;
}

bool json_number(const json_value *v, double *out) {
    if (!v || v->kind != JSON_NUMBER)
        return false;
    /* int64 -> double rounds to nearest, as strtod would have */
    *out = v->integral ? (double)v->u.i : v->u.d;
    return true;
}

bool json_is_integral(const json_value *v) {
    return v && v->kind == JSON_NUMBER && v->integral;
}

bool json_int(const json_value *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!json_is_integral(v) || v->u.i < lo || v->u.i > hi)
        return false;
    *out = v->u.i;
    return true;
}

bool json_bool(const json_value *v, bool *out) {
    if (!v || v->kind != JSON_BOOL)
        return false;
    *out = v->u.b;
    return true;
}

bool json_is_null(const json_value *v) {
    return v && v->kind == JSON_NULL;
}
