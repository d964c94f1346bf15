/* test_tokenizer.c - the tokenizer against ids the real K3 tokenizer produced (the vendored
 * code cases and two published prompts), its round trips, special-token handling, the
 * release's cuts of long inputs, streaming decode, and its refusals of broken files. Runs
 * with cwd = native/, so the vendored data is at ../test/data/kimi-tokenizer/. */
#include "harness.h"
#include "json.h"
#include "k3.h"
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOK_DIR "../test/data/kimi-tokenizer"

static k3_tokenizer *shared;

/* The real tokenizer, opened once for all tests and closed at exit. */
static k3_tokenizer *real(void) {
    if (!shared) {
        char detail[512];
        if (k3_tokenizer_open(TOK_DIR, &shared, detail, sizeof detail) != K3_OK) {
            fprintf(stderr, "cannot open %s: %s\n", TOK_DIR, detail);
            return NULL;
        }
    }
    return shared;
}

__attribute__((destructor)) static void close_shared(void) {
    k3_tokenizer_close(shared);
}

/* Encodes text into a fresh array (caller frees); *n gets the count. */
static int32_t *encode(k3_tokenizer *tok, const char *text, size_t len, int allow, size_t *n) {
    int32_t *ids = malloc((len + 1) * sizeof *ids);
    if (!ids || k3_tokenize(tok, text, len, allow, ids, len + 1, n) != K3_OK) {
        free(ids);
        return NULL;
    }
    return ids;
}

/* Decodes ids and compares with want[0..len). */
static int decodes_to(k3_tokenizer *tok, const int32_t *ids, size_t n, const char *want, size_t len) {
    size_t need;
    if (k3_detokenize(tok, ids, n, NULL, 0, &need) != K3_OK || need != len)
        return 0;
    char *out = malloc(need + 1);
    size_t got;
    int ok = out && k3_detokenize(tok, ids, n, out, need, &got) == K3_OK && got == len &&
             !memcmp(out, want, len);
    free(out);
    return ok;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

TEST(tokenizer_vocabulary_is_the_ranks_plus_256_named_special_slots) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    CHECK_INT(k3_tokenizer_vocab_size(tok), 163840);
    CHECK_INT(k3_tokenizer_special_id(tok, "[BOS]"), 163584);
    CHECK_INT(k3_tokenizer_special_id(tok, "[EOS]"), 163585);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|end_of_msg|>"), 163586);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|open|>"), 163587);
    CHECK_INT(k3_tokenizer_special_id(tok, "[PAD]"), 163839);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|reserved_token_163592|>"), 163592);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|reserved_token_163839|>"), -1);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|im_start|>"), -1);
    CHECK_INT(k3_tokenizer_special_id(tok, "the"), -1);
    size_t len;
    const char *b = k3_tokenizer_token(tok, 163586, &len);
    CHECK(b && len == 14 && !memcmp(b, "<|end_of_msg|>", 14));
    b = k3_tokenizer_token(tok, 0, &len);
    CHECK(b && len == 1 && b[0] == '!');
    CHECK(k3_tokenizer_token(tok, 163840, &len) == NULL);
    CHECK(k3_tokenizer_token(tok, -1, &len) == NULL);
}

TEST(tokenizer_encodes_published_prompts_to_their_ids_without_bos) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    static const struct {
        const char *text;
        int32_t ids[5];
    } cases[] = {
        {"The capital of France is", {1008, 10484, 318, 15383, 387}},
        {"According to all known laws", {18805, 308, 799, 5624, 12524}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t ids[16];
        size_t n;
        CHECK_INT(k3_tokenize(tok, cases[c].text, strlen(cases[c].text), 1, ids, 16, &n), K3_OK);
        CHECK(same_ids(ids, n, cases[c].ids, 5));
    }
}

