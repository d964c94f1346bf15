/* cmd_bench.c - `k3 bench`: prefill and decode speed next to this machine's limits,
 * measured side by side in one process: the f32 multiply-add peak of the engine's kernels
 * and, at once, prefill (after a warm-up one) with the FLOPs it did (achieved over peak);
 * then rounds that each
 * run a STREAM-like triad and at once a stretch of incremental greedy decode, the weight
 * bytes each decoded token streamed, and the ratio of achieved to bandwidth-bound decode
 * speed. Options: cli_usage() in main.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "commands.h"
#include "k3.h"
#include "layer_kinds.h"
#include "mapped_pages.h"
#include "membw.h"
#include "numbers.h"
#include "options.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Rounds of (triad, decode stretch). This machine's memory bandwidth drifts by a third
 * within seconds (measured: the same triad 24 to 33 GB/s in back-to-back processes), so a
 * bandwidth measured once, before decoding, compares decode with another moment's machine.
 * Each round pairs a triad with the decode that follows it; the median round is reported. */
#define ROUNDS 8

/* One layer kind's figures from the observed prefill and decode. */
typedef struct kind_figures {
    long layers;
    double prefill_seconds, prefill_time_share, prefill_over_peak;
    double decode_seconds, decode_time_share, decode_bytes_per_token, decode_over_bound;
} kind_figures;

static kind_figures kind_figures_of(const layer_kinds *prefill, const layer_kinds *decode, layer_kind k,
                                    double prefill_s, double peak, double decode_s, int gen, double bandwidth) {
    const layer_kind_totals *p = &prefill->kind[k], *d = &decode->kind[k];
    kind_figures f = {0};
    f.layers = layer_kinds_per_pass(prefill, k);
    f.prefill_seconds = p->seconds;
    f.prefill_time_share = p->seconds / prefill_s;
    f.prefill_over_peak = p->seconds > 0 ? 2.0 * (double)p->multiply_adds / p->seconds / peak : 0.0;
    f.decode_seconds = d->seconds;
    f.decode_time_share = d->seconds / decode_s;
    f.decode_bytes_per_token = (double)d->weight_bytes / gen;
    f.decode_over_bound = d->seconds > 0 ? (double)d->weight_bytes / d->seconds / bandwidth : 0.0;
    return f;
}

