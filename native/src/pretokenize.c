/* pretokenize.c - the K3 split pattern, which cuts text into the pieces BPE then encodes
 * one by one: a hand-written matcher over code points and their tokenizer_unicode classes
 * with the pattern's leftmost-first, backtracking semantics. It is separate from
 * tokenizer.c because it knows the pattern and nothing of tokens, ranks or bytes.
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
#include "pretokenize.h"

#include "tokenizer_unicode.h"

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

size_t pretokenize_match_piece(const uint32_t *cp, const uint8_t *cls, size_t p, size_t end) {
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