TEST(tokenizer_encodes_the_32_code_cases_exactly_and_decodes_them_back) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    json_doc *doc;
    k3_error err;
    CHECK_INT(json_parse_file(TOK_DIR "/k3-tokenizer-code-cases.json", &doc, &err), K3_OK);
    const json_value *cases = json_get(json_root(doc), "cases");
    size_t n_cases = json_len(cases), matched = 0;
    for (size_t c = 0; c < n_cases; c++) {
        const json_value *cs = json_at(cases, c);
        size_t len;
        const char *text = json_string(json_get(cs, "text"), &len);
        const json_value *want = json_get(cs, "ids");
        size_t n;
        int32_t *ids = encode(tok, text, len, 1, &n);
        int ok = ids && n == json_len(want);
        for (size_t i = 0; ok && i < n; i++) {
            int64_t w;
            ok = json_int(json_at(want, i), 0, INT32_MAX, &w) && w == ids[i];
        }
        if (!ok)
            fprintf(stderr, "  code case %s differs\n", json_string(json_get(cs, "name"), NULL));
        else if (decodes_to(tok, ids, n, text, len))
            matched++;
        free(ids);
    }
    json_free(doc);
    CHECK_INT(n_cases, 32);
    CHECK_INT(matched, 32);
}

TEST(tokenizer_recognises_specials_only_when_allowed) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    const char *text = "<|open|>user<|sep|>hi<|end_of_msg|>";
    size_t len = strlen(text), n;
    int32_t *on = encode(tok, text, len, 1, &n);
    CHECK(on);
    CHECK(n >= 5 && on[0] == 163587 && on[n - 1] == 163586);
    int specials = 0;
    for (size_t i = 0; i < n; i++)
        specials += on[i] >= 163584;
    CHECK_INT(specials, 3);
    CHECK(decodes_to(tok, on, n, text, len));
    size_t m;
    int32_t *off = encode(tok, text, len, 0, &m);
    CHECK(off);
    for (size_t i = 0; i < m; i++)
        CHECK(off[i] < 163584);
    CHECK(decodes_to(tok, off, m, text, len));
    free(on);
    free(off);
    /* A named slot has no reserved spelling: that text is ordinary BPE (9 ids). */
    const char *fake = "<|reserved_token_163839|>";
    int32_t *ids = encode(tok, fake, strlen(fake), 1, &n);
    CHECK(ids);
    CHECK_INT(n, 9);
    free(ids);
    const char *reserved = "a<|reserved_token_163600|>b";
    ids = encode(tok, reserved, strlen(reserved), 1, &n);
    CHECK(ids);
    CHECK(n == 3 && ids[1] == 163600);
    free(ids);
}

