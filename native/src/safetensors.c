/* safetensors.c - opening and validating a safetensors checkpoint (see safetensors.h).
 *
 * Memory: tensor records live in one array, names and shapes in a bump arena of large
 * blocks, and lookup is an open-addressing table, at most half full, whose slots hold a
 * tensor index and half of its name's hash, so a probe touches a name only when the
 * hashes agree. For the released checkpoint (~500k tensors, 96 shards) that is about
 * 90 MB of metadata. The index and each shard header are parsed into a JSON document that
 * is freed as soon as its contents are copied out, so the transient peak is the index's
 * document (about twice the index file) plus one header's. */
#include "safetensors.h"

#include "fault.h"
#include "hash.h"
#include "io.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(size_t) == 8 && sizeof(off_t) == 8,
               "safetensors.c needs 64-bit sizes and file offsets");

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_ARENA_BLOCK ((size_t)1 << 20)

static const struct {
    const char *name;
    size_t size;
} dtype_table[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},           [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E8M0] = {"F8_E8M0", 1},
    [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2},         [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4},         [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},         [ST_I64] = {"I64", 8},         [ST_U64] = {"U64", 8},
    [ST_F64] = {"F64", 8},
};

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    unsigned char data[];
} arena_block;

struct st_set {
    char *dir;
    const char *source; /* ST_INDEX_NAME or ST_SINGLE_NAME */
    st_shard *shards;
    int n_shards;
    st_tensor *tensors; /* (n_tensors) */
    size_t n_tensors, cap_tensors;
    uint64_t *table; /* (table_cap) high 32 bits of the name's hash | tensor index + 1; 0 = empty */
    size_t table_cap;
    arena_block *arena;
};

/* ---- allocation (with the test hook) ------------------------------------------------ */

static long fault_countdown;

void st_fault_alloc(long n) {
    fault_countdown = n;
}

static bool fault_now(void) {
    return fault_countdown > 0 && --fault_countdown == 0;
}

static void *st_malloc(size_t size) {
    return fault_now() ? NULL : malloc(size ? size : 1);
}

static void *st_realloc(void *p, size_t size) {
    return fault_now() ? NULL : realloc(p, size ? size : 1);
}

static k3_status oom(k3_error *err, const char *what) {
    return error_set(err, K3_ERR_OUT_OF_MEMORY, "safetensors: out of memory for %s", what);
}

/* 8-byte aligned storage that lives until st_close(). */
static void *arena_alloc(st_set *set, size_t size) {
    size = (size + 7) & ~(size_t)7;
    arena_block *b = set->arena;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > ST_ARENA_BLOCK ? size : ST_ARENA_BLOCK;
        b = st_malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = set->arena;
        b->used = 0;
        b->cap = cap;
        set->arena = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

static char *arena_join(st_set *set, const char *a, const char *sep, const char *b) {
    size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
    char *s = arena_alloc(set, la + ls + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, sep, ls);
        memcpy(s + la + ls, b, lb + 1);
    }
    return s;
}

/* ---- names -------------------------------------------------------------------------- */

