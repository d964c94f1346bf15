/* test_safetensors.c - opening checkpoints written by the tests themselves into a mkdtemp
 * directory: single-file and indexed layouts read back in place (shapes, dtypes, data
 * pointers, file offsets, fds), and every inconsistency between headers, offsets, file
 * lengths and the index refused with its status and a detail naming file, tensor, field
 * and numbers. Also: every truncation of a valid shard, and every allocation failure. */
#include "safetensors.h"
#include "json.h"
#include "test_files.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---- fixture writers ------------------------------------------------------------------- */

typedef struct tdesc {
    const char *name;
    const char *dtype; /* as the header spells it */
    int ndim;
    int64_t shape[4];
} tdesc;

/* A growable string for headers. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static size_t dtype_bytes(const char *dt) {
    if (!strcmp(dt, "BF16") || !strcmp(dt, "F16") || !strcmp(dt, "I16"))
        return 2;
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32"))
        return 4;
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64"))
        return 8;
    return 1;
}

static uint64_t tensor_bytes(const tdesc *t) {
    uint64_t n = dtype_bytes(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= (uint64_t)t->shape[d];
    return n;
}

/* The byte at data-region offset k of a shard written with `seed`. */
static uint8_t pattern(uint64_t k, int seed) {
    return (uint8_t)((k * 7 + (uint64_t)seed) & 0xff);
}

/* Writes a shard file: 8-byte little-endian `declared` header length (the true length
 * when declared is UINT64_MAX), the header, then data_len pattern bytes. */
