/* fuzz_state.c - the saved-state harness: bytes as a state file, loaded with k3_state_length
 * and k3_state_load into a context of the embedded default model (media/models/k3-mini, or
 * $K3_FUZZ_MODEL); a state it accepts is decoded one token further, which must work. The
 * structure-aware mutator keeps the header's fingerprint and model identity those of the
 * loaded model (from a state saved at start, which also seeds the pool), edits a header
 * field, a token id or a float of the payload, and then usually makes the checksum right
 * again, so inputs reach the checks behind it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "k3.h"

static k3_model *model;
static k3_context *ctx;
static uint8_t *valid; /* a state saved by this model at start */
static size_t valid_n;
enum { MAX_CONTEXT = 48, HEADER = 96 };

static int init(const char *repo) {
    char dir[2048], detail[1024];
    const char *env = getenv("K3_FUZZ_MODEL");
    snprintf(dir, sizeof dir, "%s", env ? env : "");
    if (!env)
        snprintf(dir, sizeof dir, "%s/media/models/k3-mini", repo);
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = MAX_CONTEXT;
    cp.n_threads = 1;
    cp.batch = 8;
    if (k3_model_open(dir, NULL, &model, detail, sizeof detail) != K3_OK ||
        k3_context_open(model, &cp, &ctx, detail, sizeof detail) != K3_OK) {
        fprintf(stderr, "k3-fuzz state: cannot open the model in %s: %s\n", dir, detail);
        return 1;
    }
    const int32_t ids[] = {1, 2, 3, 4, 5, 6, 7};
    char path[512];
    snprintf(path, sizeof path, "%s/seed.k3state", fuzz_tmp());
    if (k3_decode(ctx, ids, 7, NULL, 0, NULL) != K3_OK || k3_state_save(ctx, path) != K3_OK) {
        fprintf(stderr, "k3-fuzz state: cannot save a seed state: %s\n", k3_context_error(ctx));
        return 1;
    }
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    valid_n = (size_t)ftell(f);
    rewind(f);
    valid = malloc(valid_n);
    if (!valid || fread(valid, 1, valid_n, f) != valid_n) {
        fclose(f);
        return 1;
    }
    fclose(f);
    fuzz_add_seed(valid, valid_n);
    k3_context_reset(ctx);
    return 0;
}

static void run(const uint8_t *data, size_t n) {
    char path[512];
    if (fuzz_write_tmp("fuzz.k3state", data, n, path, sizeof path))
        return;
    int held = -1;
    char detail[1024];
    if (k3_state_length(path, &held, detail, sizeof detail) == K3_OK && (held < 0 || (size_t)held * 4 > n))
        fuzz_fail("k3_state_length accepted %d tokens from a %zu-byte file", held, n);
    if (k3_state_load(ctx, path) != K3_OK)
        return;
    const int len = k3_context_length(ctx);
    if (len < 0 || len > MAX_CONTEXT)
        fuzz_fail("a loaded state holds %d tokens in a context of %d", len, MAX_CONTEXT);
    if (len < MAX_CONTEXT) {
        const int32_t next = 1;
        float *logits = malloc(sizeof *logits * (size_t)k3_model_vocab_size(model));
        /* Finite but absurd values (3e38 in the recurrent state) may still give non-finite
         * logits; what must hold is that the decode runs, with no undefined behaviour. */
        if (logits && k3_decode(ctx, &next, 1, logits, 1, NULL) != K3_OK)
            fuzz_fail("decoding after a loaded state failed: %s", k3_context_error(ctx));
        free(logits);
    }
    k3_context_reset(ctx);
}

static uint64_t fnv(const uint8_t *d, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return h;
}

static void put(uint8_t *d, size_t at, uint64_t v, int bytes) {
    for (int k = 0; k < bytes; k++)
        d[at + (size_t)k] = (uint8_t)(v >> (8 * k));
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) {
    if (n < HEADER)
        return fuzz_mutate_bytes(d, n, cap, r, NULL, valid, valid_n);
    if (fuzz_below(r, 2))
        memcpy(d + 16, valid + 16, 56); /* fingerprint, layer plan, model identity: this model's */
    static const uint64_t counts[] = {0, 1, 7, 47, 48, 49, 0x7fffffff, 0x80000000u, 0xffffffffu};
    static const uint32_t ints[] = {0, 1, 8447, 8448, 163839, 163840, 0x7fffffff, 0x80000000u, 0xffffffffu};
    static const uint32_t floats[] = {0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u, 0x80000000u,
                                      0x00000001u, 0x7f7fffffu, 0x3f800000u, 0x7f800001u};
    switch (fuzz_below(r, 6)) {
    case 0:
        put(d, 72, counts[fuzz_below(r, 9)], 4);
        break;
    case 1:
        put(d, 80, fuzz_below(r, 2) ? n - HEADER + fuzz_below(r, 9) - 4 : (uint64_t)fuzz_next(r), 8);
        break;
    case 2: { /* a token id, or the next token */
        const size_t ids = (n - HEADER) / 4;
        if (ids)
            put(d, HEADER + 4 * fuzz_below(r, ids < 64 ? ids : 64), ints[fuzz_below(r, 9)], 4);
        break;
    }
    case 3: { /* a float of the payload */
        const size_t words = (n - HEADER) / 4;
        if (words)
            put(d, HEADER + 4 * fuzz_below(r, words), floats[fuzz_below(r, 9)], 4);
        break;
    }
    case 4:
        n = fuzz_mutate_bytes(d, n, cap, r, NULL, valid, valid_n);
        break;
    default: /* the version, the header size, the magic */
        put(d, 8 + 4 * fuzz_below(r, 2), fuzz_below(r, 4), 4);
        break;
    }
    if (n >= HEADER && fuzz_below(r, 5))
        put(d, 88, fnv(d + HEADER, n - HEADER), 8);
    return n;
}

const fuzz_harness fuzz_state = {"state", "bytes as a state file -> k3_state_length, k3_state_load, one decode", init, run,
                                 mutate, NULL, 1 << 20};
