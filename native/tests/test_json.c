/* test_json.c - the strict JSON parser: values read back exactly, every grammar and
 * encoding violation refused with its line, column and what was expected, the depth
 * limit, duplicate keys, large documents, and every out-of-memory path. */
#include "json.h"
#include "test_files.h"

static k3_status parse(const char *text, json_doc **doc, k3_error *err) {
    return json_parse(text, strlen(text), "t.json", doc, err);
}

/* Parses text, expecting K3_ERR_FORMAT with `substr` in the detail. */
static int refuses(const char *text, const char *substr) {
    json_doc *doc = (json_doc *)1;
    k3_error err = {0};
    k3_status st = parse(text, &doc, &err);
    if (st != K3_ERR_FORMAT || doc != NULL || !strstr(err.detail, substr)) {
        fprintf(stderr, "  input %s\n  status %s, detail \"%s\", want format with \"%s\"\n", text,
                k3_status_name(st), err.detail, substr);
        json_free(doc);
        return 0;
    }
    return 1;
}

TEST(json_reads_back_objects_arrays_strings_numbers_and_literals) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse(" {\"a\": 1, \"b\": [true, false, null, \"x\", -2.5e3], \"c\": {}, \"d\": []}\n",
                   &doc, &err), err);
    const json_value *root = json_root(doc);
    CHECK_INT(json_type(root), JSON_OBJECT);
    CHECK_INT(json_len(root), 4);
    CHECK_STR(json_key(json_at(root, 2), NULL), "c");
    int64_t i;
    CHECK(json_int(json_get(root, "a"), 0, 10, &i));
    CHECK_INT(i, 1);
    const json_value *b = json_get(root, "b");
    CHECK_INT(json_type(b), JSON_ARRAY);
    CHECK_INT(json_len(b), 5);
    bool t = false, f = true;
    CHECK(json_bool(json_at(b, 0), &t) && t);
    CHECK(json_bool(json_at(b, 1), &f) && !f);
    CHECK(json_is_null(json_at(b, 2)));
    CHECK(json_string_is(json_at(b, 3), "x"));
    double d;
    CHECK(json_number(json_at(b, 4), &d));
    CHECK_NEAR(d, -2500.0, 0);
    CHECK(json_is_integral(json_at(b, 4)));
    CHECK_INT(json_len(json_get(root, "c")), 0);
    CHECK_INT(json_type(json_get(root, "d")), JSON_ARRAY);
    /* misses are NULL and chain */
    CHECK(json_get(root, "zz") == NULL);
    CHECK(json_at(b, 5) == NULL);
    CHECK(json_get(json_get(root, "zz"), "y") == NULL);
    CHECK_INT(json_type(json_get(root, "zz")), JSON_NONE);
    CHECK(json_key(b, NULL) != NULL);           /* b is a member of root */
    CHECK(json_key(json_at(b, 0), NULL) == NULL); /* array elements have no key */
    CHECK(!json_int(json_at(b, 3), 0, 10, &i));
    CHECK(json_string(json_at(b, 0), NULL) == NULL);
    json_free(doc);
}

TEST(json_any_value_may_be_the_root) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("\"only\"", &doc, &err), err);
    CHECK(json_string_is(json_root(doc), "only"));
    json_free(doc);
    CHECK_OK(parse(" 42 ", &doc, &err), err);
    int64_t i;
    CHECK(json_int(json_root(doc), 42, 42, &i));
    json_free(doc);
    CHECK_OK(parse("null", &doc, &err), err);
    CHECK(json_is_null(json_root(doc)));
    json_free(doc);
}

TEST(json_integers_are_exact_in_int64_and_range_checked) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("[9223372036854775807, -9223372036854775808, 9007199254740993, -0, 7168.0, "
                   "1e3, 1.5, 9223372036854775808, 300]", &doc, &err), err);
    const json_value *a = json_root(doc);
    int64_t i;
    CHECK(json_int(json_at(a, 0), INT64_MIN, INT64_MAX, &i));
    CHECK(i == INT64_MAX);
    CHECK(json_int(json_at(a, 1), INT64_MIN, INT64_MAX, &i));
    CHECK(i == INT64_MIN);
    CHECK(json_int(json_at(a, 2), 0, INT64_MAX, &i)); /* 2^53 + 1: not a double, still exact */
    CHECK(i == 9007199254740993LL);
    CHECK(json_int(json_at(a, 3), 0, 0, &i));
    CHECK_INT(i, 0);
    CHECK(json_int(json_at(a, 4), 0, 10000, &i)); /* integral doubles count */
    CHECK_INT(i, 7168);
    CHECK(json_int(json_at(a, 5), 0, 10000, &i));
    CHECK_INT(i, 1000);
    CHECK(!json_is_integral(json_at(a, 6)));
    CHECK(!json_is_integral(json_at(a, 7))); /* 2^63 does not fit int64 */
    double d;
    CHECK(json_number(json_at(a, 7), &d));
    CHECK_NEAR(d, 9223372036854775808.0, 0);
    CHECK(!json_int(json_at(a, 8), 0, 255, &i)); /* range check */
    CHECK(json_int(json_at(a, 8), 0, 300, &i));
    json_free(doc);
}