/* A deterministic generator for the round-trip and agreement tests. */
static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rng(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* Random text drawn from pieces that exercise every alternative of the pattern, plus raw
 * bytes that are not UTF-8 when `raw` is set. */
static size_t random_text(char *buf, size_t cap, int raw) {
    static const char *parts[] = {
        " ", "  ", "\t", "\n", "\r\n", "\n\n", "the", "The", "THE", "don't", "DON'T", "we'LL",
        "x", "42", "12345", "3.14", "é", "e\xcc\x81", "\xcc\x81", "中文", "日本語", "漢字abc",
        "한국어", "😀", "👩‍💻", "Ω", "ǅ", "ʰ", "ﬁ", "(", "){", "->", "!==", "'", "'s", "ſ",
        "\xc2\x85", "\xef\xbb\xbf", "\xe3\x80\x87", "<|open|>", "[EOS]", "<|sep", "_", "$x",
    };
    size_t n = 0, k = 1 + rng() % 40;
    for (size_t i = 0; i < k; i++) {
        if (raw && rng() % 8 == 0) {
            if (n + 1 >= cap)
                break;
            buf[n++] = (char)(0x80 + rng() % 128);
            continue;
        }
        const char *p = parts[rng() % (sizeof parts / sizeof parts[0])];
        size_t l = strlen(p);
        if (n + l >= cap)
            break;
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}

TEST(tokenizer_round_trips_any_bytes_including_invalid_utf8) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    char buf[512];
    for (int i = 0; i < 2000; i++) {
        size_t len = random_text(buf, sizeof buf, 1);
        for (int allow = 0; allow <= 1; allow++) {
            size_t n;
            int32_t *ids = encode(tok, buf, len, allow, &n);
            CHECK(ids);
            CHECK(n <= len);
            int ok = decodes_to(tok, ids, n, buf, len);
            free(ids);
            CHECK(ok);
        }
    }
    unsigned char all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (unsigned char)b;
    size_t n;
    int32_t *ids = encode(tok, (const char *)all, 256, 0, &n);
    CHECK(ids);
    int ok = decodes_to(tok, ids, n, (const char *)all, 256);
    free(ids);
    CHECK(ok);
}

TEST(tokenizer_heap_merge_gives_the_same_ids_as_the_tiktoken_scan) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    char buf[2048];
    for (int i = 0; i < 500; i++) {
        size_t len = random_text(buf, sizeof buf, 1);
        /* Long pieces too: one word, one run of spaces, one run of punctuation. */
        if (i % 5 == 0) {
            static const char *units[] = {"abcxyz", "    ", "+-=*", "\xe4\xb8\xad\xe6\x96\x87"};
            const char *u = units[(i / 5) % 4];
            len = 0;
            while (len + strlen(u) < sizeof buf)
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s", u);
        }
        size_t na, nb;
        tokenizer_set_heap_min(tok, (size_t)-1);
        int32_t *a = encode(tok, buf, len, 1, &na);
        tokenizer_set_heap_min(tok, 2);
        int32_t *b = encode(tok, buf, len, 1, &nb);
        tokenizer_set_heap_min(tok, 128);
        int same = a && b && same_ids(a, na, b, nb);
        free(a);
        free(b);
        CHECK(same);
    }
}

static char *repeat(const char *unit, size_t times, size_t *len) {
    size_t u = strlen(unit);
    char *s = malloc(u * times + 1);
    for (size_t i = 0; i < times; i++)
        memcpy(s + i * u, unit, u);
    s[u * times] = '\0';
    *len = u * times;
    return s;
}

/* encode(a + b) == encode(a) ++ encode(b) for a cut at byte `at`. */
static int encodes_as_two_cuts(k3_tokenizer *tok, const char *s, size_t len, size_t at) {
    size_t n, n1, n2;
    int32_t *all = encode(tok, s, len, 1, &n);
    int32_t *a = encode(tok, s, at, 1, &n1);
    int32_t *b = encode(tok, s + at, len - at, 1, &n2);
    int ok = all && a && b && n == n1 + n2 && !memcmp(all, a, n1 * sizeof *a) &&
             !memcmp(all + n1, b, n2 * sizeof *b);
    free(all);
    free(a);
    free(b);
    return ok;
}

TEST(tokenizer_cuts_runs_over_25000_spaces_or_non_spaces_as_the_release_does) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    size_t len;
    /* 30,000 spaces: one cut after 25,000 (each cut then ends with its own `\s+` piece). */
    char *s = repeat(" ", 30000, &len);
    CHECK(encodes_as_two_cuts(tok, s, len, 25000));
    free(s);
    /* Non-spaces: "x." 15,000 times is a 30,000-character run; the cut lands after x. */
    s = repeat("x.", 15000, &len);
    CHECK(encodes_as_two_cuts(tok, s, len, 25000));
    size_t n;
    int32_t *ids = encode(tok, s, len, 1, &n);
    CHECK(ids);
    CHECK(decodes_to(tok, ids, n, s, len));
    free(ids);
    free(s);
    /* A run of exactly 25,000 is not cut: its tokens differ from a cut one's. */
    s = repeat("ab", 12500, &len);
    CHECK(!encodes_as_two_cuts(tok, s, len, 24999));
    free(s);
    /* Code points count, not bytes: 30,000 two-byte letters are cut after 25,000 of them. */
    s = repeat("\xc3\xa9", 30000, &len);
    CHECK(encodes_as_two_cuts(tok, s, len, 50000));
    free(s);
}