const char *st_dtype_name(st_dtype dtype) {
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

size_t st_dtype_size(st_dtype dtype) {
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

static int dtype_from_name(const char *s) {
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (strcmp(s, dtype_table[d].name) == 0)
            return d;
    return -1;
}

/* "[64, 32]" into buf; -1 prints as '?'. */
static const char *format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, size - k, "[");
    for (int i = 0; i < ndim && k < size; i++)
        k += shape[i] < 0 ? (size_t)snprintf(buf + k, size - k, "%s?", i ? ", " : "")
                          : (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                                             (long long)shape[i]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
    return buf;
}

/* ---- one shard ------------------------------------------------------------------------ */

/* Describes a JSON value that should have been a non-negative integer. */
static const char *describe_number(const json_value *v, char *buf, size_t size) {
    double d;
    if (json_number(v, &d))
        snprintf(buf, size, "%.17g", d);
    else
        snprintf(buf, size, "a %s", json_type_name(json_type(v)));
    return buf;
}

static k3_status check_metadata(const st_shard *sh, const json_value *meta, k3_error *err) {
    if (json_type(meta) != JSON_OBJECT)
        return error_set(err, K3_ERR_FORMAT, "%s: __metadata__ is JSON %s, expected an object",
                         sh->file, json_type_name(json_type(meta)));
    for (size_t i = 0; i < json_len(meta); i++) {
        const json_value *m = json_at(meta, i);
        if (json_type(m) != JSON_STRING)
            return error_set(err, K3_ERR_FORMAT, "%s: __metadata__ '%.200s' is JSON %s, expected a string",
                             sh->file, json_key(m, NULL), json_type_name(json_type(m)));
    }
    return K3_OK;
}

/* Fills *t from one header entry, with every check that involves only this tensor. */
static k3_status parse_entry(st_set *set, const st_shard *sh, int shard, const char *name,
                             const json_value *v, uint64_t data_len, st_tensor *t, k3_error *err) {
    const char *f = sh->file;
    char buf[64], buf2[64];
    if (json_type(v) != JSON_OBJECT)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: tensor '%s' is JSON %s, expected an object with dtype, shape and "
                         "data_offsets", f, name, json_type_name(json_type(v)));

    const json_value *dt = json_get(v, "dtype");
    const char *dts = json_string(dt, NULL);
    if (!dts)
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' dtype is %s, expected a string", f,
                         name, dt ? json_type_name(json_type(dt)) : "missing");
    int dtype = dtype_from_name(dts);
    if (dtype < 0) {
        if (strcmp(dts, "F4") == 0 || strcmp(dts, "F6_E2M3") == 0 || strcmp(dts, "F6_E3M2") == 0)
            return error_set(err, K3_ERR_FORMAT,
                             "%s: tensor '%s' has dtype %s, a sub-byte type this engine does not "
                             "support", f, name, dts);
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' has unknown dtype '%.40s'", f, name,
                         dts);
    }

    const json_value *shape = json_get(v, "shape");
    if (json_type(shape) != JSON_ARRAY)
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' shape is %s, expected an array", f,
                         name, shape ? json_type_name(json_type(shape)) : "missing");
    size_t ndim = json_len(shape);
    if (ndim > ST_MAX_DIMS)
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' shape has %zu dimensions, more than %d",
                         f, name, ndim, ST_MAX_DIMS);
    int64_t dims[ST_MAX_DIMS];
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < ndim; i++) {
        const json_value *d = json_at(shape, i);
        if (!json_int(d, 0, INT64_MAX, &dims[i]))
            return error_set(err, K3_ERR_FORMAT,
                             "%s: tensor '%s' shape[%zu] is %s, expected a non-negative integer", f,
                             name, i, describe_number(d, buf, sizeof buf));
        if (dims[i] != 0 && numel > UINT64_MAX / (uint64_t)dims[i])
            overflow = true;
        else
            numel *= (uint64_t)dims[i];
    }
    const uint64_t esize = dtype_table[dtype].size;
    char sbuf[256];
    /* a zero dimension makes the product 0 however large the others are */
    for (size_t i = 0; i < ndim && overflow; i++)
        if (dims[i] == 0) {
            overflow = false;
            numel = 0;
        }
    if (overflow || numel > UINT64_MAX / esize)
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' shape %s of %s is 2^64 bytes or more",
                         f, name, format_shape(sbuf, sizeof sbuf, (int)ndim, dims), dts);
    const uint64_t nbytes = numel * esize;

    const json_value *off = json_get(v, "data_offsets");
    if (json_type(off) != JSON_ARRAY || json_len(off) != 2)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets is %s, expected [begin, end]", f, name,
                         json_type(off) == JSON_ARRAY ? "an array of other than 2 entries"
                         : off                      ? json_type_name(json_type(off))
                                                    : "missing");
    int64_t begin, end;
    if (!json_int(json_at(off, 0), 0, INT64_MAX, &begin) ||
        !json_int(json_at(off, 1), 0, INT64_MAX, &end))
        return error_set(err, K3_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets [%s, %s] are not non-negative integers", f,
                         name, describe_number(json_at(off, 0), buf, sizeof buf),
                         describe_number(json_at(off, 1), buf2, sizeof buf2));
    if (end < begin)
        return error_set(err, K3_ERR_FORMAT, "%s: tensor '%s' data_offsets [%lld, %lld] end before they begin",
                         f, name, (long long)begin, (long long)end);
    if ((uint64_t)end > data_len)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets [%lld, %lld] run past the data region (%llu bytes)",
                         f, name, (long long)begin, (long long)end, (unsigned long long)data_len);
    if ((uint64_t)(end - begin) != nbytes)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets [%lld, %lld] hold %llu bytes, but shape %s of %s "
                         "needs %llu", f, name, (long long)begin, (long long)end,
                         (unsigned long long)(end - begin),
                         format_shape(sbuf, sizeof sbuf, (int)ndim, dims), dts,
                         (unsigned long long)nbytes);

    size_t name_len = strlen(name);
    char *name_copy = arena_alloc(set, name_len + 1);
    int64_t *shape_copy = arena_alloc(set, ndim * sizeof *shape_copy);
    if (!name_copy || !shape_copy)
        return oom(err, "tensor names");
    memcpy(name_copy, name, name_len + 1);
    memcpy(shape_copy, dims, ndim * sizeof *shape_copy);
    *t = (st_tensor){
        .name = name_copy,
        .dtype = (st_dtype)dtype,
        .ndim = (int)ndim,
        .shape = shape_copy,
        .numel = numel,
        .nbytes = nbytes,
        .data = sh->map + sh->data_start + (uint64_t)begin,
        .shard = shard,
        .file_offset = sh->data_start + (uint64_t)begin,
    };
    return K3_OK;
}