static int write_raw(const char *dir, const char *file, const char *header, uint64_t declared,
                     uint64_t data_len, int seed) {
    size_t hl = strlen(header);
    uint64_t len = declared == UINT64_MAX ? hl : declared;
    size_t total = 8 + hl + (size_t)data_len;
    uint8_t *buf = malloc(total);
    if (!buf)
        return -1;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(len >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (uint64_t k = 0; k < data_len; k++)
        buf[8 + hl + k] = pattern(k, seed);
    int rc = tf_write(dir, file, buf, total);
    free(buf);
    return rc;
}

/* Writes a valid shard with the tensors back to back in the order given and the header
 * padded with spaces to a multiple of 8, as the Python writer does. */
static int write_shard(const char *dir, const char *file, const tdesc *t, int n, int seed) {
    sbuf h = {0};
    uint64_t off = 0;
    sb_printf(&h, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < n; i++) {
        sb_printf(&h, ", \"%s\": {\"dtype\": \"%s\", \"shape\": [", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            sb_printf(&h, "%s%lld", d ? ", " : "", (long long)t[i].shape[d]);
        uint64_t end = off + tensor_bytes(&t[i]);
        sb_printf(&h, "], \"data_offsets\": [%llu, %llu]}", (unsigned long long)off,
                  (unsigned long long)end);
        off = end;
    }
    sb_printf(&h, "}");
    while (h.len % 8)
        sb_printf(&h, " ");
    int rc = write_raw(dir, file, h.s, UINT64_MAX, off, seed);
    free(h.s);
    return rc;
}

/* A one-tensor shard whose entry is given verbatim, with data_len bytes of data. */
static int write_entry(const char *dir, const char *name_and_entry, uint64_t data_len) {
    char header[1024];
    snprintf(header, sizeof header, "{%s}", name_and_entry);
    return write_raw(dir, "model.safetensors", header, UINT64_MAX, data_len, 0);
}

/* Opens dir expecting failure with `want` and `substr`; returns 1 if so. */
static int open_fails(const char *dir, k3_status want, const char *substr) {
    st_set *set = (st_set *)1;
    k3_error err = {0};
    k3_status st = st_open(dir, &set, &err);
    if (st != want || set != NULL || !strstr(err.detail, substr)) {
        fprintf(stderr, "  status %s, detail \"%s\"; want %s with \"%s\"\n", k3_status_name(st),
                err.detail, k3_status_name(want), substr);
        st_close(set);
        return 0;
    }
    return 1;
}

static const tdesc small[] = {
    {"a.weight", "BF16", 2, {4, 3}},
    {"b.bias", "F32", 1, {5}},
    {"c.scale", "U8", 2, {2, 3}},
    {"scalar", "F32", 0, {0}},
    {"empty", "F32", 2, {0, 7}},
};
enum { N_SMALL = sizeof small / sizeof small[0] };

/* ---- valid checkpoints ------------------------------------------------------------------ */

TEST(st_single_file_tensors_are_read_in_place_with_shape_dtype_and_offsets) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_shard(dir, "model.safetensors", small, N_SMALL, 3) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_STR(st_source(set), "model.safetensors");
    CHECK_STR(st_dir(set), dir);
    CHECK_INT(st_count(set), N_SMALL);
    CHECK_INT(st_shard_count(set), 1);
    const st_shard *sh = st_shard_at(set, 0);
    CHECK_STR(sh->file, "model.safetensors");
    CHECK_INT(sh->n_tensors, N_SMALL);
    CHECK_INT(sh->data_start % 8, 0);
    uint64_t off = 0;
    for (int i = 0; i < N_SMALL; i++) {
        const st_tensor *t = st_find(set, small[i].name);
        CHECK(t != NULL);
        CHECK(t == st_tensor_at(set, (size_t)i)); /* header order */
        CHECK_STR(t->name, small[i].name);
        CHECK_STR(st_dtype_name(t->dtype), small[i].dtype);
        CHECK_INT(t->ndim, small[i].ndim);
        for (int d = 0; d < t->ndim; d++)
            CHECK_INT(t->shape[d], small[i].shape[d]);
        CHECK_INT(t->nbytes, tensor_bytes(&small[i]));
        CHECK_INT(t->numel * st_dtype_size(t->dtype), t->nbytes);
        CHECK_INT(t->shard, 0);
        CHECK_INT(t->file_offset, sh->data_start + off);
        CHECK((const uint8_t *)t->data == sh->map + t->file_offset);
        const uint8_t *bytes = t->data;
        for (uint64_t k = 0; k < t->nbytes; k++)
            CHECK_INT(bytes[k], pattern(off + k, 3));
        /* the fd stays open for pread, and reads the same bytes as the mapping */
        uint8_t got[64];
        CHECK(t->nbytes <= sizeof got);
        CHECK_INT(pread(sh->fd, got, (size_t)t->nbytes, (off_t)t->file_offset), (long long)t->nbytes);
        CHECK(memcmp(got, t->data, (size_t)t->nbytes) == 0);
        off += t->nbytes;
    }
    CHECK_INT(st_find(set, "scalar")->numel, 1);
    CHECK_INT(st_find(set, "empty")->numel, 0);
    CHECK(st_find(set, "a.weigh") == NULL);
    CHECK(st_find(set, "") == NULL);
    CHECK(st_tensor_at(set, N_SMALL) == NULL);
    st_close(set);
    tf_rmtree(dir);
}

static const tdesc shard1[] = {
    {"language_model.model.embed_tokens.weight", "BF16", 2, {16, 8}},
    {"language_model.model.layers.0.input_layernorm.weight", "BF16", 1, {8}},
};
static const tdesc shard2[] = {
    {"language_model.model.layers.0.self_attn.A_log", "F32", 1, {4}},
    {"language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_packed", "U8", 2, {6, 16}},
    {"language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_scale", "U8", 2, {6, 1}},
};
static const tdesc shard3[] = {
    {"language_model.lm_head.weight", "BF16", 2, {16, 8}},
};
#define S1 "model-00001-of-00003.safetensors"
#define S2 "model-00002-of-00003.safetensors"
#define S3 "model-00003-of-00003.safetensors"

/* Writes the three shards and an index listing them (shard 2 first, to test ordering);
 * `extra` is spliced into the weight_map after the real entries. */
static int write_indexed(const char *dir, const char *extra) {
    if (write_shard(dir, S1, shard1, 2, 1) || write_shard(dir, S2, shard2, 3, 2) ||
        write_shard(dir, S3, shard3, 1, 3))
        return -1;
    sbuf ix = {0};
    sb_printf(&ix, "{\n  \"metadata\": {\"total_size\": 600},\n  \"weight_map\": {\n");
    for (int i = 0; i < 3; i++)
        sb_printf(&ix, "    \"%s\": \"" S2 "\",\n", shard2[i].name);
    for (int i = 0; i < 2; i++)
        sb_printf(&ix, "    \"%s\": \"" S1 "\",\n", shard1[i].name);
    sb_printf(&ix, "    \"%s\": \"" S3 "\"%s\n  }\n}\n", shard3[0].name, extra);
    int rc = tf_write_str(dir, "model.safetensors.index.json", ix.s);
    free(ix.s);
    return rc;
}

TEST(st_indexed_checkpoint_finds_every_tensor_in_the_shard_the_index_names) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_STR(st_source(set), "model.safetensors.index.json");
    CHECK_INT(st_count(set), 6);
    CHECK_INT(st_shard_count(set), 3);
    CHECK_STR(st_shard_at(set, 0)->file, S1); /* sorted by name, not by first mention */
    CHECK_STR(st_shard_at(set, 1)->file, S2);
    CHECK_STR(st_shard_at(set, 2)->file, S3);
    CHECK(st_shard_at(set, 3) == NULL);
    const tdesc *const shards[3] = {shard1, shard2, shard3};
    const int counts[3] = {2, 3, 1};
    for (int s = 0; s < 3; s++) {
        const st_shard *sh = st_shard_at(set, s);
        CHECK_INT(sh->n_tensors, counts[s]);
        CHECK(sh->fd >= 0);
        char want[128];
        tf_path(want, sizeof want, dir, sh->file);
        CHECK_STR(sh->path, want);
        uint64_t off = 0;
        for (int i = 0; i < counts[s]; i++) {
            const st_tensor *t = st_find(set, shards[s][i].name);
            CHECK(t != NULL);
            CHECK_INT(t->shard, s);
            CHECK_INT(t->file_offset, sh->data_start + off);
            if (t->nbytes)
                CHECK_INT(((const uint8_t *)t->data)[t->nbytes - 1], pattern(off + t->nbytes - 1, s + 1));
            off += t->nbytes;
        }
    }
    const st_tensor *t;
    const int64_t packed[2] = {6, 16};
    CHECK_OK(st_expect(set, shard2[1].name, ST_U8, 2, packed, &t, &err), err);
    CHECK(t == st_find(set, shard2[1].name));
    st_close(set);
    tf_rmtree(dir);
}