TEST(json_fractions_and_exponents_round_like_strtod) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("[1e-05, 0.1, -2.5E+2, 1e-400, 123456789012345678901234567890]", &doc, &err), err);
    double d;
    CHECK(json_number(json_at(json_root(doc), 0), &d) && d == 1e-05);
    CHECK(json_number(json_at(json_root(doc), 1), &d) && d == 0.1);
    CHECK(json_number(json_at(json_root(doc), 2), &d) && d == -250.0);
    CHECK(json_number(json_at(json_root(doc), 3), &d) && d == 0.0); /* underflow is zero */
    CHECK(json_number(json_at(json_root(doc), 4), &d) && d == 123456789012345678901234567890.0);
    json_free(doc);
}

TEST(json_number_grammar_is_strict) {
    CHECK(refuses("01", "a number must not have a leading zero"));
    CHECK(refuses("[-01]", "leading zero"));
    CHECK(refuses("1.", "expected a digit after the decimal point, found end of input"));
    CHECK(refuses(".5", "expected a value"));
    CHECK(refuses("-", "expected a digit after '-'"));
    CHECK(refuses("1e", "expected a digit in the exponent"));
    CHECK(refuses("1e+", "expected a digit in the exponent"));
    CHECK(refuses("+1", "expected a value"));
    CHECK(refuses("[1e400]", "out of the range of a double"));
    CHECK(refuses("NaN", "expected a value"));
    CHECK(refuses("[Infinity]", "expected a value"));
    CHECK(refuses("0x10", "expected end of input after the JSON value, found 'x'"));
}