typedef struct span {
    uint64_t begin, end;
    size_t tensor;
} span;

static int by_begin(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Fails if the bytes of two of the shard's tensors [first, first+count) overlap. */
static k3_status check_overlap(st_set *set, const st_shard *sh, size_t first, size_t count,
                               k3_error *err) {
    if (count < 2)
        return K3_OK;
    span *s = st_malloc(count * sizeof *s);
    if (!s)
        return oom(err, "the overlap check");
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const st_tensor *t = &set->tensors[first + i];
        if (t->nbytes == 0)
            continue;
        s[n].begin = t->file_offset - sh->data_start;
        s[n].end = s[n].begin + t->nbytes;
        s[n].tensor = first + i;
        n++;
    }
    qsort(s, n, sizeof *s, by_begin);
    k3_status st = K3_OK;
    size_t reach = 0; /* the span reaching furthest so far */
    for (size_t i = 1; i < n; i++) {
        if (s[i].begin < s[reach].end) {
            st = error_set(err, K3_ERR_FORMAT,
                           "%s: tensors '%s' data_offsets [%llu, %llu] and '%s' data_offsets "
                           "[%llu, %llu] overlap", sh->file, set->tensors[s[reach].tensor].name,
                           (unsigned long long)s[reach].begin, (unsigned long long)s[reach].end,
                           set->tensors[s[i].tensor].name, (unsigned long long)s[i].begin,
                           (unsigned long long)s[i].end);
            break;
        }
        if (s[i].end > s[reach].end)
            reach = i;
    }
    free(s);
    return st;
}