TEST(st_index_wins_when_both_layouts_exist) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    CHECK(write_shard(dir, "model.safetensors", small, N_SMALL, 0) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_STR(st_source(set), "model.safetensors.index.json");
    CHECK(st_find(set, "a.weight") == NULL);
    st_close(set);
    tf_rmtree(dir);
}

TEST(st_many_tensors_are_all_found_by_name) {
    enum { N = 30000, SHARDS = 3 };
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    tdesc *t = malloc(N * sizeof *t);
    char (*names)[96] = malloc(N * sizeof *names);
    CHECK(t && names);
    sbuf ix = {0};
    sb_printf(&ix, "{\"weight_map\": {");
    for (int s = 0; s < SHARDS; s++) {
        char file[64];
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, SHARDS);
        int first = s * (N / SHARDS);
        for (int i = first; i < first + N / SHARDS; i++) {
            snprintf(names[i], sizeof names[i], "language_model.model.layers.%d.block_sparse_moe.experts.%d.w%d.weight_packed",
                     i / 2688, i / 3 % 896, i % 3 + 1);
            t[i] = (tdesc){names[i], i % 2 ? "BF16" : "U8", 1, {i % 5 + 1}};
            sb_printf(&ix, "%s\"%s\": \"%s\"", i ? ", " : "", names[i], file);
        }
        CHECK(write_shard(dir, file, t + first, N / SHARDS, s) == 0);
    }
    sb_printf(&ix, "}}");
    CHECK(tf_write_str(dir, "model.safetensors.index.json", ix.s) == 0);
    free(ix.s);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_INT(st_count(set), N);
    for (int i = 0; i < N; i++) {
        const st_tensor *x = st_find(set, names[i]);
        CHECK(x != NULL);
        CHECK(x == st_tensor_at(set, (size_t)i));
        CHECK_INT(x->shard, i / (N / SHARDS));
        CHECK_INT(x->shape[0], i % 5 + 1);
    }
    CHECK(st_find(set, "language_model.model.layers.0.block_sparse_moe.experts.0.w4.weight_packed") == NULL);
    st_close(set);
    free(t);
    free(names);
    tf_rmtree(dir);
}

/* ---- one shard, bad ------------------------------------------------------------------ */

