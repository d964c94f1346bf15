/* test_utf8.c - the one UTF-8 decoder: every well-formed length read back with its code
 * point, each kind of ill-formed sequence refused with the stretch one U+FFFD replaces,
 * a stream's incomplete tail told from a prefix that can never complete, and encoding
 * round-tripped over every scalar value. */
#include "harness.h"
#include "utf8.h"

#include <string.h>

/* Decodes bytes (NUL-free) and checks the result: a length and code point, or 0 and the
 * maximal ill-formed subpart. */
static int decodes(const char *bytes, size_t want_len, uint32_t want_cp, size_t want_ill) {
    uint32_t cp = 0xdeadbeef;
    size_t ill = 99;
    const size_t len = utf8_decode((const unsigned char *)bytes, strlen(bytes), &cp, &ill);
    if (len != want_len || (len && cp != want_cp) || (!len && ill != want_ill)) {
        fprintf(stderr, "  decoding \"%s\": length %zu, code point U+%04X, ill %zu\n", bytes, len, cp, ill);
        return 0;
    }
    return 1;
}

TEST(utf8_decodes_every_length_at_its_bounds) {
    CHECK(decodes("A", 1, 'A', 0));
    CHECK(decodes("\x7f", 1, 0x7f, 0));
    CHECK(decodes("\xc2\x80", 2, 0x80, 0));
    CHECK(decodes("\xdf\xbf", 2, 0x7ff, 0));
    CHECK(decodes("\xe0\xa0\x80", 3, 0x800, 0));
    CHECK(decodes("\xed\x9f\xbf", 3, 0xd7ff, 0));
    CHECK(decodes("\xee\x80\x80", 3, 0xe000, 0));
    CHECK(decodes("\xef\xbf\xbf", 3, 0xffff, 0));
    CHECK(decodes("\xf0\x90\x80\x80", 4, 0x10000, 0));
    CHECK(decodes("\xf4\x8f\xbf\xbf", 4, 0x10ffff, 0));
    CHECK(decodes("\xe2\x82\xac tail", 3, 0x20ac, 0)); /* only the first character */
    uint32_t cp;
    CHECK_INT(utf8_decode((const unsigned char *)"\xc3\xa9", 2, &cp, NULL), 2); /* NULL ill */
    CHECK_INT(utf8_decode((const unsigned char *)"\xc3\xa9", 2, NULL, NULL), 2); /* NULL cp */
}

TEST(utf8_refuses_ill_formed_sequences_naming_the_stretch_one_replacement_covers) {
    CHECK(decodes("\x80", 0, 0, 1));             /* a stray continuation byte */
    CHECK(decodes("\xc0\xaf", 0, 0, 1));         /* an overlong lead: never a lead */
    CHECK(decodes("\xc1\xbf", 0, 0, 1));
    CHECK(decodes("\xe0\x80\xaf", 0, 0, 1));     /* overlong three-byte form */
    CHECK(decodes("\xed\xa0\x80", 0, 0, 1));     /* a surrogate, U+D800 */
    CHECK(decodes("\xf0\x80\x80\x80", 0, 0, 1)); /* overlong four-byte form */
    CHECK(decodes("\xf4\x90\x80\x80", 0, 0, 1)); /* above U+10FFFF */
    CHECK(decodes("\xf5\x80\x80\x80", 0, 0, 1)); /* never a lead */
    CHECK(decodes("\xff", 0, 0, 1));
    CHECK(decodes("\xc3", 0, 0, 1));             /* cut short: the valid prefix */
    CHECK(decodes("\xe2\x82", 0, 0, 2));
    CHECK(decodes("\xf0\x9f\x98", 0, 0, 3));
    CHECK(decodes("\xe2\x82 ", 0, 0, 2));        /* a prefix ended by another character */
    CHECK(decodes("\xf0\x9f\x41", 0, 0, 2));
    size_t ill = 0;
    CHECK_INT(utf8_decode((const unsigned char *)"\xe2\x82\xac", 2, NULL, &ill), 0); /* n cuts it */
    CHECK_INT(ill, 2);
}

TEST(utf8_incomplete_tail_holds_back_only_what_more_bytes_could_complete) {
    const struct {
        const char *bytes;
        size_t want;
    } cases[] = {
        {"", 0},          {"abc", 0},         {"a\xc3", 1},     {"a\xe2\x82", 2}, {"\xf0\x9f\x98", 3},
        {"\xe2\x82\xac", 0}, {"\xf0\x9f\x98\x80", 0}, {"a\x80", 0}, {"\xe0\x80", 0}, {"\xed\xa0", 0},
        {"\xf4\x90", 0},  {"\xff", 0},        {"\xc3\xa9\xe2", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t got = utf8_incomplete_tail((const unsigned char *)cases[i].bytes, strlen(cases[i].bytes));
        if (got != cases[i].want)
            harness_fail(__FILE__, __LINE__, "case %zu: tail %zu, want %zu", i, got, cases[i].want);
    }
}

TEST(utf8_encode_round_trips_every_scalar_value) {
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        char buf[4];
        const size_t len = (size_t)(utf8_encode(buf, cp) - buf);
        const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        uint32_t back = 0;
        if (len != want || utf8_decode((const unsigned char *)buf, len, &back, NULL) != len || back != cp) {
            harness_fail(__FILE__, __LINE__, "U+%04X: %zu bytes, read back U+%04X", cp, len, back);
            return;
        }
    }
}