/* Opens, maps and parses shard k (its path and file already set), appending its tensors. */
static k3_status load_shard(st_set *set, int k, k3_error *err) {
    st_shard *sh = &set->shards[k];
    sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0)
        return error_set(err, K3_ERR_IO, "%s: cannot open: %s", sh->path, strerror(errno));
    struct stat sb;
    if (fstat(sh->fd, &sb) != 0)
        return error_set(err, K3_ERR_IO, "%s: cannot stat: %s", sh->path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return error_set(err, K3_ERR_IO, "%s: not a regular file", sh->path);
    sh->size = (uint64_t)sb.st_size;
    sh->dev = (uint64_t)sb.st_dev;
    sh->ino = (uint64_t)sb.st_ino;
    sh->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    if (sh->size < 8)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: file is %llu bytes, too short for the 8-byte header length", sh->file,
                         (unsigned long long)sh->size);
    void *map = mmap(NULL, (size_t)sh->size, PROT_READ, MAP_PRIVATE, sh->fd, 0);
    if (map == MAP_FAILED)
        return error_set(err, K3_ERR_IO, "%s: cannot map %llu bytes: %s", sh->path,
                         (unsigned long long)sh->size, strerror(errno));
    sh->map = map;
    /* Weights read through the map in 2 MB pages where the page cache can hold them so:
     * a decode step streams every trunk weight once, and with 4 kB pages each page
     * costs a translation walk that, after other work has filled the caches, goes to
     * memory. `medium` on a Zen 5 VM, `k3 bench` (a triad before each decode round):
     * decode 1.07-1.16x as fast on one thread, 1.08-1.30x on two (docs/PERFORMANCE.md). */
    io_advise_huge_pages(map, (size_t)sh->size);
    fault_register(sh->map, (size_t)sh->size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | sh->map[i];
    if (header_len > sh->size - 8)
        return error_set(err, K3_ERR_FORMAT,
                         "%s: header length %llu runs past the end of the file (%llu bytes, so at "
                         "most %llu)", sh->file, (unsigned long long)header_len,
                         (unsigned long long)sh->size, (unsigned long long)(sh->size - 8));
    sh->data_start = 8 + header_len;
    const uint64_t data_len = sh->size - sh->data_start;

    char json_name[512];
    snprintf(json_name, sizeof json_name, "%s header", sh->file);
    json_doc *doc;
    k3_status st = json_parse((const char *)sh->map + 8, (size_t)header_len, json_name, &doc, err);
    if (st != K3_OK)
        return st;
    const json_value *root = json_root(doc);
    if (json_type(root) != JSON_OBJECT) {
        st = error_set(err, K3_ERR_FORMAT, "%s: the header is JSON %s, expected an object",
                       sh->file, json_type_name(json_type(root)));
        json_free(doc);
        return st;
    }
    const size_t members = json_len(root);
    if (set->n_tensors + members > set->cap_tensors) {
        size_t cap = set->cap_tensors * 2;
        if (cap < set->n_tensors + members)
            cap = set->n_tensors + members;
        st_tensor *grown = st_realloc(set->tensors, cap * sizeof *grown);
        if (!grown) {
            json_free(doc);
            return oom(err, "the tensor list");
        }
        set->tensors = grown;
        set->cap_tensors = cap;
    }
    const size_t first = set->n_tensors;
    for (size_t i = 0; i < members && st == K3_OK; i++) {
        const json_value *m = json_at(root, i);
        size_t name_len;
        const char *name = json_key(m, &name_len);
        if (strcmp(name, "__metadata__") == 0) {
            st = check_metadata(sh, m, err);
        } else if (name_len == 0 || strlen(name) != name_len) {
            st = error_set(err, K3_ERR_FORMAT, "%s: a tensor name is empty or holds a NUL byte",
                           sh->file);
        } else {
            st = parse_entry(set, sh, k, name, m, data_len, &set->tensors[set->n_tensors], err);
            if (st == K3_OK)
                set->n_tensors++;
        }
    }
    json_free(doc);
    if (st != K3_OK)
        return st;
    sh->n_tensors = set->n_tensors - first;
    return check_overlap(set, sh, first, sh->n_tensors, err);
}

/* ---- the name table ------------------------------------------------------------------- */

#define TAG_MASK 0xffffffff00000000u

static size_t probe(const st_set *set, uint64_t h, const char *name, bool *found) {
    const size_t mask = set->table_cap - 1;
    const uint64_t tag = h & TAG_MASK;
    size_t slot = (size_t)h & mask;
    for (;;) {
        const uint64_t e = set->table[slot];
        if (e == 0) {
            *found = false;
            return slot;
        }
        if ((e & TAG_MASK) == tag && strcmp(set->tensors[(uint32_t)e - 1].name, name) == 0) {
            *found = true;
            return slot;
        }
        slot = (slot + 1) & mask;
    }
}

static k3_status build_table(st_set *set, k3_error *err) {
    if (set->n_tensors >= UINT32_MAX / 2)
        return error_set(err, K3_ERR_FORMAT, "%s: %zu tensors, more than this engine indexes",
                         set->dir, set->n_tensors);
    size_t cap = 16;
    while (cap < 2 * set->n_tensors)
        cap *= 2;
    set->table = st_malloc(cap * sizeof *set->table);
    if (!set->table)
        return oom(err, "the tensor name table");
    memset(set->table, 0, cap * sizeof *set->table);
    set->table_cap = cap;
    for (size_t i = 0; i < set->n_tensors; i++) {
        const st_tensor *t = &set->tensors[i];
        uint64_t h = hash_bytes(t->name, strlen(t->name));
        bool found;
        size_t slot = probe(set, h, t->name, &found);
        if (found) {
            const st_tensor *o = &set->tensors[(uint32_t)set->table[slot] - 1];
            return error_set(err, K3_ERR_FORMAT, "tensor '%s' appears in both %s and %s", t->name,
                             set->shards[o->shard].file, set->shards[t->shard].file);
        }
        set->table[slot] = (h & TAG_MASK) | (uint64_t)(i + 1);
    }
    return K3_OK;
}