TEST(json_string_escapes_decode_to_utf8_including_surrogate_pairs) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\\ud83d\\ude00\", "
                   "\"caf\xc3\xa9 \xf0\x9f\x98\x80\", \"a\\u0000b\"]", &doc, &err), err);
    const json_value *a = json_root(doc);
    CHECK_STR(json_string(json_at(a, 0), NULL), "\"\\/\b\f\n\r\t");
    size_t len;
    CHECK_STR(json_string(json_at(a, 1), &len), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    CHECK_INT(len, 9);
    CHECK_STR(json_string(json_at(a, 2), NULL), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    CHECK(memcmp(json_string(json_at(a, 3), &len), "a\0b", 4) == 0);
    CHECK_INT(len, 3);
    CHECK_INT(json_len(json_at(a, 3)), 3);
    json_free(doc);

    CHECK_OK(parse("{\"a\\u0062\": 1}", &doc, &err), err); /* keys are decoded too */
    CHECK(json_get(json_root(doc), "ab") != NULL);
    json_free(doc);
}

TEST(json_bad_strings_are_refused_with_the_reason) {
    CHECK(refuses("\"\\ud800\"", "high surrogate \\ud800 is not followed by a low surrogate"));
    CHECK(refuses("\"\\ud800\\u0041\"", "not followed by a low surrogate"));
    CHECK(refuses("\"\\udc00\"", "lone low surrogate \\udc00"));
    CHECK(refuses("\"\\u12\"", "expected four hex digits after \\u"));
    CHECK(refuses("\"\\x\"", "invalid escape '\\x'"));
    CHECK(refuses("\"a\tb\"", "control character 0x09 in a string must be escaped"));
    CHECK(refuses("\"\xc0\x80\"", "invalid UTF-8 byte 0xc0"));         /* overlong NUL */
    CHECK(refuses("\"\xed\xa0\x80\"", "invalid UTF-8 byte 0xed"));     /* encoded surrogate */
    CHECK(refuses("\"\xf5\x80\x80\x80\"", "invalid UTF-8 byte 0xf5")); /* beyond U+10FFFF */
    CHECK(refuses("\"\xe2\x82\"", "invalid UTF-8 byte 0xe2"));         /* truncated sequence */
    CHECK(refuses("\"\x80\"", "invalid UTF-8 byte 0x80"));             /* lone continuation */
    CHECK(refuses("[\"abc", "line 1, column 2 (byte 1): unterminated string"));
    CHECK(refuses("'a'", "expected a value"));
}

TEST(json_errors_give_line_column_byte_and_what_was_expected) {
    CHECK(refuses("{\n  \"a\": 1,\n  \"b\" 2\n}",
                  "t.json: line 3, column 7 (byte 18): expected ':' after an object key, found '2'"));
    CHECK(refuses("[1, 2,]", "line 1, column 7 (byte 6): expected a value"));
    CHECK(refuses("{\"a\": 1,}", "expected a string key after ',', found '}'"));
    CHECK(refuses("[1 2]", "expected ',' or ']' after an array element, found '2'"));
    CHECK(refuses("{\"a\": 1 \"b\": 2}", "expected ',' or '}' after an object member, found '\"'"));
    CHECK(refuses("{1: 2}", "expected a string key or '}', found '1'"));
    CHECK(refuses("", "line 1, column 1 (byte 0): expected a value"));
    CHECK(refuses("  \n ", "line 2, column 2 (byte 4): expected a value"));
    CHECK(refuses("{} x", "expected end of input after the JSON value, found 'x'"));
    CHECK(refuses("tru", "expected 'true'"));
    CHECK(refuses("[nul]", "expected 'null'"));
    CHECK(refuses("// c\n1", "expected a value"));
    /* columns count characters, not bytes: 'x' is the 7th character but at byte 7 */
    CHECK(refuses("[\"\xc3\xa9\", x]", "line 1, column 7 (byte 7)"));
    /* a NUL byte is not whitespace */
    json_doc *doc;
    k3_error err = {0};
    CHECK_ERROR(json_parse("[1]\0", 4, NULL, &doc, &err), err, K3_ERR_FORMAT,
                "line 1, column 4 (byte 3): expected end of input after the JSON value, found byte 0x00");
}

TEST(json_duplicate_keys_are_refused_in_small_and_large_objects) {
    CHECK(refuses("{\"a\": 1, \"b\": 2, \"a\": 3}",
                  "line 1, column 1 (byte 0): duplicate key 'a' in the object that starts here"));
    char big[4096];
    size_t k = 0;
    k += (size_t)snprintf(big + k, sizeof big - k, "[0, {");
    for (int i = 0; i < 100; i++)
        k += (size_t)snprintf(big + k, sizeof big - k, "\"key%d\": %d, ", i, i);
    snprintf(big + k, sizeof big - k, "\"key57\": 0}]");
    CHECK(refuses(big, "line 1, column 5 (byte 4): duplicate key 'key57'"));
    /* equal keys in different objects are fine */
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("[{\"a\": 1}, {\"a\": 2, \"b\": {\"a\": 3}}]", &doc, &err), err);
    json_free(doc);
}

TEST(json_nesting_is_limited_to_max_depth) {
    char *text = malloc(2 * (JSON_MAX_DEPTH + 1) + 1);
    CHECK(text);
    for (int depth = JSON_MAX_DEPTH; depth <= JSON_MAX_DEPTH + 1; depth++) {
        for (int i = 0; i < depth; i++) {
            text[i] = '[';
            text[depth + i] = ']';
        }
        text[2 * depth] = '\0';
        json_doc *doc = NULL;
        k3_error err = {0};
        k3_status st = parse(text, &doc, &err);
        if (depth == JSON_MAX_DEPTH) {
            CHECK_OK(st, err);
            const json_value *v = json_root(doc);
            for (int i = 1; i < depth; i++)
                v = json_at(v, 0);
            CHECK_INT(json_type(v), JSON_ARRAY);
            CHECK_INT(json_len(v), 0);
            json_free(doc);
        } else {
            CHECK_ERROR(st, err, K3_ERR_FORMAT, "(byte 512): arrays and objects nested deeper than 512");
        }
    }
    free(text);
}

TEST(json_byte_order_mark_is_skipped) {
    json_doc *doc;
    k3_error err = {0};
    CHECK_OK(parse("\xef\xbb\xbf{\"a\": true}", &doc, &err), err);
    CHECK_INT(json_type(json_get(json_root(doc), "a")), JSON_BOOL);
    json_free(doc);
}

