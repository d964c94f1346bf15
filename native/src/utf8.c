/* utf8.c - see utf8.h. The only file that knows UTF-8's byte ranges. */
#include "utf8.h"

/* The length of the sequence lead byte c starts (2..4), with the range its second byte must
 * lie in (narrower than 0x80..0xbf after 0xe0, 0xed, 0xf0 and 0xf4: no overlongs, no
 * surrogates, nothing above U+10FFFF); 0 for a byte no multi-byte sequence starts with. */
static size_t lead_length(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80;
    *hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        return 2;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0)
            *lo = 0xa0;
        else if (c == 0xed)
            *hi = 0x9f;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0)
            *lo = 0x90;
        else if (c == 0xf4)
            *hi = 0x8f;
        return 4;
    }
    return 0;
}

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, size_t *ill) {
    const unsigned c = s[0];
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    unsigned lo, hi;
    const size_t len = lead_length(c, &lo, &hi);
    uint32_t v = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    size_t i = 1; /* bytes of a valid prefix so far */
    while (i < len && i < n) {
        const unsigned t = s[i];
        if (t < (i == 1 ? lo : 0x80) || t > (i == 1 ? hi : 0xbf))
            break;
        v = v << 6 | (t & 0x3f);
        i++;
    }
    if (len && i == len) {
        if (cp)
            *cp = v;
        return len;
    }
    if (ill)
        *ill = i;
    return 0;
}

size_t utf8_incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned c = s[n - back];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        unsigned lo, hi;
        size_t ill = 0;
        /* Cut short with every byte so far valid: the subpart reaches the end. */
        if (lead_length(c, &lo, &hi) > back && !utf8_decode(s + n - back, back, NULL, &ill) && ill == back)
            return back;
        return 0; /* complete, ASCII, or a prefix that can never complete */
    }
    return 0;
}

char *utf8_encode(char *d, uint32_t cp) {
    if (cp < 0x80) {
        *d++ = (char)cp;
    } else if (cp < 0x800) {
        *d++ = (char)(0xc0 | cp >> 6);
        *d++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *d++ = (char)(0xe0 | cp >> 12);
        *d++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *d++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *d++ = (char)(0xf0 | cp >> 18);
        *d++ = (char)(0x80 | (cp >> 12 & 0x3f));
        *d++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *d++ = (char)(0x80 | (cp & 0x3f));
    }
    return d;
}
