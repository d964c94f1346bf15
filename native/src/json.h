/* json.h - a strict RFC 8259 JSON parser into a read-only DOM, for config.json,
 * tokenizer_config.json, the safetensors index and shard headers. It does not write JSON,
 * keep comments, accept trailing commas, NaN/Infinity or single quotes, or stream.
 *
 * A document is one allocation: every value and every decoded string lives in it, so
 * json_free() releases all of them and nothing points back into the input text.
 *
 * Strictness: the grammar of RFC 8259 exactly (one root value of any type, whitespace is
 * space, tab, LF, CR); strings must be valid UTF-8 with control characters escaped;
 * \uXXXX escapes are decoded to UTF-8 and a surrogate pair to one code point, a lone
 * surrogate is an error; a number that overflows a double is an error; an object with two
 * equal keys is an error. A leading UTF-8 byte order mark is skipped (RFC 8259 §8.1
 * allows it). Nesting deeper than JSON_MAX_DEPTH is an error, so hostile input cannot
 * exhaust the stack.
 *
 * Every accessor accepts NULL and answers as for a missing value, so lookups chain:
 * json_get(json_get(root, "text_config"), "hidden_size").
 *
 * Threading: a parsed document is immutable; any number of threads may read it. */
#ifndef K3_JSON_H
#define K3_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Arrays and objects nested deeper than this are refused (K3_ERR_FORMAT). */
#define JSON_MAX_DEPTH 512

typedef enum json_kind {
    JSON_NONE = 0, /* only returned for a NULL value: a missing key or index */
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_kind;

typedef struct json_doc json_doc;     /* owns every value below; freed by json_free() */
typedef struct json_value json_value; /* valid while its document lives */

/* Parses len bytes of text (no terminator needed; an embedded NUL byte is an error).
 * `name` (may be NULL) starts every error detail, e.g. "config.json: line 3, column 7
 * (byte 45): expected ',' or '}' after an object member, found ']'". Lines and columns
 * count from 1, columns in characters (UTF-8 sequences), bytes from 0.
 * On success *out owns the document; on failure *out is NULL and err says why:
 * K3_ERR_FORMAT for bad input, K3_ERR_OUT_OF_MEMORY. */
k3_status json_parse(const char *text, size_t len, const char *name, json_doc **out,
                     k3_error *err);

/* Parses a whole file (mapped read-only for the duration of the call, not copied); error
 * details start with the path. K3_ERR_IO when the file cannot be opened or mapped,
 * otherwise as json_parse. */
k3_status json_parse_file(const char *path, json_doc **out, k3_error *err);

/* Releases the document and every value in it. NULL is a no-op. */
void json_free(json_doc *doc);

/* The root value (never NULL for a parsed document). */
const json_value *json_root(const json_doc *doc);

json_kind json_type(const json_value *v);

/* "null", "boolean", "number", "string", "array", "object"; "missing" for JSON_NONE. */
const char *json_type_name(json_kind kind);

/* Element count of an array, member count of an object, byte length of a string (without
 * the terminator); 0 for anything else. */
size_t json_len(const json_value *v);

/* The value of member `key` of an object, or NULL if v is not an object or has no such
 * member. Linear in the member count: iterate huge objects with json_at()/json_key(). */
const json_value *json_get(const json_value *obj, const char *key);

/* Element i of an array, or the value of member i of an object (in document order);
 * NULL when i >= json_len(v) or v is neither. */
const json_value *json_at(const json_value *v, size_t i);

/* The key of a value reached through json_at() on an object (NUL-terminated; *len, when
 * len is not NULL, gets its byte length, which matters only if the key holds "\u0000");
 * NULL for a value that is not an object member. */
const char *json_key(const json_value *member, size_t *len);

/* The decoded UTF-8 bytes of a string, NUL-terminated, with the byte length in *len when
 * len is not NULL; NULL if v is not a string. */
const char *json_string(const json_value *v, size_t *len);

/* True iff v is a string equal to s. */
bool json_string_is(const json_value *v, const char *s);

/* True and *out set iff v is a number; an integer token beyond 2^53 reads rounded. */
bool json_number(const json_value *v, double *out);

/* True iff v is a number with an exact integer value that fits int64: an integer token
 * (e.g. 7168, -0, 9223372036854775807) or a number whose double value is an integer of
 * magnitude <= 2^53 (7168.0, 7.168e3). */
bool json_is_integral(const json_value *v);

/* True and *out set iff json_is_integral(v) and lo <= value <= hi. Callers that need to
 * say why it failed look at json_type() / json_is_integral(). */
bool json_int(const json_value *v, int64_t lo, int64_t hi, int64_t *out);

/* True and *out set iff v is true or false. */
bool json_bool(const json_value *v, bool *out);

bool json_is_null(const json_value *v);

/* Tests only, not thread-safe: make the n-th allocation from now fail (1 = the next one);
 * 0 turns injection off. Lets tests walk every out-of-memory path. */
void json_fault_alloc(long n);

#endif