TEST(json_document_outlives_its_input_text) {
    const char *src = "{\"name\": \"layers.0.q_proj.weight\", \"n\": [1, 2]}";
    char *copy = malloc(strlen(src));
    CHECK(copy);
    memcpy(copy, src, strlen(src)); /* not NUL-terminated either */
    json_doc *doc;
    k3_error err = {0};
    k3_status st = json_parse(copy, strlen(src), NULL, &doc, &err);
    memset(copy, 'x', strlen(src));
    free(copy);
    CHECK_OK(st, err);
    CHECK_STR(json_string(json_get(json_root(doc), "name"), NULL), "layers.0.q_proj.weight");
    CHECK_STR(json_key(json_at(json_root(doc), 1), NULL), "n");
    json_free(doc);
}

TEST(json_large_object_keeps_member_order_and_every_key) {
    enum { N = 200000 };
    size_t cap = (size_t)N * 80 + 16, k = 0;
    char *text = malloc(cap);
    CHECK(text);
    k += (size_t)snprintf(text + k, cap - k, "{\"weight_map\": {");
    for (int i = 0; i < N; i++)
        k += (size_t)snprintf(text + k, cap - k, "%s\"model.layers.%d.experts.%d.w1.weight_packed\": \"s%d\"",
                              i ? ", " : "", i / 1000, i % 1000, i % 7);
    k += (size_t)snprintf(text + k, cap - k, "}}");
    json_doc *doc;
    k3_error err = {0};
    k3_status st = json_parse(text, k, NULL, &doc, &err);
    free(text);
    CHECK_OK(st, err);
    const json_value *wm = json_get(json_root(doc), "weight_map");
    CHECK_INT(json_len(wm), N);
    char want[96];
    for (int i = 0; i < N; i += 7919) {
        snprintf(want, sizeof want, "model.layers.%d.experts.%d.w1.weight_packed", i / 1000, i % 1000);
        CHECK_STR(json_key(json_at(wm, (size_t)i), NULL), want);
        snprintf(want, sizeof want, "s%d", i % 7);
        CHECK(json_string_is(json_at(wm, (size_t)i), want));
    }
    CHECK(json_string_is(json_get(wm, "model.layers.199.experts.999.w1.weight_packed"), "s2"));
    json_free(doc);
}

TEST(json_parse_file_reads_a_file_and_names_it_in_errors) {
    char dir[64], path[128];
    CHECK(tf_mkdtemp(dir));
    CHECK(tf_write_str(dir, "ok.json", "{\"x\": [1, 2, 3]}\n") == 0);
    CHECK(tf_write_str(dir, "bad.json", "{\"x\": [1, 2, 3}\n") == 0);
    json_doc *doc;
    k3_error err = {0};
    tf_path(path, sizeof path, dir, "ok.json");
    CHECK_OK(json_parse_file(path, &doc, &err), err);
    CHECK_INT(json_len(json_get(json_root(doc), "x")), 3);
    json_free(doc);
    tf_path(path, sizeof path, dir, "bad.json");
    CHECK_ERROR(json_parse_file(path, &doc, &err), err, K3_ERR_FORMAT,
                "bad.json: line 1, column 15 (byte 14): expected ',' or ']' after an array element, found '}'");
    CHECK(strncmp(err.detail, path, strlen(path)) == 0);
    tf_path(path, sizeof path, dir, "none.json");
    CHECK_ERROR(json_parse_file(path, &doc, &err), err, K3_ERR_IO, "none.json: cannot open: No such file");
    CHECK_ERROR(json_parse_file(dir, &doc, &err), err, K3_ERR_IO, "not a regular file");
    tf_rmtree(dir);
}

TEST(json_every_allocation_failure_is_reported_and_leaks_nothing) {
    /* > 16 members takes the hashed duplicate check; the long number takes the heap copy */
    char text[2048];
    size_t k = (size_t)snprintf(text, sizeof text, "{\"n\": 0.%0100d1", 0);
    for (int i = 0; i < 20; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, ", \"k%d\": [%d]", i, i);
    snprintf(text + k, sizeof text - k, "}");
    int failures = 0;
    for (long n = 1;; n++) {
        json_fault_alloc(n);
        json_doc *doc = NULL;
        k3_error err = {0};
        k3_status st = parse(text, &doc, &err);
        json_fault_alloc(0);
        if (st == K3_OK) {
            CHECK_INT(json_len(json_root(doc)), 21);
            json_free(doc);
            break;
        }
        CHECK_ERROR(st, err, K3_ERR_OUT_OF_MEMORY, "out of memory");
        CHECK(doc == NULL);
        failures++;
        CHECK(n < 100);
    }
    CHECK_INT(failures, 3); /* the document, the duplicate-check table, the number copy */
}