const st_tensor *st_find(const st_set *set, const char *name) {
    if (!set || !name || !set->table)
        return NULL;
    bool found;
    size_t slot = probe(set, hash_bytes(name, strlen(name)), name, &found);
    return found ? &set->tensors[(uint32_t)set->table[slot] - 1] : NULL;
}

/* ---- opening ---------------------------------------------------------------------------- */

static k3_status alloc_shards(st_set *set, int n, k3_error *err) {
    set->shards = st_malloc((size_t)n * sizeof *set->shards);
    if (!set->shards)
        return oom(err, "the shard list");
    for (int i = 0; i < n; i++)
        set->shards[i] = (st_shard){.fd = -1, .direct_fd = -1};
    set->n_shards = n;
    return K3_OK;
}

static k3_status set_shard_name(st_set *set, int k, const char *file, k3_error *err) {
    st_shard *sh = &set->shards[k];
    sh->file = arena_join(set, file, "", "");
    sh->path = arena_join(set, set->dir, "/", file);
    if (!sh->file || !sh->path)
        return oom(err, "shard paths");
    return K3_OK;
}

static k3_status open_single(st_set *set, k3_error *err) {
    k3_status st = alloc_shards(set, 1, err);
    if (st == K3_OK)
        st = set_shard_name(set, 0, ST_SINGLE_NAME, err);
    if (st == K3_OK)
        st = load_shard(set, 0, err);
    if (st == K3_OK)
        st = build_table(set, err);
    return st;
}

/* The distinct shard files of an index, and which one each weight_map entry names. */
typedef struct shard_names {
    const char **name; /* (n) in order of first appearance; strings owned by the index doc */
    size_t *first;     /* (n) the first weight_map entry that names it */
    size_t n;
    uint32_t *slots; /* hash set over name[], entries are position + 1 */
    size_t cap;
    uint32_t *of_entry; /* (entries) the shard each weight_map entry names */
} shard_names;

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_names(shard_names *sn) {
    free(sn->name);
    free(sn->first);
    free(sn->slots);
    free(sn->of_entry);
}

/* Reads the weight_map's shard names; the returned ids are in sorted-name order. */
static k3_status collect_shards(const char *src, const json_value *wm, shard_names *sn,
                                k3_error *err) {
    const size_t entries = json_len(wm);
    sn->cap = 16;
    while (sn->cap < 2 * entries)
        sn->cap *= 2;
    sn->slots = st_malloc(sn->cap * sizeof *sn->slots);
    sn->of_entry = st_malloc(entries * sizeof *sn->of_entry);
    sn->name = st_malloc(entries * sizeof *sn->name);
    sn->first = st_malloc(entries * sizeof *sn->first);
    if (!sn->slots || !sn->of_entry || !sn->name || !sn->first)
        return oom(err, "the index");
    memset(sn->slots, 0, sn->cap * sizeof *sn->slots);
    for (size_t i = 0; i < entries; i++) {
        const json_value *m = json_at(wm, i);
        size_t len;
        const char *file = json_string(m, &len);
        if (!file)
            return error_set(err, K3_ERR_FORMAT,
                             "%s: weight_map['%s'] is JSON %s, expected a shard file name", src,
                             json_key(m, NULL), json_type_name(json_type(m)));
        if (len == 0 || strlen(file) != len || strchr(file, '/') || strcmp(file, ".") == 0 ||
            strcmp(file, "..") == 0)
            return error_set(err, K3_ERR_FORMAT,
                             "%s: weight_map['%s'] is '%s', which is not a file name in the model "
                             "directory", src, json_key(m, NULL), file);
        size_t slot = (size_t)hash_bytes(file, len) & (sn->cap - 1);
        while (sn->slots[slot] && strcmp(sn->name[sn->slots[slot] - 1], file) != 0)
            slot = (slot + 1) & (sn->cap - 1);
        if (!sn->slots[slot]) {
            sn->name[sn->n] = file;
            sn->first[sn->n] = i;
            sn->slots[slot] = (uint32_t)++sn->n;
        }
        sn->of_entry[i] = sn->slots[slot] - 1;
    }
    /* renumber by sorted name: rank[old id] */
    const char **sorted = st_malloc(sn->n * sizeof *sorted);
    uint32_t *rank = st_malloc(sn->n * sizeof *rank);
    size_t *first = st_malloc(sn->n * sizeof *first);
    if (!sorted || !rank || !first) {
        free(sorted);
        free(rank);
        free(first);
        return oom(err, "the index");
    }
    memcpy(sorted, sn->name, sn->n * sizeof *sorted);
    qsort(sorted, sn->n, sizeof *sorted, cmp_str_ptr);
    for (size_t old = 0; old < sn->n; old++) {
        /* the names are distinct, so a binary search finds the one position */
        const char **pos = bsearch(&sn->name[old], sorted, sn->n, sizeof *sorted, cmp_str_ptr);
        rank[old] = (uint32_t)(pos - sorted);
        first[rank[old]] = sn->first[old];
    }
    for (size_t i = 0; i < entries; i++)
        sn->of_entry[i] = rank[sn->of_entry[i]];
    free(sn->name);
    free(sn->first);
    sn->name = sorted;
    sn->first = first;
    free(rank);
    return K3_OK;
}

