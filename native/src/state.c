/* state.c - saving and loading a context's sequence and carried state (k3_state_save,
 * k3_state_load), so a conversation resumes after a restart without re-reading it.
 *
 * File format, version 1. All integers little-endian.
 *   offset  size  field
 *   0       8     magic "K3STATE\0"
 *   8       4     format version (1)
 *   12      4     header size in bytes (96 for version 1)
 *   16      4     hidden_size                      \
 *   20      4     num_hidden_layers                 |
 *   24      4     vocab_size                        |
 *   28      4     KDA heads                         |  the architecture fingerprint:
 *   32      4     KDA head dim                      |  every dimension that changes what
 *   36      4     short-conv taps                   |  the payload bytes mean
 *   40      4     KDA layers                        |
 *   44      4     MLA layers                        |
 *   48      4     MLA cache row floats (kv_lora + rope)
 *   52      4     reserved, 0                      /
 *   56      8     layer plan hash: FNV-1a of the per-layer KDA/MLA flags
 *   64      8     model identity: FNV-1a of config.json, then of every shard's file name,
 *                 size and first 64 KiB of tensor data
 *   72      4     token count n
 *   76      4     reserved, 0
 *   80      8     payload size in bytes
 *   88      8     payload checksum: FNV-1a 64 of the payload bytes
 *   96      ...   payload:
 *                   n int32 tokens
 *                   one int32: the greedy next token (-1 when n is 0)
 *                   KDA state: per KDA layer, S (heads, dk, dv) then the conv history
 *                     (3, taps-1, heads*dk), float32
 *                   MLA rows: per MLA layer, rows 0..n-1 of (kv_lora + rope) float32
 * A file is written to PATH.tmp-PID, flushed, fsync'ed, then renamed over PATH, so a crash
 * leaves either the old file or the new one. Loading checks magic, version, header size,
 * fingerprint (naming the first field that differs, with both values), model identity,
 * that the file length equals header + payload, the checksum, the token count against the
 * context's capacity, and then the values themselves, since a checksum only says the bytes
 * are the ones written, not that they were written by this engine: every token id inside
 * the vocabulary, the next token -1 exactly when n is 0, every float finite. It changes
 * the context only after every check has passed. */
#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "hash.h"

#define STATE_MAGIC "K3STATE"
#define STATE_VERSION 1
#define STATE_HEADER 96

typedef struct {
    uint32_t dims[10];
    uint64_t layer_plan;
    uint64_t model_id;
} fingerprint;

static const char *const dim_names[10] = {
    "hidden_size", "num_hidden_layers", "vocab_size", "KDA heads", "KDA head dim",
    "short-conv taps", "KDA layers", "MLA layers", "MLA cache row floats", "reserved"};

/* The model's identity: FNV-1a of config.json, then of each shard's name, size and first
 * 64 KiB of tensor data. Two checkpoints of one architecture but other weights differ
 * here, at the cost of reading a few MB per save or load (page cache, usually). */
static uint64_t model_identity(const model *m) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", st_dir(m->tensors));
    uint64_t h = HASH_FNV1A_START;
    FILE *f = fopen(path, "rb");
    if (f) {
        unsigned char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            h = hash_fnv1a(h, buf, n);
        fclose(f);
    }
    enum { SAMPLE = 64 * 1024 };
    unsigned char *sample = malloc(SAMPLE);
    for (int i = 0; sample && i < st_shard_count(m->tensors); i++) {
        const st_shard *sh = st_shard_at(m->tensors, i);
        h = hash_fnv1a(h, sh->file, strlen(sh->file));
        h = hash_fnv1a(h, &sh->size, sizeof sh->size);
        const uint64_t left = sh->size - sh->data_start;
        const size_t want = left < SAMPLE ? (size_t)left : SAMPLE;
        const ssize_t got = pread(sh->fd, sample, want, (off_t)sh->data_start);
        if (got > 0)
            h = hash_fnv1a(h, sample, (size_t)got);
    }
    free(sample);
    return h;
}