TEST(tokenizer_encodes_400000_character_chunks_separately_as_the_release_does) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    size_t len;
    char *s = repeat("ab ", 150000, &len); /* 450,000 characters; the chunk ends after 'a' */
    CHECK(encodes_as_two_cuts(tok, s, len, 400000));
    free(s);
}

TEST(tokenizer_reports_the_needed_count_when_the_buffer_is_small) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    const char *text = "The capital of France is";
    size_t n = 99;
    CHECK_INT(k3_tokenize(tok, text, strlen(text), 1, NULL, 0, &n), K3_OK);
    CHECK_INT(n, 5);
    int32_t ids[3];
    CHECK_INT(k3_tokenize(tok, text, strlen(text), 1, ids, 3, &n), K3_ERR_INVALID_ARGUMENT);
    CHECK_INT(n, 5);
    CHECK(strstr(k3_tokenizer_error(tok), "needs 5 ids"));
    CHECK_INT(ids[0], 1008);
    CHECK_INT(k3_tokenize(tok, "", 0, 1, ids, 3, &n), K3_OK);
    CHECK_INT(n, 0);
    char out[8];
    int32_t five[5] = {1008, 10484, 318, 15383, 387};
    CHECK_INT(k3_detokenize(tok, five, 5, out, sizeof out, &n), K3_ERR_INVALID_ARGUMENT);
    CHECK_INT(n, strlen(text));
}

TEST(tokenizer_refuses_to_decode_an_id_outside_the_vocabulary) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    int32_t ids[3] = {1008, 163840, 5};
    char out[64];
    size_t n;
    CHECK_INT(k3_detokenize(tok, ids, 3, out, sizeof out, &n), K3_ERR_TOKEN);
    CHECK(strstr(k3_tokenizer_error(tok), "ids[1] = 163840"));
    ids[1] = -3;
    CHECK_INT(k3_detokenize(tok, ids, 3, out, sizeof out, &n), K3_ERR_TOKEN);
    k3_detokenize_stream st = {0};
    CHECK_INT(k3_detokenize_stream_next(tok, &st, 170000, out, sizeof out, &n), K3_ERR_TOKEN);
}

static int valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = u[i] < 0x80 ? 1 : (u[i] & 0xe0) == 0xc0 ? 2 : (u[i] & 0xf0) == 0xe0 ? 3 : (u[i] & 0xf8) == 0xf0 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xc0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

TEST(tokenizer_stream_never_splits_a_utf8_sequence_and_adds_up_to_the_text) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    /* Rare characters that BPE splits into byte tokens, between ordinary ones. */
    const char *text = "a😀b 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ 👩‍👩‍👧‍👦 \xe2\x80\xbd\xf0\x9f\x98\x80 done";
    size_t len = strlen(text), n;
    int32_t *ids = encode(tok, text, len, 0, &n);
    CHECK(ids);
    char all[256], out[K3_TOKEN_MAX_BYTES + 3];
    size_t used = 0, held_max = 0;
    k3_detokenize_stream st = {0};
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        size_t got;
        ok = k3_detokenize_stream_next(tok, &st, ids[i], out, sizeof out, &got) == K3_OK &&
             valid_utf8(out, got) && used + got <= sizeof all;
        if (ok) {
            memcpy(all + used, out, got);
            used += got;
        }
        if (st.n_held > held_max)
            held_max = st.n_held;
    }
    free(ids);
    CHECK(ok);
    CHECK(held_max > 0); /* the text did split a character */
    used += k3_detokenize_stream_end(&st, all + used);
    CHECK_INT(used, len);
    CHECK(!memcmp(all, text, len));
    CHECK_INT(st.n_held, 0);
}

