/* cmd_bench.c - `k3 bench MODEL_DIR`: decode speed against this machine's memory
 * bandwidth, measured side by side in one process: a STREAM-like triad first, then prefill
 * and incremental greedy decode, the weight bytes each decoded token streamed, and the
 * ratio of achieved to bandwidth-bound decode speed. Options: cli_usage() in k3.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "commands.h"
#include "k3.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct {
    float *a;
    const float *b, *c;
    size_t begin, end;
} triad_part;

static void *triad_run(void *arg) {
    triad_part *p = arg;
    for (size_t i = p->begin; i < p->end; i++)
        p->a[i] = p->b[i] + 3.0f * p->c[i];
    return NULL;
}

/* Best of 5 triads a = b + s*c over arrays far larger than any cache, split across
 * `threads` threads; bytes per pass = 3 arrays (two read, one written). */
static double triad_bandwidth(int threads) {
    const size_t n = (size_t)48 << 20; /* 48M floats = 192 MB per array */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    double best = 0.0;
    if (a && b && c) {
        for (size_t i = 0; i < n; i++) {
            a[i] = 0.0f;
            b[i] = (float)(i & 1023);
            c[i] = 1.0f;
        }
        pthread_t tid[64];
        triad_part part[64];
        if (threads > 64)
            threads = 64;
        for (int rep = 0; rep < 5; rep++) {
            const double t0 = now_s();
            for (int t = 0; t < threads; t++) {
                part[t] = (triad_part){a, b, c, n * t / threads, n * (t + 1) / threads};
                pthread_create(&tid[t], NULL, triad_run, &part[t]);
            }
            for (int t = 0; t < threads; t++)
                pthread_join(tid[t], NULL);
            const double bw = 3.0 * n * sizeof(float) / (now_s() - t0);
            if (bw > best)
                best = bw;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static int parse_count(const char *s, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

int bench_main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "k3 bench: give MODEL_DIR\n\n");
        cli_usage(stderr);
        return 2;
    }
    const char *dir = argv[1], *out_path = NULL;
    int threads = 1, prompt_len = 128, gen = 32;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *target = !strcmp(argv[i], "--threads") ? &threads
                      : !strcmp(argv[i], "--prompt-tokens") ? &prompt_len
                      : !strcmp(argv[i], "--gen") ? &gen
                                                   : NULL;
        if (target && v && !parse_count(v, target)) {
            i++;
        } else if (!strcmp(argv[i], "--out") && v) {
            out_path = v;
            i++;
        } else {
            fprintf(stderr, "k3 bench: bad option '%s'\n\n", argv[i]);
            cli_usage(stderr);
            return 2;
        }
    }

    const double bandwidth = triad_bandwidth(threads);
    char detail[2048];
    k3_model *model = NULL;
    k3_context *ctx = NULL;
    k3_status s = k3_model_open(dir, NULL, &model, detail, sizeof detail);
    if (s != K3_OK) {
        fprintf(stderr, "k3 bench: loading the model failed (%s): %s\n", k3_status_name(s), detail);
        return 1;
    }
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = prompt_len + gen;
    cp.n_threads = threads;
    s = k3_context_open(model, &cp, &ctx, detail, sizeof detail);
    const int vocab = k3_model_vocab_size(model);
    int32_t *ids = malloc(sizeof *ids * (size_t)(prompt_len + gen));
    float *logits = malloc(sizeof *logits * (size_t)vocab);
    int rc = 1;
    if (s != K3_OK || !ids || !logits) {
        fprintf(stderr, "k3 bench: creating the context failed (%s): %s\n", k3_status_name(s), detail);
        goto done;
    }
    /* A fixed pseudo-random prompt: the same work on every run. */
    unsigned seed = 12345;
    for (int i = 0; i < prompt_len; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % 100000u);
    }
    const double t0 = now_s();
    s = k3_decode(ctx, ids, prompt_len, logits, 1, NULL);
    const double prefill_s = now_s() - t0;
    /* The prompt's greedy next token; from then on each step asks the engine for its argmax
     * and no logits, as k3_generate does, so the timing holds no copy of the vocabulary's
     * logits and no argmax the engine would not run. */
    int32_t next = 0;
    for (int v = 1; v < vocab; v++)
        if (logits[v] > logits[next])
            next = v;
    k3_counters c0, c1;
    k3_counters_get(&c0);
    const double t1 = now_s();
    for (int g = 0; g < gen && s == K3_OK; g++) {
        ids[prompt_len + g] = next;
        s = k3_decode(ctx, &ids[prompt_len + g], 1, NULL, 0, &next);
    }
    const double decode_s = now_s() - t1;
    k3_counters_get(&c1);
    if (s != K3_OK) {
        fprintf(stderr, "k3 bench: decoding failed (%s): %s\n", k3_status_name(s), k3_context_error(ctx));
        goto done;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double bytes_per_token = (double)(c1.weight_bytes_read - c0.weight_bytes_read) / gen;
    const double decode_tps = gen / decode_s, bound_tps = bandwidth / bytes_per_token;
    printf("k3 bench: %s, %d thread%s\n", dir, threads, threads > 1 ? "s" : "");
    printf("  %-36s %12.2f GB/s\n", "memory bandwidth (triad, measured)", bandwidth / 1e9);
    printf("  %-36s %12.1f tokens/s (%d tokens)\n", "prefill", prompt_len / prefill_s, prompt_len);
    printf("  %-36s %12.2f tokens/s (%d tokens)\n", "decode", decode_tps, gen);
    printf("  %-36s %12.1f MB\n", "weight bytes per decoded token", bytes_per_token / 1e6);
    printf("  %-36s %12.2f tokens/s\n", "bandwidth-bound decode", bound_tps);
    printf("  %-36s %12.1f %%\n", "achieved / bound", 100.0 * decode_tps / bound_tps);
    printf("  %-36s %12.1f MB\n", "peak RSS (measured)", ru.ru_maxrss / 1024.0);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "k3 bench: cannot write %s: %s\n", out_path, strerror(errno));
            goto done;
        }
        fprintf(f,
                "{\n  \"model\": \"%s\",\n  \"threads\": %d,\n  \"bandwidth_bytes_per_s\": %.0f,\n"
                "  \"prefill_tokens\": %d,\n  \"prefill_tokens_per_s\": %.3f,\n  \"decode_tokens\": %d,\n"
                "  \"decode_tokens_per_s\": %.3f,\n  \"weight_bytes_per_token\": %.0f,\n"
                "  \"bound_tokens_per_s\": %.3f,\n  \"achieved_over_bound\": %.4f,\n  \"peak_rss_bytes\": %.0f\n}\n",
                dir, threads, bandwidth, prompt_len, prompt_len / prefill_s, gen, decode_tps, bytes_per_token,
                bound_tps, decode_tps / bound_tps, ru.ru_maxrss * 1024.0);
        fclose(f);
    }
    rc = 0;
done:
    free(ids);
    free(logits);
    k3_context_close(ctx);
    k3_model_close(model);
    return rc;
}
