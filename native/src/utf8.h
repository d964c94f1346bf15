/* utf8.h - UTF-8 as RFC 3629 defines it (no overlong forms, no surrogates, nothing above
 * U+10FFFF): the engine's one decoder, shared by json.c (strings must be valid), the
 * tokenizer (an invalid byte is a character of its own) and the CLI's JSON writer (an
 * ill-formed stretch becomes one U+FFFD). It allocates nothing and knows nothing of what
 * the text means. */
#ifndef K3_UTF8_H
#define K3_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the sequence at s[0..n) (n > 0). Returns its length (1..4) and sets *cp (may be
 * NULL) to the code point. Returns 0 when s does not start a well-formed sequence (a stray
 * continuation byte, a byte no sequence starts with, an overlong form, a surrogate, a code
 * point above U+10FFFF, or a sequence cut short by n), and sets *ill (may be NULL) to the
 * length of its maximal ill-formed subpart (1..3): the first byte and the continuation bytes
 * that could still have completed it, the stretch one U+FFFD replaces under the Unicode /
 * WHATWG "best practice" that V8 and Node's Buffer follow. */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, size_t *ill);

/* How many bytes at the end of s[0..n) begin a sequence that more bytes could still
 * complete (0..3): what a stream holds back until the next piece arrives. */
size_t utf8_incomplete_tail(const unsigned char *s, size_t n);

/* Writes cp (at most U+10FFFF) as 1..4 bytes at d; returns the end. */
char *utf8_encode(char *d, uint32_t cp);

#endif