TEST(tokenizer_stream_passes_bytes_that_can_never_complete) {
    k3_tokenizer *tok = real();
    CHECK(tok);
    /* 0xE0 0x80 can never start a character (overlong): nothing waits for more. */
    const char bad[] = "\xe0\x80x\xf0";
    size_t n;
    int32_t *ids = encode(tok, bad, 4, 0, &n);
    CHECK(ids);
    char out[K3_TOKEN_MAX_BYTES + 3], all[8];
    size_t used = 0, got;
    k3_detokenize_stream st = {0};
    for (size_t i = 0; i < n; i++) {
        CHECK_INT(k3_detokenize_stream_next(tok, &st, ids[i], out, sizeof out, &got), K3_OK);
        memcpy(all + used, out, got);
        used += got;
    }
    free(ids);
    CHECK_INT(used, 3);       /* the trailing lead byte waits */
    CHECK_INT(st.n_held, 1);
    CHECK_INT(k3_detokenize_stream_end(&st, all + used), 1);
    CHECK(!memcmp(all, bad, 4));
}

/* ---- broken tokenizer files ---------------------------------------------------------- */

static char tmp_dir[64];

/* Writes dir/tiktoken.model (the 256 single bytes, then `extra` lines, each given as raw
 * text) and a config naming one special right after the ranks. Returns the dir. */
