/* tokenizer_unicode.h - the Unicode character classes the K3 split pattern asks about,
 * one byte of bits per code point. The tables behind it (tokenizer_unicode.c) are
 * generated from Node's Unicode data by scripts/gen-unicode-tables.mjs; this header only
 * names the bits and looks them up. Code points above U+10FFFF and surrogates have no bits. */
#ifndef K3_TOKENIZER_UNICODE_H
#define K3_TOKENIZER_UNICODE_H

#include <stdint.h>

#define TOKENIZER_UNICODE_LU 0x01      /* Lu or Lt */
#define TOKENIZER_UNICODE_LL 0x02      /* Ll */
#define TOKENIZER_UNICODE_LO 0x04      /* Lm or Lo */
#define TOKENIZER_UNICODE_M 0x08       /* Mn, Mc or Me */
#define TOKENIZER_UNICODE_N 0x10       /* Nd, Nl or No */
#define TOKENIZER_UNICODE_HAN 0x20     /* Script=Han (the pattern's \p{Han}) */
#define TOKENIZER_UNICODE_SPACE 0x40   /* White_Space (the pattern's \s) */
#define TOKENIZER_UNICODE_PYSPACE 0x80 /* Python str.isspace(): the release's run cutter */

extern const uint16_t tokenizer_unicode_stage1[0x110000 >> 8];
extern const uint8_t tokenizer_unicode_stage2[];

static inline unsigned tokenizer_unicode_class(uint32_t cp) {
    if (cp >= 0x110000)
        return 0;
    return tokenizer_unicode_stage2[((uint32_t)tokenizer_unicode_stage1[cp >> 8] << 8) | (cp & 0xff)];
}

/* The ASCII lower-case letter a case-insensitive match treats cp as (Unicode simple case
 * folding: 'S', 's' and U+017F all give 's'); cp itself when it folds to no ASCII letter. */
uint32_t tokenizer_unicode_fold_ascii(uint32_t cp);

#endif
