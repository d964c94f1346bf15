/* strbuf.c - growable byte buffer and JSON string writer (see strbuf.h). */
#include "strbuf.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(strbuf *b) { memset(b, 0, sizeof *b); }

void strbuf_free(strbuf *b) {
    free(b->data);
    strbuf_init(b);
}

void strbuf_clear(strbuf *b) {
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

/* Makes room for n more bytes plus the terminator; 0 on success. */
static int reserve(strbuf *b, size_t n) {
    if (b->failed)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *grown = realloc(b->data, cap);
    if (!grown) {
        b->failed = 1;
        return -1;
    }
    b->data = grown;
    b->cap = cap;
    return 0;
}

void strbuf_append(strbuf *b, const void *bytes, size_t n) {
    if (reserve(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = 0;
}

void strbuf_puts(strbuf *b, const char *s) { strbuf_append(b, s, strlen(s)); }

void strbuf_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    const int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        strbuf_append(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void strbuf_json_string(strbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    strbuf_append(b, "\"", 1);
    size_t run = 0; /* start of bytes copied as they are */
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t ill;
        const size_t seq = c >= 0x80 ? utf8_decode(p + i, n - i, NULL, &ill) : 1;
        if (seq > 1) {
            i += seq;
            continue;
        }
        strbuf_append(b, s + run, i - run);
        if (c >= 0x80) {
            strbuf_append(b, "\xEF\xBF\xBD", 3); /* U+FFFD */
            i += ill;
        } else {
            char esc[6] = {'\\', 0};
            size_t len = 2;
            switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                len = 6;
            }
            strbuf_append(b, esc, len);
            i++;
        }
        run = i;
    }
    strbuf_append(b, s + run, n - run);
    strbuf_append(b, "\"", 1);
}

void strbuf_append_valid_utf8(strbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t ill;
        const size_t seq = utf8_decode(p + i, n - i, NULL, &ill);
        if (seq) {
            i += seq;
            continue;
        }
        strbuf_append(b, s + run, i - run);
        strbuf_append(b, "\xEF\xBF\xBD", 3);
        i += ill;
        run = i;
    }
    strbuf_append(b, s + run, n - run);
}