static fingerprint model_fingerprint(const model *m) {
    fingerprint f = {{(uint32_t)m->hidden, (uint32_t)m->n_layers, (uint32_t)m->vocab, (uint32_t)m->kda.heads,
                      (uint32_t)m->kda.head_dim, (uint32_t)m->kda.conv_k, (uint32_t)m->n_kda, (uint32_t)m->n_mla,
                      (uint32_t)mla_cache_row_floats(&m->mla), 0},
                     HASH_FNV1A_START,
                     model_identity(m)};
    f.layer_plan = hash_fnv1a(HASH_FNV1A_START, m->config.layer_is_kda, (size_t)m->n_layers);
    return f;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Payload pieces, in file order. */
typedef struct {
    const void *ptr;
    size_t bytes;
} piece;

static size_t row_bytes(const model *m) {
    return sizeof(float) * (size_t)mla_cache_row_floats(&m->mla);
}

static float *mla_layer(k3_context *c, int l) {
    return c->state.mla + (size_t)l * c->state.capacity * mla_cache_row_floats(&c->model->m->mla);
}

static size_t payload_bytes(const model *m, int n) {
    return sizeof(int32_t) * ((size_t)n + 1) + sizeof(float) * (size_t)forward_kda_state_floats(m) +
           (size_t)m->n_mla * n * row_bytes(m);
}

static int write_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n > 0) {
        const ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

k3_status k3_state_save(k3_context *c, const char *path) {
    const model *m = c->model->m;
    error_clear(&c->err);
    const int n = c->length;
    const int32_t next = c->next;
    const fingerprint f = model_fingerprint(m);
    const size_t kda = sizeof(float) * (size_t)forward_kda_state_floats(m);

    uint64_t sum = HASH_FNV1A_START;
    sum = hash_fnv1a(sum, c->tokens, sizeof(int32_t) * (size_t)n);
    sum = hash_fnv1a(sum, &next, sizeof next);
    sum = hash_fnv1a(sum, c->state.kda, kda);
    for (int l = 0; l < m->n_mla; l++)
        sum = hash_fnv1a(sum, mla_layer(c, l), (size_t)n * row_bytes(m));

    unsigned char h[STATE_HEADER] = {0};
    memcpy(h, STATE_MAGIC, 8);
    put32(h + 8, STATE_VERSION);
    put32(h + 12, STATE_HEADER);
    for (int i = 0; i < 10; i++)
        put32(h + 16 + 4 * i, f.dims[i]);
    put64(h + 56, f.layer_plan);
    put64(h + 64, f.model_id);
    put32(h + 72, (uint32_t)n);
    put64(h + 80, payload_bytes(m, n));
    put64(h + 88, sum);

    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "state file path is too long: %s", path);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return error_set(&c->err, K3_ERR_IO, "cannot write state file %s: %s", tmp, strerror(errno));
    int bad = write_all(fd, h, sizeof h) || write_all(fd, c->tokens, sizeof(int32_t) * (size_t)n) ||
              write_all(fd, &next, sizeof next) || write_all(fd, c->state.kda, kda);
    for (int l = 0; l < m->n_mla && !bad; l++)
        bad = write_all(fd, mla_layer(c, l), (size_t)n * row_bytes(m));
    const int saved_errno = errno;
    if (bad || fsync(fd) != 0) {
        close(fd);
        unlink(tmp);
        return error_set(&c->err, K3_ERR_IO, "writing state file %s failed: %s", tmp,
                         strerror(bad ? saved_errno : errno));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        return error_set(&c->err, K3_ERR_IO, "cannot move %s to %s: %s", tmp, path, strerror(e));
    }
    return K3_OK;
}

/* Reads `size` bytes (the whole header) and checks magic, version and length. Returns the
 * bytes read, or 0 with err set. */
