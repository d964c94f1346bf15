/* cmd_bench_kernels.c - `k3 bench-kernels`: the engine's matrix kernels on K3's released
 * shapes, streaming from memory, against a memory-bandwidth triad measured in the same
 * process. The weights are synthetic (the kernels' speed does not depend on the values):
 * one token's 16 routed experts in MXFP4 (gate and up 3072 x 3584, down 3584 x 3072:
 * 281 MB) and three 7168 x 7168 bf16 projections (308 MB), both far larger than any
 * cache. Each round runs a triad, then one pass over each set with every implementation
 * this CPU runs, so implementations and weight types are compared at one moment's machine
 * (this VM's bandwidth drifts by a third within seconds). Options: cli_usage() in main.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "commands.h"
#include "kernels.h"
#include "membw.h"
#include "numbers.h"
#include "options.h"
#include "threads.h"

#define N_EXPERT_MATRICES 48 /* 16 experts x gate, up, down */
#define N_BF16_MATRICES 3
#define BF16_SIDE 7168
#define MAX_TOKENS 16
#define MAX_ROUNDS 32
#define MAX_IMPLS 4

typedef struct {
    kernels_matrix m[N_EXPERT_MATRICES];
    int n;
    double bytes;
} matrix_set;

static unsigned next_random(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Scales 2^-10 .. 2^-1 and random nibbles: values of a trained checkpoint's range. */
static int make_experts(matrix_set *set) {
    unsigned seed = 7;
    set->n = N_EXPERT_MATRICES;
    set->bytes = 0;
    for (int i = 0; i < set->n; i++) {
        const int rows = i % 3 == 2 ? 3584 : 3072, cols = i % 3 == 2 ? 3072 : 3584;
        const size_t packed = (size_t)rows * cols / 2, scales = (size_t)rows * cols / 32;
        uint8_t *d = malloc(packed), *s = malloc(scales);
        set->m[i] = (kernels_matrix){KERNELS_MXFP4, rows, cols, d, s};
        if (!d || !s)
            return -1;
        for (size_t k = 0; k < packed; k++)
            d[k] = (uint8_t)next_random(&seed);
        for (size_t k = 0; k < scales; k++)
            s[k] = (uint8_t)(117 + next_random(&seed) % 10);
        set->bytes += (double)(packed + scales);
    }
    return 0;
}

static int make_bf16(matrix_set *set) {
    unsigned seed = 11;
    set->n = N_BF16_MATRICES;
    set->bytes = 0;
    for (int i = 0; i < set->n; i++) {
        const size_t n = (size_t)BF16_SIDE * BF16_SIDE;
        uint16_t *d = malloc(n * sizeof *d);
        set->m[i] = (kernels_matrix){KERNELS_BF16, BF16_SIDE, BF16_SIDE, d, NULL};
        if (!d)
            return -1;
        for (size_t k = 0; k < n; k++) /* |w| in [2^-8, 2^-6): no denormals, no infinities */
            d[k] = (uint16_t)(0x3b80 + (next_random(&seed) & 0x1ff) + (next_random(&seed) & 1) * 0x8000);
        set->bytes += (double)(n * sizeof *d);
    }
    return 0;
}

static void free_set(matrix_set *set) {
    for (int i = 0; i < set->n; i++) {
        free((void *)set->m[i].data);
        free((void *)set->m[i].scale);
    }
}

/* Seconds for one pass over the set with `tokens` tokens. */
static double pass(const kernels_impl *impl, const matrix_set *set, const float *x, int tokens, float *y,
                   threads *pool) {
    const double t0 = clock_now_s();
    for (int i = 0; i < set->n; i++)
        kernels_matmul(impl, &set->m[i], x, set->m[i].cols, tokens, y, set->m[i].rows, pool);
    return clock_now_s() - t0;
}

int bench_kernels_main(int argc, char **argv) {
    int threads_n = 1, rounds = 5, tokens = 1;
    const char *out_path = NULL;
    const option table[] = {
        {"--threads", OPTION_INT, &threads_n, 1, 64},
        {"--rounds", OPTION_INT, &rounds, 1, MAX_ROUNDS},
        {"--tokens", OPTION_INT, &tokens, 1, MAX_TOKENS},
        {"--out", OPTION_TEXT, &out_path, 0, 0},
    };
    const option_parser parser = {"k3 bench-kernels", table, (int)(sizeof table / sizeof table[0]), NULL, NULL, NULL,
                                  NULL};
    if (options_parse(&parser, argc, argv, 1))
        return 2;
    const kernels_impl *impls[MAX_IMPLS];
    int n_impls = 0;
    if (kernels_avx2())
        impls[n_impls++] = kernels_avx2();
    if (kernels_avx512())
        impls[n_impls++] = kernels_avx512();
    if (kernels_amx())
        impls[n_impls++] = kernels_amx();
    if (!n_impls) /* the scalar reference only where nothing faster runs: it takes seconds a pass */
        impls[n_impls++] = &kernels_scalar;

    matrix_set sets[2];
    memset(sets, 0, sizeof sets);
    const char *set_names[2] = {"mxfp4 experts", "bf16 7168x7168"};
    membw tr = {0};
    threads *pool = NULL;
    float *x = malloc(sizeof *x * (size_t)tokens * BF16_SIDE), *y = malloc(sizeof *y * (size_t)tokens * BF16_SIDE);
    int rc = 1;
    if (make_experts(&sets[0]) || make_bf16(&sets[1]) || !x || !y || membw_open(&tr)) {
        fprintf(stderr, "k3 bench-kernels: no memory for the %.0f MB of weights and the triad's 384 MB\n",
                (sets[0].bytes + sets[1].bytes) / 1e6);
        goto done;
    }
    if (threads_n > 1 && threads_new(threads_n, &pool, NULL) != K3_OK) {
        fprintf(stderr, "k3 bench-kernels: could not start %d threads\n", threads_n);
        goto done;
    }
    unsigned seed = 3;
    for (int i = 0; i < tokens * BF16_SIDE; i++)
        x[i] = (float)(next_random(&seed) & 0xffff) / 32768.0f - 1.0f;
    double load[3] = {-1, -1, -1};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = load[1] = load[2] = -1;
        fclose(lf);
    }

    /* One warm-up pass each: page faults and the first touch are not the kernels'. */
    for (int k = 0; k < n_impls; k++)
        for (int s = 0; s < 2; s++)
            pass(impls[k], &sets[s], x, tokens, y, pool);
    double triad[MAX_ROUNDS], secs[MAX_IMPLS][2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        triad[r] = membw_triad(&tr, threads_n);
        for (int k = 0; k < n_impls; k++)
            for (int s = 0; s < 2; s++)
                secs[k][s][r] = pass(impls[k], &sets[s], x, tokens, y, pool);
    }

    printf("k3 bench-kernels: %d thread%s, %d token%s a product, %d rounds (load %.2f %.2f %.2f)\n", threads_n,
           threads_n > 1 ? "s" : "", tokens, tokens > 1 ? "s" : "", rounds, load[0], load[1], load[2]);
    printf("  triad, median round %.1f GB/s\n", numbers_median(triad, rounds) / 1e9);
    printf("  %-8s %-16s %10s %12s %14s\n", "kernels", "weights", "MB", "GB/s median", "of the triad");
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !out) {
        fprintf(stderr, "k3 bench-kernels: cannot write %s: %s\n", out_path, strerror(errno));
        goto done;
    }
    if (out)
        fprintf(out, "{\n  \"threads\": %d,\n  \"tokens\": %d,\n  \"load_average\": [%.2f, %.2f, %.2f],\n  \"rows\": [",
                threads_n, tokens, load[0], load[1], load[2]);
    for (int k = 0; k < n_impls; k++)
        for (int s = 0; s < 2; s++) {
            double rate[MAX_ROUNDS], share[MAX_ROUNDS];
            for (int r = 0; r < rounds; r++) {
                rate[r] = sets[s].bytes / secs[k][s][r];
                share[r] = rate[r] / triad[r];
            }
            printf("  %-8s %-16s %10.0f %12.1f %13.1f %%\n", impls[k]->name, set_names[s], sets[s].bytes / 1e6,
                   numbers_median(rate, rounds) / 1e9, 100 * numbers_median(share, rounds));
            if (out) {
                fprintf(out, "%s\n    {\"kernels\": \"%s\", \"weights\": \"%s\", \"bytes\": %.0f, \"rounds\": [",
                        k + s ? "," : "", impls[k]->name, s ? "bf16" : "mxfp4", sets[s].bytes);
                for (int r = 0; r < rounds; r++)
                    fprintf(out, "%s{\"seconds\": %.6f, \"triad_bytes_per_s\": %.0f}", r ? ", " : "", secs[k][s][r],
                            triad[r]);
                fprintf(out, "]}");
            }
        }
    if (out) {
        fprintf(out, "\n  ]\n}\n");
        if (fclose(out)) {
            fprintf(stderr, "k3 bench-kernels: writing %s failed\n", out_path);
            goto done;
        }
    }
    rc = 0;
done:
    threads_free(pool);
    membw_close(&tr);
    free_set(&sets[0]);
    free_set(&sets[1]);
    free(x);
    free(y);
    return rc;
}
