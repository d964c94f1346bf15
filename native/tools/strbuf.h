/* strbuf.h - a growable byte buffer for the CLI's text output, and the JSON string writer
 * `k3 serve` answers with. An allocation failure is sticky: every later append is a no-op
 * and `failed` stays set, so a caller checks once at the end. It does not parse JSON
 * (native/src/json.h does). */
#ifndef K3_STRBUF_H
#define K3_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
    char *data; /* NUL-terminated when len > 0 or after any append */
    size_t len, cap;
    int failed; /* an allocation failed; the contents are incomplete */
} strbuf;

void strbuf_init(strbuf *b);
void strbuf_free(strbuf *b);

/* Empties the buffer, keeping its memory. */
void strbuf_clear(strbuf *b);

void strbuf_append(strbuf *b, const void *bytes, size_t n);
void strbuf_puts(strbuf *b, const char *s);
void strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends s[0..n) as a quoted JSON string. Bytes that are not valid UTF-8 become U+FFFD,
 * one per maximal ill-formed subpart (the WHATWG / Unicode "best practice" that V8 and
 * Node's Buffer use), so a client decoding the JSON sees what a JavaScript string made
 * from the same bytes holds. */
void strbuf_json_string(strbuf *b, const char *s, size_t n);

/* Appends s[0..n) with every maximal ill-formed UTF-8 subpart replaced by U+FFFD, as
 * strbuf_json_string() would read it: text kept this way piece by piece reads the same as
 * the pieces converted one by one (what a JavaScript client that joins them sees). */
void strbuf_append_valid_utf8(strbuf *b, const char *s, size_t n);

#endif