TEST(st_missing_checkpoint_is_an_io_error) {
    char dir[64], sub[128];
    CHECK(tf_mkdtemp(dir));
    CHECK(open_fails(dir, K3_ERR_IO, "neither model.safetensors.index.json nor model.safetensors exists"));
    tf_path(sub, sizeof sub, dir, "model.safetensors");
    CHECK(mkdir(sub, 0700) == 0); /* a directory where the file should be */
    CHECK(open_fails(dir, K3_ERR_IO, "model.safetensors: not a regular file"));
    rmdir(sub);
    tf_rmtree(dir);
}

TEST(st_shard_shorter_than_the_length_field_is_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(tf_write(dir, "model.safetensors", "\x10\0\0\0\0", 5) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors: file is 5 bytes, too short for the 8-byte header length"));
    tf_rmtree(dir);
}

TEST(st_header_length_past_the_end_of_the_file_is_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_raw(dir, "model.safetensors", "{}", 1000, 20, 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors: header length 1000 runs past the end of the file (30 bytes, so at most 22)"));
    CHECK(write_raw(dir, "model.safetensors", "{}", UINT64_MAX - 3, 0, 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "header length 18446744073709551612 runs past the end"));
    tf_rmtree(dir);
}

TEST(st_every_truncation_of_a_valid_shard_is_refused) {
    char dir[64], path[128];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_shard(dir, "model.safetensors", small, N_SMALL, 0) == 0);
    tf_path(path, sizeof path, dir, "model.safetensors");
    FILE *f = fopen(path, "rb");
    CHECK(f);
    uint8_t full[4096];
    size_t size = fread(full, 1, sizeof full, f);
    fclose(f);
    CHECK(size > 100 && size < sizeof full);
    size_t data_start = 8;
    for (int i = 0; i < 8; i++)
        data_start += (size_t)full[i] << (8 * i);
    for (size_t len = 0; len < size; len++) {
        CHECK(tf_write(dir, "model.safetensors", full, len) == 0);
        st_set *set = NULL;
        k3_error err = {0};
        k3_status st = st_open(dir, &set, &err);
        if (st != K3_ERR_FORMAT || set != NULL)
            fprintf(stderr, "  truncated to %zu of %zu bytes: %s\n", len, size, err.detail);
        CHECK_INT(st, K3_ERR_FORMAT);
        /* the cut lands in the length field, the header, or the data */
        CHECK(strstr(err.detail, len < 8            ? "too short"
                                 : len < data_start ? "runs past the end of the file"
                                                    : "run past the data region"));
    }
    tf_rmtree(dir);
}

TEST(st_malformed_header_json_is_refused_with_line_and_column) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_raw(dir, "model.safetensors", "{\"a\": {\"dtype\": \"F32\",\n \"shape\" [1]}}", UINT64_MAX, 4, 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors header: line 2, column 10 (byte 32): expected ':' after an object key"));
    CHECK(write_raw(dir, "model.safetensors", "[1, 2]  ", UINT64_MAX, 0, 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors: the header is JSON array, expected an object"));
    CHECK(write_entry(dir, "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                           "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}", 8) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "duplicate key 'a'"));
    tf_rmtree(dir);
}

TEST(st_offsets_outside_the_data_region_or_reversed_are_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [99999999], \"data_offsets\": [0, 99999999]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors: tensor 'x' data_offsets [0, 99999999] run past the data region (24 bytes)"));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [-4], \"data_offsets\": [8, 4]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' shape[0] is -4, expected a non-negative integer"));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 4]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' data_offsets [8, 4] end before they begin"));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [-1, 3]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' data_offsets [-1, 3] are not non-negative integers"));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4, 8]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' data_offsets is an array of other than 2 entries, expected [begin, end]"));
    CHECK(write_entry(dir, "\"x\": {\"dtype\": \"U8\", \"shape\": [4]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' data_offsets is missing"));
    tf_rmtree(dir);
}