static const char *write_tokenizer(const char *extra, int truncate_last, int n_ranks_for_config) {
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/k3-tok-test-XXXXXX");
        if (!mkdtemp(tmp_dir))
            return NULL;
    }
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char path[128];
    snprintf(path, sizeof path, "%s/tiktoken.model", tmp_dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    for (int b = 0; b < 256; b++)
        fprintf(f, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    fputs(extra, f);
    fclose(f);
    if (truncate_last) {
        struct stat sb;
        stat(path, &sb);
        if (truncate(path, sb.st_size - truncate_last) != 0)
            return NULL;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp_dir);
    f = fopen(path, "wb");
    if (!f)
        return NULL;
    fprintf(f, "{\"added_tokens_decoder\": {\"%d\": {\"content\": \"<|x|>\", \"special\": true}}}\n",
            n_ranks_for_config);
    fclose(f);
    return tmp_dir;
}

__attribute__((destructor)) static void remove_tmp(void) {
    if (tmp_dir[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/tiktoken.model", tmp_dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp_dir);
        unlink(path);
        rmdir(tmp_dir);
    }
}

/* Opens the files write_tokenizer() made; returns the status and the detail in detail. */
static k3_status open_bad(const char *extra, int truncate_last, int config_id, char *detail,
                          size_t size) {
    const char *dir = write_tokenizer(extra, truncate_last, config_id);
    if (!dir) {
        snprintf(detail, size, "cannot write the test files");
        return K3_ERR_IO;
    }
    k3_tokenizer *tok = NULL;
    k3_status st = k3_tokenizer_open(dir, &tok, detail, size);
    k3_tokenizer_close(tok);
    return st;
}

TEST(tokenizer_opens_a_small_well_formed_tokenizer) {
    char detail[512];
    /* "YWI=" is "ab", rank 256; the special is rank 257. */
    CHECK_INT(open_bad("YWI= 256\n", 0, 257, detail, sizeof detail), K3_OK);
    k3_tokenizer *tok;
    CHECK_INT(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail), K3_OK);
    CHECK_INT(k3_tokenizer_vocab_size(tok), 257 + 256);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|x|>"), 257);
    CHECK_INT(k3_tokenizer_special_id(tok, "<|reserved_token_258|>"), 258);
    int32_t ids[8];
    size_t n;
    CHECK_INT(k3_tokenize(tok, "abc<|x|>", 8, 1, ids, 8, &n), K3_OK);
    CHECK_INT(n, 3);
    CHECK_INT(ids[0], 256);
    CHECK_INT(ids[1], 'c');
    CHECK_INT(ids[2], 257);
    k3_tokenizer_close(tok);
}

TEST(tokenizer_refuses_bad_base64_naming_the_line) {
    char detail[512];
    CHECK_INT(open_bad("YWI= 256\nY!I= 257\n", 0, 258, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:258:") && strstr(detail, "not base64"));
    CHECK_INT(open_bad("YWI 256\n", 0, 257, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:257:") && strstr(detail, "multiple of 4"));
}

TEST(tokenizer_refuses_a_line_without_a_rank_naming_it) {
    char detail[512];
    CHECK_INT(open_bad("YWI=\n", 0, 257, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:257:") && strstr(detail, "no rank"));
    CHECK_INT(open_bad("YWI= 25x\n", 0, 257, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, ":257:") && strstr(detail, "not a non-negative decimal integer"));
}

TEST(tokenizer_refuses_a_duplicate_rank_naming_the_line) {
    char detail[512];
    CHECK_INT(open_bad("YWI= 256\nYmM= 256\n", 0, 257, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:258:") && strstr(detail, "rank 256 appears twice"));
    /* The same bytes under two ranks. */
    CHECK_INT(open_bad("YWI= 256\nYWI= 257\n", 0, 258, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, ":258:") && strstr(detail, "same bytes as rank 256"));
}

TEST(tokenizer_refuses_an_out_of_order_or_missing_rank_naming_the_line) {
    char detail[512];
    CHECK_INT(open_bad("YWI= 257\nYmM= 256\n", 0, 258, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:257:") && strstr(detail, "rank 257 where rank 256 was expected"));
}

TEST(tokenizer_refuses_a_truncated_file_naming_the_line) {
    char detail[512];
    /* Cut inside the last line: its rank is gone. */
    CHECK_INT(open_bad("YWI= 256\nYWJj= 257\n", 6, 258, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tiktoken.model:258:") && strstr(detail, "truncated"));
    /* Cut at a line end: the config's specials no longer follow the ranks. */
    CHECK_INT(open_bad("YWI= 256\n", 0, 1000, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "tokenizer_config.json") && strstr(detail, "id 1000") &&
          strstr(detail, "truncated"));
    /* Cut before the single bytes are all there. */
    char path[128];
    CHECK(write_tokenizer("", 0, 257));
    snprintf(path, sizeof path, "%s/tiktoken.model", tmp_dir);
    CHECK(truncate(path, 10 * 7 + 90 * 8) == 0); /* ranks 0..99: "XX== N\n", 7 or 8 bytes */
    k3_tokenizer *tok = NULL;
    CHECK(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail) == K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "has no rank"));
}

TEST(tokenizer_refuses_a_missing_or_malformed_config) {
    char detail[512], path[128];
    CHECK(write_tokenizer("", 0, 256));
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp_dir);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    fputs("{\"added_tokens_decoder\": {\"256\": {\"content\": 7}}}", f);
    fclose(f);
    k3_tokenizer *tok = NULL;
    CHECK_INT(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "added_tokens_decoder[\"256\"].content"));
    f = fopen(path, "wb");
    CHECK(f);
    fputs("{\"added_tokens_decoder\": {\"256\": {\"content\": \"<|a|>\"}, \"257\": {\"content\": \"<|a|>\"}}}", f);
    fclose(f);
    CHECK_INT(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail), K3_ERR_TOKENIZER);
    CHECK(strstr(detail, "both named \"<|a|>\""));
    f = fopen(path, "wb");
    CHECK(f);
    fputs("{\"added_tokens_decoder\": [", f);
    fclose(f);
    CHECK_INT(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail), K3_ERR_FORMAT);
    unlink(path);
    CHECK_INT(k3_tokenizer_open(tmp_dir, &tok, detail, sizeof detail), K3_ERR_IO);
    CHECK(strstr(detail, "tokenizer_config.json"));
    CHECK(tok == NULL);
    CHECK_INT(k3_tokenizer_open("/nonexistent-k3-dir", &tok, detail, sizeof detail), K3_ERR_IO);
    CHECK(strstr(detail, "/nonexistent-k3-dir/tiktoken.model"));
}
