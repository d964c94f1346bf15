/* pretokenize.h - the K3 split pattern (pretokenize.c): where the piece that starts at a
 * character ends. The tokenizer decodes the text into code points and classes first, so
 * the matcher sees neither bytes nor invalid UTF-8 (a character with class 0). */
#ifndef K3_PRETOKENIZE_H
#define K3_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

/* The end of the piece the pattern matches at character p of cp/cls[..end) (p < end):
 * the first alternative that matches, as a backtracking engine finds it. Every character
 * starts some alternative, so pieces tile the text. */
size_t pretokenize_match_piece(const uint32_t *cp, const uint8_t *cls, size_t p, size_t end);

#endif