TEST(st_byte_size_must_equal_shape_times_dtype_size) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 8]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors: tensor 'w' data_offsets [0, 8] hold 8 bytes, but shape [2, 3] of F32 needs 24"));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"BF16\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'w' shape [4294967296, 4294967296] of BF16 is 2^64 bytes or more"));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"BF16\", \"shape\": [4294967296, 2147483648], \"data_offsets\": [0, 8]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "of BF16 is 2^64 bytes or more")); /* elements fit, bytes do not */
    /* a zero dimension makes any other size fine */
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"BF16\", \"shape\": [0, 4294967296, 4294967296], \"data_offsets\": [4, 4]}", 24) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_INT(st_find(set, "w")->nbytes, 0);
    st_close(set);
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"U8\", \"shape\": [1, 1, 1, 1, 1, 1, 1, 1, 1], \"data_offsets\": [0, 1]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'w' shape has 9 dimensions, more than 8"));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"U8\", \"shape\": [2.5], \"data_offsets\": [0, 1]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'w' shape[0] is 2.5, expected a non-negative integer"));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"U8\", \"shape\": [\"2\"], \"data_offsets\": [0, 1]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'w' shape[0] is a string, expected a non-negative integer"));
    CHECK(write_entry(dir, "\"w\": {\"dtype\": \"U8\", \"shape\": 2, \"data_offsets\": [0, 1]}", 24) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'w' shape is number, expected an array"));
    tf_rmtree(dir);
}

TEST(st_overlapping_tensors_are_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_entry(dir, "\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
                           "\"c\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]}, "
                           "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}", 32) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors: tensors 'a' data_offsets [0, 16] and 'b' data_offsets [8, 24] overlap"));
    /* one tensor inside another that ends later than the one between them */
    CHECK(write_entry(dir, "\"big\": {\"dtype\": \"U8\", \"shape\": [32], \"data_offsets\": [0, 32]}, "
                           "\"s1\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [2, 4]}", 32) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensors 'big' data_offsets [0, 32] and 's1' data_offsets [2, 4] overlap"));
    /* touching tensors, gaps, and empty tensors anywhere are fine */
    CHECK(write_entry(dir, "\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
                           "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}, "
                           "\"e\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [6, 6]}, "
                           "\"c\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [12, 16]}", 32) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_INT(st_count(set), 4);
    st_close(set);
    tf_rmtree(dir);
}

TEST(st_unknown_or_sub_byte_dtype_is_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_entry(dir, "\"q\": {\"dtype\": \"Q4_K\", \"shape\": [4], \"data_offsets\": [0, 4]}", 4) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors: tensor 'q' has unknown dtype 'Q4_K'"));
    CHECK(write_entry(dir, "\"q\": {\"dtype\": \"F4\", \"shape\": [8], \"data_offsets\": [0, 4]}", 4) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'q' has dtype F4, a sub-byte type this engine does not support"));
    CHECK(write_entry(dir, "\"q\": {\"dtype\": \"bf16\", \"shape\": [2], \"data_offsets\": [0, 4]}", 4) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "unknown dtype 'bf16'")); /* the format is case-sensitive */
    CHECK(write_entry(dir, "\"q\": {\"dtype\": 16, \"shape\": [2], \"data_offsets\": [0, 4]}", 4) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'q' dtype is number, expected a string"));
    CHECK(write_entry(dir, "\"q\": {\"shape\": [2], \"data_offsets\": [0, 4]}", 4) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'q' dtype is missing, expected a string"));
    tf_rmtree(dir);
}

TEST(st_every_dtype_has_its_size_and_name) {
    static const char *names[ST_DTYPE_COUNT] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                                "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
                                                "I64", "U64", "F64"};
    static const int sizes[ST_DTYPE_COUNT] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        CHECK_STR(st_dtype_name((st_dtype)d), names[d]);
        CHECK_INT(st_dtype_size((st_dtype)d), sizes[d]);
    }
    CHECK_STR(st_dtype_name(ST_DTYPE_COUNT), "?");
    CHECK_INT(st_dtype_size(ST_DTYPE_COUNT), 0);
    /* each name is accepted in a header */
    char dir[64], entry[256];
    CHECK(tf_mkdtemp(dir));
    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        snprintf(entry, sizeof entry, "\"t\": {\"dtype\": \"%s\", \"shape\": [3], \"data_offsets\": [0, %d]}",
                 names[d], 3 * sizes[d]);
        CHECK(write_entry(dir, entry, 24) == 0);
        st_set *set;
        k3_error err = {0};
        CHECK_OK(st_open(dir, &set, &err), err);
        CHECK_INT(st_find(set, "t")->dtype, d);
        st_close(set);
    }
    tf_rmtree(dir);
}

TEST(st_entries_and_metadata_of_the_wrong_type_are_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_entry(dir, "\"x\": 5", 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "tensor 'x' is JSON number, expected an object with dtype, shape and data_offsets"));
    CHECK(write_entry(dir, "\"__metadata__\": {\"format\": \"pt\", \"n\": 3}", 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors: __metadata__ 'n' is JSON number, expected a string"));
    CHECK(write_entry(dir, "\"__metadata__\": [1]", 0) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "__metadata__ is JSON array, expected an object"));
    CHECK(write_entry(dir, "\"\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}", 1) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "a tensor name is empty or holds a NUL byte"));
    CHECK(write_entry(dir, "\"a\\u0000b\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}", 1) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "a tensor name is empty or holds a NUL byte"));
    /* metadata alone, no tensors: an empty but valid set */
    CHECK(write_entry(dir, "\"__metadata__\": {\"format\": \"pt\"}", 0) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    CHECK_INT(st_count(set), 0);
    CHECK(st_find(set, "x") == NULL);
    st_close(set);
    tf_rmtree(dir);
}

