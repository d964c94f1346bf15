/* fuzz_json.c - the JSON harness: any bytes to json_parse (strict RFC 8259, depth-bounded;
 * config.json, tokenizer_config.json, the safetensors index and headers and every k3 serve
 * request body go through it), then a walk of the document through every accessor, so a
 * document the parser accepts is one its readers can read. */
#include <string.h>

#include "fuzz.h"
#include "json.h"

static const char *const dictionary[] = {"{", "}", "[", "]", ":", ",", "\"", "\\", "\\u", "\\ud83d\\ude00", "\\ud800",
                                         "null", "true", "false", "-", "0", "1e", "E+", ".", "1e308", "\xef\xbb\xbf",
                                         "\xc3\xa9", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\t", "\n", NULL};

static void walk(const json_value *v, int depth) {
    double d;
    int64_t i;
    bool b;
    size_t len;
    json_number(v, &d);
    json_int(v, INT64_MIN, INT64_MAX, &i);
    json_is_integral(v);
    json_bool(v, &b);
    json_is_null(v);
    const char *s = json_string(v, &len);
    if (s && strlen(s) > len)
        fuzz_fail("json_string: %zu bytes before the terminator, len says %zu", strlen(s), len);
    json_string_is(v, "a");
    if (depth > JSON_MAX_DEPTH + 1)
        fuzz_fail("a parsed document is deeper than JSON_MAX_DEPTH (%d)", JSON_MAX_DEPTH);
    const size_t n = json_type(v) == JSON_ARRAY || json_type(v) == JSON_OBJECT ? json_len(v) : 0;
    for (size_t k = 0; k < n; k++) {
        const json_value *child = json_at(v, k);
        if (!child)
            fuzz_fail("json_at(%zu) of %zu is NULL", k, n);
        json_key(child, &len);
        walk(child, depth + 1);
    }
    json_get(v, "a");
    json_get(v, "text_config");
}

static void run(const uint8_t *data, size_t n) {
    json_doc *doc = NULL;
    k3_error err;
    if (json_parse((const char *)data, n, "fuzz.json", &doc, &err) == K3_OK)
        walk(json_root(doc), 0);
    else if (doc || !err.detail[0])
        fuzz_fail("a refused document left doc %p and detail '%s'", (void *)doc, err.detail);
    json_free(doc);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) { return fuzz_mutate_json(d, n, cap, r); }

const fuzz_harness fuzz_json = {"json", "bytes -> json_parse, then every accessor over the document", NULL, run, mutate,
                                dictionary, 64 << 10};