/* Every weight_map entry is in the shard it names, and every tensor is in the weight_map. */
static k3_status cross_check(st_set *set, const json_value *wm, const shard_names *sn,
                             k3_error *err) {
    const size_t entries = json_len(wm);
    for (size_t i = 0; i < entries; i++) {
        const char *name = json_key(json_at(wm, i), NULL);
        const st_tensor *t = st_find(set, name);
        const char *named = set->shards[sn->of_entry[i]].file;
        if (!t)
            return error_set(err, K3_ERR_TENSOR,
                             "missing tensor '%s': %s maps it to %s, which does not contain it",
                             name, set->source, named);
        if ((uint32_t)t->shard != sn->of_entry[i])
            return error_set(err, K3_ERR_TENSOR, "tensor '%s' is in %s, but %s maps it to %s",
                             name, set->shards[t->shard].file, set->source, named);
    }
    if (entries == set->n_tensors)
        return K3_OK; /* names are unique on both sides, so the map is a bijection */
    unsigned char *seen = st_malloc(set->n_tensors);
    if (!seen)
        return oom(err, "the index check");
    memset(seen, 0, set->n_tensors);
    for (size_t i = 0; i < entries; i++)
        seen[st_find(set, json_key(json_at(wm, i), NULL)) - set->tensors] = 1;
    size_t i = 0;
    while (i < set->n_tensors && seen[i])
        i++;
    free(seen);
    const st_tensor *t = &set->tensors[i < set->n_tensors ? i : 0];
    return error_set(err, K3_ERR_TENSOR, "tensor '%s' in %s is not named by %s", t->name,
                     set->shards[t->shard].file, set->source);
}

static k3_status open_indexed(st_set *set, const char *index_path, k3_error *err) {
    json_doc *doc;
    k3_status st = json_parse_file(index_path, &doc, err);
    if (st != K3_OK)
        return st;
    shard_names sn = {0};
    const json_value *wm = json_get(json_root(doc), "weight_map");
    if (json_type(json_root(doc)) != JSON_OBJECT)
        st = error_set(err, K3_ERR_FORMAT, "%s: the top level is JSON %s, expected an object",
                       index_path, json_type_name(json_type(json_root(doc))));
    else if (json_type(wm) != JSON_OBJECT)
        st = error_set(err, K3_ERR_FORMAT, "%s: weight_map is %s, expected an object", index_path,
                       wm ? json_type_name(json_type(wm)) : "missing");
    else if (json_len(wm) == 0)
        st = error_set(err, K3_ERR_FORMAT, "%s: weight_map is empty", index_path);
    if (st == K3_OK)
        st = collect_shards(index_path, wm, &sn, err);
    if (st == K3_OK && sn.n > (size_t)INT32_MAX)
        st = error_set(err, K3_ERR_FORMAT, "%s: too many shards (%zu)", index_path, sn.n);
    if (st == K3_OK)
        st = alloc_shards(set, (int)sn.n, err);
    for (int k = 0; st == K3_OK && k < set->n_shards; k++) {
        st = set_shard_name(set, k, sn.name[k], err);
        if (st == K3_OK)
            st = load_shard(set, k, err);
        if (st == K3_ERR_IO)
            error_wrap(err, "%s names shard %s (for '%s')", ST_INDEX_NAME, sn.name[k],
                       json_key(json_at(wm, sn.first[k]), NULL));
    }
    if (st == K3_OK)
        st = build_table(set, err);
    if (st == K3_OK)
        st = cross_check(set, wm, &sn, err);
    free_names(&sn);
    json_free(doc);
    return st;
}