/* ---- the index, bad ---------------------------------------------------------------------- */

TEST(st_index_naming_a_missing_shard_is_an_io_error_naming_both) {
    char dir[64], path[128];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    tf_path(path, sizeof path, dir, S3);
    CHECK(unlink(path) == 0);
    CHECK(open_fails(dir, K3_ERR_IO,
                     "model.safetensors.index.json names shard " S3 " (for 'language_model.lm_head.weight'): "));
    CHECK(open_fails(dir, K3_ERR_IO, S3 ": cannot open: No such file or directory"));
    tf_rmtree(dir);
}

TEST(st_index_naming_a_tensor_absent_from_its_shard_is_a_tensor_error) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, ",\n    \"language_model.model.norm.weight\": \"" S1 "\"") == 0);
    CHECK(open_fails(dir, K3_ERR_TENSOR,
                     "missing tensor 'language_model.model.norm.weight': model.safetensors.index.json "
                     "maps it to " S1 ", which does not contain it"));
    tf_rmtree(dir);
}

TEST(st_index_mapping_a_tensor_to_the_wrong_shard_is_a_tensor_error) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    /* rewrite the index with lm_head mapped to shard 1 */
    sbuf ix = {0};
    sb_printf(&ix, "{\"weight_map\": {");
    for (int i = 0; i < 3; i++)
        sb_printf(&ix, "\"%s\": \"" S2 "\", ", shard2[i].name);
    for (int i = 0; i < 2; i++)
        sb_printf(&ix, "\"%s\": \"" S1 "\", ", shard1[i].name);
    sb_printf(&ix, "\"%s\": \"" S1 "\", \"x\": \"" S3 "\"}}", shard3[0].name);
    CHECK(tf_write_str(dir, "model.safetensors.index.json", ix.s) == 0);
    free(ix.s);
    CHECK(open_fails(dir, K3_ERR_TENSOR,
                     "tensor 'language_model.lm_head.weight' is in " S3
                     ", but model.safetensors.index.json maps it to " S1));
    tf_rmtree(dir);
}

TEST(st_tensor_in_a_shard_but_not_in_the_index_is_a_tensor_error) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    const tdesc extra[] = {shard3[0], {"language_model.model.norm.weight", "BF16", 1, {8}}};
    CHECK(write_shard(dir, S3, extra, 2, 3) == 0);
    CHECK(open_fails(dir, K3_ERR_TENSOR,
                     "tensor 'language_model.model.norm.weight' in " S3
                     " is not named by model.safetensors.index.json"));
    tf_rmtree(dir);
}

TEST(st_same_tensor_in_two_shards_is_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    const tdesc again[] = {shard3[0], shard1[0]};
    CHECK(write_shard(dir, S3, again, 2, 3) == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "tensor 'language_model.model.embed_tokens.weight' appears in both " S1 " and " S3));
    tf_rmtree(dir);
}

