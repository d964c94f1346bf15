/* fuzz_tokenizer.c - the tokenizer harness: an archive (fuzz.h) of tiktoken.model and
 * tokenizer_config.json, written to a temporary folder and opened with tokenizer_open
 * (base64 lines, ranks, the 256 special slots and their names); for a tokenizer it accepts,
 * a sample and the input's own first bytes are encoded (specials allowed and not) and must
 * decode back to the same bytes, at once and streamed. The mutator edits tiktoken.model a
 * line at a time and tokenizer_config.json as JSON. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tokenizer.h"

static const char *const names[] = {"tiktoken.model", "tokenizer_config.json"};
enum { N_NAMES = 2 };

static const char *const lines[] = {"YWI= 256",  "YWJj 257", "IA== 0",   "AA== 1",    "//// 300", "YQ== 4294967296",
                                    "YWI= -1",   "Y!I= 258", "YWI 259",  "YWI=  256", "====  7",  "YWJjZGVm 18446744073709551616",
                                    "YWI=\t256", " 256",     "YWI= 25x", "",           NULL};

static void check_round_trip(k3_tokenizer *tok, const char *text, size_t len, int allow_special) {
    int32_t *ids = malloc(sizeof *ids * (len + 1));
    char *back = malloc(len * 4 + 64);
    size_t n_ids = 0, n_bytes = 0;
    k3_error err;
    if (!ids || !back)
        goto done;
    if (tokenizer_encode(tok, text, len, allow_special, ids, len + 1, &n_ids, &err) != K3_OK)
        fuzz_fail("encoding %zu bytes failed: %s", len, err.detail);
    if (tokenizer_decode(tok, ids, n_ids, back, len * 4 + 64, &n_bytes, &err) != K3_OK)
        fuzz_fail("decoding the %zu ids of %zu bytes failed: %s", n_ids, len, err.detail);
    if (n_bytes != len || memcmp(back, text, len))
        fuzz_fail("%zu bytes encode to %zu ids that decode to %zu other bytes", len, n_ids, n_bytes);
    k3_detokenize_stream stream = {0};
    size_t streamed = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t got = 0;
        if (tokenizer_decode_stream(tok, &stream, ids[i], back + streamed, len * 4 + 64 - streamed, &got, &err) != K3_OK)
            fuzz_fail("streamed decode of id %d failed: %s", ids[i], err.detail);
        streamed += got;
    }
    if (streamed + 4 <= len * 4 + 64)
        streamed += k3_detokenize_stream_end(&stream, back + streamed);
    if (streamed != len || memcmp(back, text, len))
        fuzz_fail("streamed decode gave %zu bytes, not the %zu encoded", streamed, len);
done:
    free(ids);
    free(back);
}

static void run(const uint8_t *data, size_t n) {
    if (fuzz_archive_unpack(data, n, names, N_NAMES))
        return;
    k3_tokenizer *tok = NULL;
    k3_error err;
    if (tokenizer_open(fuzz_tmp(), &tok, &err) != K3_OK) {
        if (tok || !err.detail[0])
            fuzz_fail("a refused tokenizer left a handle or no detail");
        return;
    }
    static const char sample[] = "def f(x):\n    return x  # \xc3\xa9t\xc3\xa9 <|x|>\xff";
    check_round_trip(tok, sample, sizeof sample - 1, 0);
    const size_t own = n < 256 ? n : 256;
    check_round_trip(tok, (const char *)data, own, 0);
    const int32_t vocab = tokenizer_vocab_size(tok);
    for (int32_t id = vocab - 3; id <= vocab; id++) {
        size_t len;
        tokenizer_token(tok, id, &len);
    }
    tokenizer_close(tok);
}

static size_t edit_file(uint8_t *d, size_t n, size_t cap, uint8_t id, fuzz_rng *r) {
    if (id % N_NAMES == 1)
        return fuzz_mutate_json(d, n, cap, r);
    return fuzz_below(r, 3) ? fuzz_mutate_lines(d, n, cap, r, lines) : fuzz_mutate_bytes(d, n, cap, r, lines, NULL, 0);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) {
    return fuzz_mutate_archive(d, n, cap, r, N_NAMES, edit_file);
}

const fuzz_harness fuzz_tokenizer = {"tokenizer", "tiktoken.model + tokenizer_config.json -> tokenizer_open, round trips",
                                     NULL, run, mutate, lines, 256 << 10};