k3_status st_open(const char *dir, st_set **out, k3_error *err) {
    *out = NULL;
    st_set *set = st_malloc(sizeof *set);
    if (!set)
        return oom(err, "the set");
    *set = (st_set){0};
    if (!dir[0])
        dir = ".";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    set->dir = st_malloc(dl + 1);
    if (!set->dir) {
        st_close(set);
        return oom(err, "the directory name");
    }
    memcpy(set->dir, dir, dl);
    set->dir[dl] = '\0';

    k3_status st;
    char *index_path = arena_join(set, set->dir, "/", ST_INDEX_NAME);
    char *single_path = arena_join(set, set->dir, "/", ST_SINGLE_NAME);
    struct stat sb;
    if (!index_path || !single_path) {
        st = oom(err, "paths");
    } else if (stat(index_path, &sb) == 0) {
        set->source = ST_INDEX_NAME;
        st = open_indexed(set, index_path, err);
    } else if (errno != ENOENT) {
        st = error_set(err, K3_ERR_IO, "%s: cannot stat: %s", index_path, strerror(errno));
    } else if (stat(single_path, &sb) == 0) {
        set->source = ST_SINGLE_NAME;
        st = open_single(set, err);
    } else if (errno == ENOENT) {
        st = error_set(err, K3_ERR_IO, "%s: neither %s nor %s exists", set->dir, ST_INDEX_NAME,
                       ST_SINGLE_NAME);
    } else {
        st = error_set(err, K3_ERR_IO, "%s: cannot stat: %s", single_path, strerror(errno));
    }
    if (st != K3_OK) {
        st_close(set);
        return st;
    }
    *out = set;
    return K3_OK;
}

int st_open_direct(st_set *set) {
    int opened = 0;
    for (int i = 0; i < set->n_shards; i++) {
        st_shard *sh = &set->shards[i];
        if (sh->direct_fd < 0)
            sh->direct_fd = io_open_direct(sh->path);
        opened += sh->direct_fd >= 0;
    }
    return opened;
}

void st_close(st_set *set) {
    if (!set)
        return;
    for (int i = 0; i < set->n_shards; i++) {
        st_shard *sh = &set->shards[i];
        if (sh->map) {
            fault_unregister(sh->map);
            munmap((void *)(uintptr_t)sh->map, (size_t)sh->size);
        }
        if (sh->fd >= 0)
            close(sh->fd);
        if (sh->direct_fd >= 0)
            close(sh->direct_fd);
    }
    free(set->shards);
    free(set->tensors);
    free(set->table);
    while (set->arena) {
        arena_block *next = set->arena->next;
        free(set->arena);
        set->arena = next;
    }
    free(set->dir);
    free(set);
}

/* ---- queries ------------------------------------------------------------------------------ */

/* "N bytes, modified at S.NNNNNNNNN" of a stat, or of what was recorded at open. */
static void describe_file(char *out, size_t size, uint64_t bytes, int64_t mtime_ns) {
    snprintf(out, size, "%llu bytes, modified at %lld.%09lld", (unsigned long long)bytes,
             (long long)(mtime_ns / 1000000000), (long long)(mtime_ns % 1000000000));
}