TEST(st_index_of_the_wrong_shape_is_refused) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_shard(dir, S1, shard1, 2, 1) == 0);
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "{\"metadata\": {}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors.index.json: weight_map is missing, expected an object"));
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "{\"weight_map\": {}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors.index.json: weight_map is empty"));
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "[]") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "model.safetensors.index.json: the top level is JSON array"));
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": 7}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT, "weight_map['a'] is JSON number, expected a shard file name"));
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"../" S1 "\"}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "weight_map['a'] is '../" S1 "', which is not a file name in the model directory"));
    CHECK(tf_write_str(dir, "model.safetensors.index.json", "{\n  \"weight_map\": {\n    \"a\": \"" S1 "\"\n    \"b\": 1}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model.safetensors.index.json: line 4, column 5 (byte 68): expected ',' or '}' after an object member"));
    tf_rmtree(dir);
}

TEST(st_errors_name_the_shard_the_tensor_and_the_numbers) {
    /* the shape of the message the engine's users see for a broken shard */
    char dir[64], header[512];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_shard(dir, "model-00001-of-000003.safetensors", shard1, 2, 1) == 0);
    CHECK(write_shard(dir, "model-00003-of-000003.safetensors", shard3, 1, 3) == 0);
    snprintf(header, sizeof header,
             "{\"language_model.model.layers.3.self_attn.q_proj.weight\": {\"dtype\": \"BF16\", "
             "\"shape\": [64, 48], \"data_offsets\": [1024, 99999999]}}");
    CHECK(write_raw(dir, "model-00002-of-000003.safetensors", header, UINT64_MAX, 5120, 0) == 0);
    CHECK(tf_write_str(dir, "model.safetensors.index.json",
                       "{\"weight_map\": {"
                       "\"language_model.model.embed_tokens.weight\": \"model-00001-of-000003.safetensors\", "
                       "\"language_model.model.layers.0.input_layernorm.weight\": \"model-00001-of-000003.safetensors\", "
                       "\"language_model.model.layers.3.self_attn.q_proj.weight\": \"model-00002-of-000003.safetensors\", "
                       "\"language_model.lm_head.weight\": \"model-00003-of-000003.safetensors\"}}") == 0);
    CHECK(open_fails(dir, K3_ERR_FORMAT,
                     "model-00002-of-000003.safetensors: tensor 'language_model.model.layers.3.self_attn.q_proj.weight' "
                     "data_offsets [1024, 99999999] run past the data region (5120 bytes)"));
    tf_rmtree(dir);
}

/* ---- the checking helpers ---------------------------------------------------------------- */

TEST(st_require_check_dtype_and_check_shape_give_uniform_errors) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    const tdesc w[] = {{"w", "F32", 2, {64, 32}}, {"odd", "U8", 1, {1}}, {"f", "F32", 1, {1}}};
    CHECK(write_shard(dir, "model.safetensors", w, 3, 0) == 0);
    st_set *set;
    k3_error err = {0};
    CHECK_OK(st_open(dir, &set, &err), err);
    const st_tensor *t = (const st_tensor *)1;
    char want[256];
    snprintf(want, sizeof want, "missing tensor 'nope' (looked in %s/model.safetensors)", dir);
    CHECK_ERROR(st_require(set, "nope", &t, &err), err, K3_ERR_TENSOR, want);
    CHECK(t == NULL);
    CHECK_OK(st_require(set, "w", &t, &err), err);
    CHECK_ERROR(st_check_dtype(t, ST_BF16, &err), err, K3_ERR_TENSOR, "tensor 'w': dtype F32, expected BF16");
    CHECK_OK(st_check_dtype(t, ST_F32, &err), err);
    const int64_t s48[2] = {64, 48}, s_any[2] = {-1, 32}, s3[3] = {64, 32, 1};
    CHECK_ERROR(st_check_shape(t, 2, s48, &err), err, K3_ERR_TENSOR, "tensor 'w': shape [64, 32], expected [64, 48]");
    CHECK_ERROR(st_check_shape(t, 3, s3, &err), err, K3_ERR_TENSOR, "shape [64, 32], expected [64, 32, 1]");
    CHECK_OK(st_check_shape(t, 2, s_any, &err), err);
    const int64_t s_any_bad[2] = {-1, 31};
    CHECK_ERROR(st_check_shape(t, 2, s_any_bad, &err), err, K3_ERR_TENSOR, "expected [?, 31]");
    CHECK_ERROR(st_expect(set, "w", ST_F32, 2, s48, &t, &err), err, K3_ERR_TENSOR, "expected [64, 48]");
    CHECK(t == NULL);
    CHECK_ERROR(st_expect(set, "w", ST_U8, 2, s48, &t, &err), err, K3_ERR_TENSOR, "dtype F32, expected U8");
    /* the F32 after a 1-byte tensor sits at an odd address */
    CHECK(st_is_aligned(st_find(set, "w")));
    CHECK(st_is_aligned(st_find(set, "odd")));
    CHECK(!st_is_aligned(st_find(set, "f")));
    st_close(set);

    CHECK(write_indexed(dir, "") == 0);
    CHECK_OK(st_open(dir, &set, &err), err);
    snprintf(want, sizeof want, "missing tensor 'nope' (looked in %s/model.safetensors.index.json and its 3 shards)", dir);
    CHECK_ERROR(st_require(set, "nope", NULL, &err), err, K3_ERR_TENSOR, want);
    st_close(set);
    tf_rmtree(dir);
}