static size_t read_header(FILE *fp, const char *path, unsigned char *h, size_t size, k3_error *err) {
    const size_t got = fread(h, 1, size, fp);
    if (got < 16 || memcmp(h, STATE_MAGIC, 8) != 0) {
        error_set(err, K3_ERR_STATE, "%s is not a k3 state file (%s)", path,
                  got < 16 ? "shorter than a header" : "bad magic");
        return 0;
    }
    if (get32(h + 8) != STATE_VERSION || get32(h + 12) != STATE_HEADER) {
        error_set(err, K3_ERR_STATE, "%s is state format version %u (header %u bytes); this engine reads version %d",
                  path, get32(h + 8), get32(h + 12), STATE_VERSION);
        return 0;
    }
    if (got != size) {
        error_set(err, K3_ERR_STATE, "%s is truncated: %zu bytes, shorter than its %d-byte header", path, got,
                  STATE_HEADER);
        return 0;
    }
    return got;
}

/* The token count, checked against what the file can hold without the model: the file is
 * header + payload exactly, and the payload holds at least the n + 1 ids. So a forged count
 * cannot ask a caller to size a context far beyond the file (2^31 - 1 would overflow it). */
static int checked_length(FILE *fp, const char *path, const unsigned char *h, k3_error *err) {
    const uint32_t n = get32(h + 72);
    const uint64_t payload = get64(h + 80);
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0)
        size = ftell(fp);
    if (size < 0) {
        error_set(err, K3_ERR_IO, "cannot measure state file %s: %s", path, strerror(errno));
        return -1;
    }
    const uint64_t have = (uint64_t)size - STATE_HEADER; /* read_header read the whole header */
    if (have != payload) {
        error_set(err, K3_ERR_STATE, "%s is %s: %llu payload bytes, its header says %llu", path,
                  have < payload ? "truncated" : "longer than its header says", (unsigned long long)have,
                  (unsigned long long)payload);
        return -1;
    }
    if (n > INT32_MAX - 1 || payload < sizeof(int32_t) * ((uint64_t)n + 1)) {
        error_set(err, K3_ERR_STATE, "%s is corrupted: it says %u tokens, but its payload of %llu bytes cannot hold their ids",
                  path, n, (unsigned long long)payload);
        return -1;
    }
    return (int)n;
}

k3_status k3_state_length(const char *path, int *n_tokens, char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        error_set(&err, K3_ERR_IO, "cannot open state file %s: %s", path, strerror(errno));
    unsigned char h[STATE_HEADER];
    if (fp && read_header(fp, path, h, sizeof h, &err)) {
        const int n = checked_length(fp, path, h, &err);
        if (n >= 0)
            *n_tokens = n;
    }
    if (fp)
        fclose(fp);
    error_copy_detail(&err, detail, detail_size);
    return err.status;
}

/* The payload's values, which the checksum cannot vouch for: ids in [0, vocab), the next
 * token -1 exactly when n is 0 (else an id), and every float finite (a NaN would decode to
 * fluent nonsense, and is undefined behaviour in the exp series). */
static k3_status check_values(const model *m, const char *path, const unsigned char *payload, int n, k3_error *err) {
    for (int i = 0; i <= n; i++) {
        int32_t id;
        memcpy(&id, payload + sizeof id * (size_t)i, sizeof id);
        if (i < n && (id < 0 || id >= m->vocab))
            return error_set(err, K3_ERR_STATE, "%s is corrupted: token %d of %d is id %d, outside the vocabulary [0, %d)", path,
                             i, n, id, m->vocab);
        if (i == n && (n == 0 ? id != -1 : id < 0 || id >= m->vocab))
            return error_set(err, K3_ERR_STATE, "%s is corrupted: the next token is %d, expected %s", path, id,
                             n == 0 ? "-1 for an empty sequence" : "an id in the vocabulary");
    }
    const unsigned char *floats = payload + sizeof(int32_t) * ((size_t)n + 1);
    const size_t kda = (size_t)forward_kda_state_floats(m), total = kda + (size_t)m->n_mla * n * mla_cache_row_floats(&m->mla);
    for (size_t i = 0; i < total; i++) {
        float v;
        memcpy(&v, floats + sizeof v * i, sizeof v);
        if (!isfinite(v))
            return error_set(err, K3_ERR_STATE, "%s is corrupted: %s float %zu of %zu is %s", path,
                             i < kda ? "the KDA state's" : "the MLA cache's", i < kda ? i : i - kda, i < kda ? kda : total - kda,
                             isnan(v) ? "NaN" : "infinite");
    }
    return K3_OK;
}