int bench_main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "k3 bench: give MODEL_DIR\n\n");
        cli_usage(stderr);
        return 2;
    }
    const char *dir = argv[1], *out_path = NULL;
    int threads = 1, prompt_len = 128, gen = 32;
    const option table[] = {
        {"--threads", OPTION_INT, &threads, 1, 1 << 20},
        {"--prompt-tokens", OPTION_INT, &prompt_len, 1, 1 << 20},
        {"--gen", OPTION_INT, &gen, 1, 1 << 20},
        {"--out", OPTION_TEXT, &out_path, 0, 0},
    };
    const option_parser parser = {"k3 bench", table, (int)(sizeof table / sizeof table[0]), NULL, NULL, NULL, NULL};
    if (options_parse(&parser, argc, argv, 2))
        return 2;

    if (gen < ROUNDS) {
        fprintf(stderr, "k3 bench: --gen %d is fewer than the %d rounds of decode it is measured in\n", gen, ROUNDS);
        return 2;
    }
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
    /* A fixed pseudo-random prompt inside the vocabulary: the same work on every run. */
    unsigned seed = 12345;
    for (int i = 0; i < prompt_len; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (unsigned)vocab);
    }
    /* The compute peak just before prefill, on as many threads, so both see one moment's
     * machine; then a warm-up prefill, as llama-bench runs one: the first pass faults the
     * mapped weights into this process (on medium about a sixth of a cold prefill's time
     * went to page faults) and touches the scratch; the timed pass follows at once, from
     * the empty sequence. The peak's 0.6 s go before the warm-up, not between it and the
     * timed pass: on the project's VM a mapped file's pages read about ten times slower
     * for one pass after a pause of that length (no page faults: the host's mapping; an
     * anonymous buffer is not affected), which put a quarter of small's prefill into the
     * lm_head alone (docs/PERFORMANCE.md). */
    const char *kernels = "";
    const double peak = k3_fma_peak(threads, 0.2, &kernels);
    s = k3_decode(ctx, ids, prompt_len, logits, 1, NULL);
    k3_context_reset(ctx);
    /* Per-kind figures of the same timed passes (layer_kinds.h: a clock read per layer). */
    static layer_kinds prefill_kinds, decode_kinds;
    layer_kinds_reset(&prefill_kinds);
    k3_context_observe(ctx, layer_kinds_observe, &prefill_kinds);
    k3_counters p0, p1;
    k3_counters_get(&p0);
    const double t0 = now_s();
    if (s == K3_OK)
        s = k3_decode(ctx, ids, prompt_len, logits, 1, NULL);
    const double prefill_s = now_s() - t0;
    k3_counters_get(&p1);
    layer_kinds_reset(&decode_kinds);
    k3_context_observe(ctx, layer_kinds_observe, &decode_kinds);
    const double prefill_flops = 2.0 * (double)(p1.multiply_adds - p0.multiply_adds) / prefill_s;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double model_rss = ru.ru_maxrss * 1024.0; /* before the triad's arrays exist */
    mapped_pages pages;
    mapped_pages_read(&pages);
    membw tr = {0};
    if (s != K3_OK || membw_open(&tr)) {
        if (s != K3_OK)
            fprintf(stderr, "k3 bench: prefill failed (%s): %s\n", k3_status_name(s), k3_context_error(ctx));
        else
            fprintf(stderr, "k3 bench: no memory for the triad's three 128 MB arrays\n");
        membw_close(&tr);
        goto done;
    }
    /* From the prompt's greedy next token on, each step asks the engine for its argmax and
     * no logits, as k3_generate does, so the timing holds no copy of the vocabulary's
     * logits and no argmax the engine would not run. */
    int32_t next = 0;
    for (int v = 1; v < vocab; v++)
        if (logits[v] > logits[next])
            next = v;
    k3_counters c0, c1;
    k3_counters_get(&c0);
    double bw[ROUNDS], tps[ROUNDS], decode_s = 0.0;
    int done_tokens = 0;
    for (int r = 0; r < ROUNDS && s == K3_OK; r++) {
        const int stretch = gen * (r + 1) / ROUNDS - gen * r / ROUNDS;
        bw[r] = membw_triad(&tr, threads);
        const double t1 = now_s();
        for (int g = 0; g < stretch && s == K3_OK; g++, done_tokens++) {
            ids[prompt_len + done_tokens] = next;
            s = k3_decode(ctx, &ids[prompt_len + done_tokens], 1, NULL, 0, &next);
        }
        const double dt = now_s() - t1;
        decode_s += dt;
        tps[r] = stretch / dt;
    }
    k3_counters_get(&c1);
    k3_context_observe(ctx, NULL, NULL);
    membw_close(&tr);
    if (s != K3_OK) {
        fprintf(stderr, "k3 bench: decoding failed (%s): %s\n", k3_status_name(s), k3_context_error(ctx));
        goto done;
    }
    const double bytes_per_token = (double)(c1.weight_bytes_read - c0.weight_bytes_read) / gen;
    double ratio[ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        ratio[r] = tps[r] * bytes_per_token / bw[r];
    const double bandwidth = numbers_median(bw, ROUNDS), decode_tps = gen / decode_s;
    const double bound_tps = bandwidth / bytes_per_token, achieved = numbers_median(ratio, ROUNDS);
    double lo = ratio[0], hi = ratio[0], bw_lo = bw[0], bw_hi = bw[0];
    for (int r = 1; r < ROUNDS; r++) {
        lo = ratio[r] < lo ? ratio[r] : lo;
        hi = ratio[r] > hi ? ratio[r] : hi;
        bw_lo = bw[r] < bw_lo ? bw[r] : bw_lo;
        bw_hi = bw[r] > bw_hi ? bw[r] : bw_hi;
    }
    printf("k3 bench: %s, %d thread%s\n", dir, threads, threads > 1 ? "s" : "");
    printf("  %-36s %12.1f tokens/s (%d tokens)\n", "prefill", prompt_len / prefill_s, prompt_len);
    printf("  %-36s %12.1f GFLOP/s (%.1f %% of the peak below)\n", "prefill compute", prefill_flops / 1e9,
           100.0 * prefill_flops / peak);
    printf("  %-36s %12.1f GFLOP/s (%s, %d thread%s)\n", "f32 multiply-add peak", peak / 1e9, kernels, threads,
           threads > 1 ? "s" : "");
    printf("  %-36s %12.2f tokens/s (%d tokens in %d rounds)\n", "decode", decode_tps, gen, ROUNDS);
    printf("  %-36s %12.1f MB\n", "weight bytes per decoded token", bytes_per_token / 1e6);
    printf("  %-36s %12.2f GB/s (rounds %.2f..%.2f)\n", "memory bandwidth (triad, median)", bandwidth / 1e9,
           bw_lo / 1e9, bw_hi / 1e9);
    printf("  %-36s %12.2f tokens/s\n", "bandwidth-bound decode", bound_tps);
    printf("  %-36s %12.1f %% (rounds %.1f..%.1f %%)\n", "achieved / bound (median round)", 100.0 * achieved,
           100.0 * lo, 100.0 * hi);
    printf("  %-36s %12.1f MB\n", "peak RSS (measured, before triad)", model_rss / 1e6);
    if (pages.resident_bytes >= 0)
        printf("  %-36s %12.1f MB (of %.1f MB resident)\n", "mapped file pages in 2 MB pages", pages.huge_bytes / 1e6,
               pages.resident_bytes / 1e6);
    kind_figures kf[LAYER_KINDS];
    for (int k = 0; k < LAYER_KINDS; k++)
        kf[k] = kind_figures_of(&prefill_kinds, &decode_kinds, (layer_kind)k, prefill_s, peak, decode_s, gen, bandwidth);
    printf("  by layer kind: %-7s %6s %10s %10s %10s %10s %10s\n", "", "layers", "prefill", "of peak", "decode",
           "MB/token", "of triad");
    for (int k = 0; k < LAYER_KINDS; k++)
        if (kf[k].layers)
            printf("  %-22s %6ld %8.1f %% %8.1f %% %8.1f %% %10.2f %8.1f %%\n", layer_kind_names[k], kf[k].layers,
                   100.0 * kf[k].prefill_time_share, 100.0 * kf[k].prefill_over_peak, 100.0 * kf[k].decode_time_share,
                   kf[k].decode_bytes_per_token / 1e6, 100.0 * kf[k].decode_over_bound);
    printf("  (prefill, decode: the kind's share of that phase's time; of peak: its FLOP/s over the peak above;\n"
           "   of triad: its weight bytes over its time, over the median triad)\n");
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
                "  \"bound_tokens_per_s\": %.3f,\n  \"achieved_over_bound\": %.4f,\n  \"peak_rss_bytes\": %.0f,\n"
                "  \"kernels\": \"%s\",\n  \"fma_peak_flops_per_s\": %.0f,\n  \"prefill_flops_per_s\": %.0f,\n"
                "  \"prefill_over_peak\": %.6g,\n  \"mapped_file_resident_bytes\": %.0f,\n"
                "  \"mapped_file_huge_page_bytes\": %.0f,\n  \"rounds\": [",
                dir, threads, bandwidth, prompt_len, prompt_len / prefill_s, gen, decode_tps, bytes_per_token,
                bound_tps, achieved, model_rss, kernels, peak, prefill_flops, prefill_flops / peak,
                pages.resident_bytes, pages.huge_bytes);
        for (int r = 0; r < ROUNDS; r++)
            fprintf(f, "%s\n    {\"bandwidth_bytes_per_s\": %.0f, \"decode_tokens_per_s\": %.3f, \"achieved_over_bound\": %.4f}",
                    r ? "," : "", bw[r], tps[r], ratio[r]);
        fprintf(f, "\n  ],\n  \"layer_kinds\": [");
        int first = 1;
        for (int k = 0; k < LAYER_KINDS; k++) {
            if (!kf[k].layers)
                continue;
            fprintf(f,
                    "%s\n    {\"kind\": \"%s\", \"layers\": %ld, \"prefill_seconds\": %.6g, \"prefill_time_share\": %.4f, "
                    "\"prefill_over_peak\": %.4f, \"decode_seconds\": %.6g, \"decode_time_share\": %.4f, "
                    "\"decode_weight_bytes_per_token\": %.0f, \"decode_over_bound\": %.4f}",
                    first ? "" : ",", layer_kind_names[k], kf[k].layers, kf[k].prefill_seconds,
                    kf[k].prefill_time_share, kf[k].prefill_over_peak, kf[k].decode_seconds, kf[k].decode_time_share,
                    kf[k].decode_bytes_per_token, kf[k].decode_over_bound);
            first = 0;
        }
        fprintf(f, "\n  ]\n}\n");
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