/* ---- allocation failures ---------------------------------------------------------------- */

TEST(st_every_allocation_failure_is_reported_and_leaks_nothing) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(write_indexed(dir, "") == 0);
    for (int which = 0; which < 2; which++) { /* the loader's own allocations, then JSON's */
        int failures = 0;
        for (long n = 1;; n++) {
            if (which == 0)
                st_fault_alloc(n);
            else
                json_fault_alloc(n);
            st_set *set = (st_set *)1;
            k3_error err = {0};
            k3_status st = st_open(dir, &set, &err);
            st_fault_alloc(0);
            json_fault_alloc(0);
            if (st == K3_OK) {
                CHECK_INT(st_count(set), 6);
                st_close(set);
                break;
            }
            CHECK_ERROR(st, err, K3_ERR_OUT_OF_MEMORY, "out of memory");
            CHECK(set == NULL);
            failures++;
            CHECK(n < 200);
        }
        CHECK(failures >= (which == 0 ? 10 : 4));
    }
    tf_rmtree(dir);
}

/* ---- a shard that changes after it was opened --------------------------------------------- */

TEST(st_check_unchanged_names_a_shard_truncated_overwritten_replaced_or_removed) {
    enum { TRUNCATED, OVERWRITTEN, REPLACED, REMOVED, KINDS };
    for (int kind = 0; kind < KINDS; kind++) {
        char dir[64], path[128];
        CHECK(tf_mkdtemp(dir));
        CHECK(write_shard(dir, "model.safetensors", small, N_SMALL, 3) == 0);
        tf_path(path, sizeof path, dir, "model.safetensors");
        st_set *set;
        k3_error err = {0};
        CHECK_OK(st_open(dir, &set, &err), err);
        CHECK_OK(st_check_unchanged(set, &err), err);
        const st_shard *sh = st_shard_at(set, 0);
        const unsigned long long size = (unsigned long long)sh->size;
        char want[256];
        if (kind == TRUNCATED) {
            CHECK(truncate(path, 100) == 0);
            snprintf(want, sizeof want, "%llu bytes, modified at", size);
        } else if (kind == OVERWRITTEN) {
            /* The same size; the modification time set apart from the open's, as a write
             * in the same clock tick could leave it. */
            const int fd = open(path, O_WRONLY);
            CHECK(fd >= 0);
            CHECK(pwrite(fd, "zz", 2, (off_t)size - 2) == 2);
            const struct timespec later[2] = {{sh->mtime_ns / 1000000000 + 5, 0}, {sh->mtime_ns / 1000000000 + 5, 0}};
            CHECK(futimens(fd, later) == 0);
            close(fd);
            snprintf(want, sizeof want, "now): the model is no longer the one loaded");
        } else if (kind == REPLACED) {
            CHECK(unlink(path) == 0);
            CHECK(write_shard(dir, "model.safetensors", small, N_SMALL, 4) == 0);
            snprintf(want, sizeof want, "another file has taken its name");
        } else {
            CHECK(unlink(path) == 0);
            snprintf(want, sizeof want, "it cannot be read now (No such file or directory");
        }
        const k3_status s = st_check_unchanged(set, &err);
        CHECK_ERROR(s, err, K3_ERR_IO, want);
        CHECK_ERROR(s, err, K3_ERR_IO, path);
        if (kind == TRUNCATED)
            CHECK_ERROR(s, err, K3_ERR_IO, " 100 bytes, modified at");
        st_close(set);
        tf_rmtree(dir);
    }
}