k3_status k3_state_load(k3_context *c, const char *path) {
    const model *m = c->model->m;
    error_clear(&c->err);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return error_set(&c->err, K3_ERR_IO, "cannot open state file %s: %s", path, strerror(errno));
    unsigned char h[STATE_HEADER];
    unsigned char *payload = NULL;
    k3_status s = K3_OK;
    if (!read_header(fp, path, h, sizeof h, &c->err)) {
        s = c->err.status;
        goto done;
    }
    const fingerprint f = model_fingerprint(m);
    for (int i = 0; i < 10; i++)
        if (get32(h + 16 + 4 * i) != f.dims[i]) {
            s = error_set(&c->err, K3_ERR_STATE,
                          "%s was saved by a model of another architecture: %s %u, this model has %u", path,
                          dim_names[i], get32(h + 16 + 4 * i), f.dims[i]);
            goto done;
        }
    if (get64(h + 56) != f.layer_plan) {
        s = error_set(&c->err, K3_ERR_STATE, "%s was saved by a model with another KDA/MLA layer plan", path);
        goto done;
    }
    if (get64(h + 64) != f.model_id) {
        s = error_set(&c->err, K3_ERR_STATE,
                      "%s was saved by another model (config.json or the weights differ from this one's)", path);
        goto done;
    }
    const int checked = checked_length(fp, path, h, &c->err);
    if (checked < 0 || fseek(fp, STATE_HEADER, SEEK_SET) != 0) {
        s = checked < 0 ? c->err.status : error_set(&c->err, K3_ERR_IO, "cannot read state file %s: %s", path, strerror(errno));
        goto done;
    }
    const uint32_t n = (uint32_t)checked;
    if ((int64_t)n > c->params.max_context) {
        s = error_set(&c->err, K3_ERR_STATE, "%s holds %u tokens, more than this context's %d positions", path, n,
                      c->params.max_context);
        goto done;
    }
    const size_t want = payload_bytes(m, (int)n);
    if (get64(h + 80) != want) {
        s = error_set(&c->err, K3_ERR_STATE, "%s: payload size %llu for %u tokens, expected %zu", path,
                      (unsigned long long)get64(h + 80), n, want);
        goto done;
    }
    payload = malloc(want ? want : 1);
    if (!payload) {
        s = error_set(&c->err, K3_ERR_OUT_OF_MEMORY, "loading %s: out of memory for %zu bytes", path, want);
        goto done;
    }
    const size_t read = fread(payload, 1, want, fp);
    if (read != want || fgetc(fp) != EOF) {
        s = error_set(&c->err, K3_ERR_STATE, "%s is %s: %zu payload bytes%s, expected %zu", path,
                      read != want ? "truncated" : "longer than its header says", read,
                      read != want ? "" : " and more", want);
        goto done;
    }
    if (hash_fnv1a(HASH_FNV1A_START, payload, want) != get64(h + 88)) {
        s = error_set(&c->err, K3_ERR_STATE, "%s is corrupted: its checksum does not match its contents", path);
        goto done;
    }
    if ((s = check_values(m, path, payload, (int)n, &c->err)) != K3_OK)
        goto done;
    /* Every check passed: now the context changes. */
    const unsigned char *p = payload;
    const size_t kda = sizeof(float) * (size_t)forward_kda_state_floats(m);
    memcpy(c->tokens, p, sizeof(int32_t) * n);
    p += sizeof(int32_t) * n;
    memcpy(&c->next, p, sizeof(int32_t));
    p += sizeof(int32_t);
    c->last_logits_valid = 0; /* not in the format: healing needs the prompt decoded here */
    memcpy(c->state.kda, p, kda);
    p += kda;
    for (int l = 0; l < m->n_mla; l++) {
        memcpy(mla_layer(c, l), p, (size_t)n * row_bytes(m));
        p += (size_t)n * row_bytes(m);
    }
    c->length = (int)n;
done:
    free(payload);
    fclose(fp);
    return s;
}