k3_status st_check_unchanged(const st_set *set, k3_error *err) {
    for (int i = 0; i < set->n_shards; i++) {
        const st_shard *sh = &set->shards[i];
        struct stat sb;
        char then[96], now[96];
        describe_file(then, sizeof then, sh->size, sh->mtime_ns);
        if (stat(sh->path, &sb) != 0)
            return error_set(err, K3_ERR_IO,
                             "%s changed while the engine ran: it cannot be read now (%s; %s when loaded): the model is "
                             "no longer the one loaded; load it again",
                             sh->path, strerror(errno), then);
        const int64_t mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
        describe_file(now, sizeof now, (uint64_t)sb.st_size, mtime_ns);
        if ((uint64_t)sb.st_dev != sh->dev || (uint64_t)sb.st_ino != sh->ino)
            return error_set(err, K3_ERR_IO,
                             "%s changed while the engine ran: another file has taken its name (%s when loaded, %s "
                             "now): the model is no longer the one loaded; load it again",
                             sh->path, then, now);
        if ((uint64_t)sb.st_size != sh->size || mtime_ns != sh->mtime_ns)
            return error_set(err, K3_ERR_IO,
                             "%s changed while the engine ran (%s when loaded, %s now): the model is no longer the one "
                             "loaded; load it again",
                             sh->path, then, now);
    }
    return K3_OK;
}

int st_shard_of(const st_set *set, const void *addr, uint64_t *offset) {
    const uint8_t *a = addr;
    for (int i = 0; i < set->n_shards; i++) {
        const st_shard *sh = &set->shards[i];
        if (sh->map && a >= sh->map && a < sh->map + sh->size) {
            if (offset)
                *offset = (uint64_t)(a - sh->map);
            return i;
        }
    }
    return -1;
}

size_t st_count(const st_set *set) {
    return set ? set->n_tensors : 0;
}

const st_tensor *st_tensor_at(const st_set *set, size_t i) {
    return set && i < set->n_tensors ? &set->tensors[i] : NULL;
}

int st_shard_count(const st_set *set) {
    return set ? set->n_shards : 0;
}

const st_shard *st_shard_at(const st_set *set, int i) {
    return set && i >= 0 && i < set->n_shards ? &set->shards[i] : NULL;
}

const char *st_dir(const st_set *set) {
    return set->dir;
}

const char *st_source(const st_set *set) {
    return set->source;
}

bool st_is_aligned(const st_tensor *t) {
    return (uintptr_t)t->data % st_dtype_size(t->dtype) == 0;
}

k3_status st_require(const st_set *set, const char *name, const st_tensor **out,
                     k3_error *err) {
    const st_tensor *t = st_find(set, name);
    if (out)
        *out = t;
    if (t)
        return K3_OK;
    if (set->n_shards > 1)
        return error_set(err, K3_ERR_TENSOR, "missing tensor '%s' (looked in %s/%s and its %d shards)",
                         name, set->dir, set->source, set->n_shards);
    return error_set(err, K3_ERR_TENSOR, "missing tensor '%s' (looked in %s/%s)", name, set->dir,
                     set->source);
}

k3_status st_check_dtype(const st_tensor *t, st_dtype want, k3_error *err) {
    if (t->dtype == want)
        return K3_OK;
    return error_set(err, K3_ERR_TENSOR, "tensor '%s': dtype %s, expected %s", t->name,
                     st_dtype_name(t->dtype), st_dtype_name(want));
}

k3_status st_check_shape(const st_tensor *t, int ndim, const int64_t *shape, k3_error *err) {
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = shape[i] < 0 || shape[i] == t->shape[i];
    if (ok)
        return K3_OK;
    char have[256], want[256];
    return error_set(err, K3_ERR_TENSOR, "tensor '%s': shape %s, expected %s", t->name,
                     format_shape(have, sizeof have, t->ndim, t->shape),
                     format_shape(want, sizeof want, ndim, shape));
}

k3_status st_expect(const st_set *set, const char *name, st_dtype dtype, int ndim,
                    const int64_t *shape, const st_tensor **out, k3_error *err) {
    const st_tensor *t;
    k3_status st = st_require(set, name, &t, err);
    if (st == K3_OK)
        st = st_check_dtype(t, dtype, err);
    if (st == K3_OK)
        st = st_check_shape(t, ndim, shape, err);
    if (out)
        *out = st == K3_OK ? t : NULL;
    return st;
}
