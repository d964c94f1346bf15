/* fuzz_safetensors.c - the safetensors harness: an archive (fuzz.h) of a checkpoint folder's
 * files, model.safetensors or an index with two shards, written to a temporary folder and
 * opened with st_open (header length, header JSON, dtypes, shapes, offsets, overlaps, the
 * index against the shards); for a set it accepts, every tensor is looked up by name and its
 * bytes must lie inside its shard. The structure-aware mutator edits a shard's header JSON
 * and keeps its length prefix right, or sets the prefix to an interesting value. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "safetensors.h"

static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                    "model-00002-of-00002.safetensors"};
enum { N_NAMES = 4 };

static const char *const dictionary[] = {"\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"BF16\"",
                                         "\"F32\"", "\"U8\"", "\"F4\"", "\"F8_E8M0\"", "\"weight_map\"",
                                         "\"model-00001-of-00002.safetensors\"", "[0, 0]", "[18446744073709551615]", NULL};

static void run(const uint8_t *data, size_t n) {
    if (fuzz_archive_unpack(data, n, names, N_NAMES))
        return;
    st_set *set = NULL;
    k3_error err;
    if (st_open(fuzz_tmp(), &set, &err) != K3_OK) {
        if (set || !err.detail[0])
            fuzz_fail("a refused checkpoint left a set or no detail");
        return;
    }
    for (size_t i = 0; i < st_count(set); i++) {
        const st_tensor *t = st_tensor_at(set, i);
        if (st_find(set, t->name) != t)
            fuzz_fail("tensor '%s' is not found by its own name", t->name);
        const st_shard *sh = st_shard_at(set, t->shard);
        if (!sh || t->file_offset < sh->data_start || t->file_offset + t->nbytes > sh->size ||
            t->nbytes != t->numel * st_dtype_size(t->dtype))
            fuzz_fail("tensor '%s': %llu bytes at %llu in a %llu-byte shard", t->name, (unsigned long long)t->nbytes,
                      (unsigned long long)t->file_offset, sh ? (unsigned long long)sh->size : 0ull);
        /* Reading every byte is what ASan checks: the mapping must hold them. */
        unsigned sum = 0;
        for (uint64_t b = 0; b < t->nbytes; b++)
            sum += ((const uint8_t *)t->data)[b];
        (void)sum;
        const int64_t any[ST_MAX_DIMS] = {-1, -1, -1, -1, -1, -1, -1, -1};
        st_check_shape(t, t->ndim, any, &err);
    }
    st_find(set, "missing.weight");
    st_close(set);
}

/* A shard: its header JSON edited (the length prefix follows), or the prefix itself set. */
static size_t edit_file(uint8_t *d, size_t n, size_t cap, uint8_t id, fuzz_rng *r) {
    if (id % N_NAMES == 1)
        return fuzz_mutate_json(d, n, cap, r);
    uint64_t header = 0;
    for (int k = 0; k < 8 && (size_t)k < n; k++)
        header |= (uint64_t)d[k] << (8 * k);
    if (n >= 8 && header <= n - 8 && fuzz_below(r, 4)) {
        uint8_t *json = malloc(cap);
        if (!json)
            return n;
        memcpy(json, d + 8, header);
        const size_t data_n = n - 8 - header;
        const size_t room = cap > 8 + data_n ? cap - 8 - data_n : 0;
        const size_t new_header = header <= room ? fuzz_mutate_json(json, header, room, r) : header;
        if (8 + new_header + data_n <= cap) {
            memmove(d + 8 + new_header, d + 8 + header, data_n);
            memcpy(d + 8, json, new_header);
            for (int k = 0; k < 8; k++)
                d[k] = (uint8_t)((uint64_t)new_header >> (8 * k));
            n = 8 + new_header + data_n;
        }
        free(json);
        return n;
    }
    if (n >= 8 && fuzz_below(r, 2)) {
        static const uint64_t lengths[] = {0, 1, 2, 7, 8, 0xffffffffull, 0x100000000ull, 0x7fffffffffffffffull,
                                           0xffffffffffffffffull, 100000000};
        const uint64_t v = fuzz_below(r, 3) ? header + fuzz_below(r, 17) - 8 : lengths[fuzz_below(r, 10)];
        for (int k = 0; k < 8; k++)
            d[k] = (uint8_t)(v >> (8 * k));
        return n;
    }
    return fuzz_mutate_bytes(d, n, cap, r, dictionary, NULL, 0);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) {
    return fuzz_mutate_archive(d, n, cap, r, N_NAMES, edit_file);
}

const fuzz_harness fuzz_safetensors = {"safetensors", "an archive of shards and index -> st_open, every tensor looked up and read",
                                       NULL, run, mutate, dictionary, 256 << 10};
