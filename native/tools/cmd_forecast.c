/* cmd_forecast.c - `k3 forecast`: seconds per token and time to first token (prefill of 512
 * and 2,048 tokens) forecast for the full-scale release (or a checkpoint) under each preset,
 * or under given budgets, on the machine a profile describes (k3_forecast_make and
 * k3_forecast_prefill of k3.h). Prints a table, or JSON with --json for
 * scripts/bench/scale.ts. Options: cli_usage() in main.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "k3.h"
#include "options.h"
#include "run_memory.h"

/* The prompt lengths time to first token is forecast for: a completion's 2,048-token
 * budget, and a quarter of it. */
static const int prefill_tokens[2] = {512, 2048};

static void print_json(FILE *f, const char *name, const k3_model_params *mp, const k3_forecast *fc,
                       const k3_prefill_forecast *pf, int first) {
    fprintf(f,
            "%s\n  {\"preset\": \"%s\", \"trunk_bytes\": %lld, \"expert_cache_bytes\": %lld, \"positions\": %d, "
            "\"seconds\": %.6g, \"compute_seconds\": %.6g, \"disk_seconds\": %.6g, \"exposed_expert_seconds\": %.6g, "
            "\"trunk_read_bytes\": %.0f, \"expert_read_bytes\": %.0f, \"expert_hit_rate\": %.6f, \"bound\": \"%s\", "
            "\"check_configurations\": %d, \"check_within\": %d, \"check_worst\": %.6g",
            first ? "" : ",", name, (long long)mp->trunk_bytes, (long long)mp->expert_cache_bytes, fc->positions,
            fc->seconds, fc->compute_seconds, fc->disk_seconds, fc->exposed_expert_seconds, fc->trunk_read_bytes,
            fc->expert_read_bytes, fc->expert_hit_rate, fc->bound ? "disk" : "memory", fc->check_configurations,
            fc->check_within, fc->check_worst);
    fprintf(f, ", \"prefill\": [");
    for (int i = 0; i < 2; i++)
        fprintf(f,
                "%s{\"tokens\": %d, \"batch\": %d, \"passes\": %d, \"seconds\": %.6g, \"compute_seconds\": %.6g, "
                "\"disk_seconds\": %.6g, \"trunk_read_bytes\": %.0f, \"expert_read_bytes\": %.0f}",
                i ? ", " : "", pf[i].tokens, pf[i].batch, pf[i].passes, pf[i].seconds, pf[i].compute_seconds,
                pf[i].disk_seconds, pf[i].trunk_read_bytes, pf[i].expert_read_bytes);
    fprintf(f, "]}");
}

static void print_row(FILE *f, const char *name, const k3_model_params *mp, const k3_forecast *fc,
                      const k3_prefill_forecast *pf) {
    fprintf(f, "  %-12s %8.1f GB %8.1f GB %12.2f %10.2f %10.2f %11.1f GB %9.1f%%  %-6s %9.0f %9.0f %6d\n", name,
            (double)mp->trunk_bytes / 1e9, (double)mp->expert_cache_bytes / 1e9, fc->seconds, fc->compute_seconds,
            fc->disk_seconds, (fc->trunk_read_bytes + fc->expert_read_bytes) / 1e9, 100.0 * fc->expert_hit_rate,
            fc->bound ? "disk" : "memory", pf[0].seconds, pf[1].seconds, pf[1].batch);
}

int forecast_main(int argc, char **argv) {
    const char *dir = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL, *profile = NULL;
    int positions = 1, json = 0, batch = K3_BATCH_AUTO;
    double hit_rate = -1.0;
    run_memory rm;
    run_memory_init(&rm);
    const option table[] = {
        {"--profile", OPTION_TEXT, &profile, 0, 0},
        {"--positions", OPTION_INT, &positions, 1, 1024},
        {"--batch", OPTION_INT, &batch, 0, 1 << 20},
        {"--expert-hit-rate", OPTION_REAL, &hit_rate, 0, 1},
        {"--json", OPTION_FLAG, &json, 0, 0},
    };
    const option_parser parser = {"k3 forecast", table, (int)(sizeof table / sizeof table[0]), &rm, dir, NULL, NULL};
    const int parsed = options_parse(&parser, argc, argv, dir ? 2 : 1);
    if (parsed)
        return parsed < 0 ? 0 : parsed;
    char path[4096], detail[2048];
    if (!profile && k3_forecast_profile_path(path, sizeof path) == K3_OK)
        profile = path;
    if (!profile) {
        fprintf(stderr, "k3 forecast: no machine profile: give --profile FILE or set K3_MACHINE_PROFILE\n");
        return 2;
    }
    /* One row per preset, or the one configuration the memory options give. */
    int rows = rm.n_steps ? 1 : k3_preset_count() + 1;
    if (!json) {
        printf("forecast for %s, %d position%s per pass, from %s:\n", dir ? dir : "the full-scale release", positions,
               positions > 1 ? "s" : "", profile);
        printf("  %-12s %11s %11s %12s %10s %10s %14s %10s  %-6s %9s %9s %6s\n", "preset", "trunk", "cache", "s/pass",
               "compute", "disk", "read/pass", "cache hit", "bound", "ttft 512", "ttft 2k", "batch");
    } else {
        printf("[");
    }
    int rc = 0;
    k3_forecast fc = {0}; /* the last row's: every row carries the profile's check */
    for (int r = 0; r < rows; r++) {
        k3_model_params mp;
        const char *name;
        if (rm.n_steps) {
            if ((rc = run_memory_resolve(&rm, dir, NULL)) != 0)
                return rc;
            mp = rm.params;
            name = rm.preset_used ? rm.preset_used : "budgets";
        } else {
            name = r < k3_preset_count() ? k3_preset_at(r)->name : "auto";
            k3_model_params_default(&mp);
            if (k3_preset_resolve(name, dir, NULL, &mp, detail, sizeof detail) != K3_OK) {
                if (!json)
                    printf("  %-12s refused here: %s\n", name, detail);
                continue;
            }
        }
        const k3_status s =
            k3_forecast_make_at_hit_rate(profile, dir, &mp, positions, hit_rate, &fc, detail, sizeof detail);
        k3_prefill_forecast pf[2];
        k3_status ps = K3_OK;
        for (int i = 0; i < 2 && s == K3_OK && ps == K3_OK; i++)
            ps = k3_forecast_prefill(profile, dir, &mp, prefill_tokens[i], batch, hit_rate, &pf[i], detail,
                                     sizeof detail);
        if (s != K3_OK || ps != K3_OK) {
            fprintf(stderr, "k3 forecast: %s (%s): %s\n", name, k3_status_name(s != K3_OK ? s : ps), detail);
            return 1;
        }
        if (json)
            print_json(stdout, name, &mp, &fc, pf, r == 0);
        else
            print_row(stdout, name, &mp, &fc, pf);
    }
    if (json)
        printf("\n]\n");
    else {
        printf("  ttft: seconds to the first token of a 512- and a 2,048-token prompt, prefilled in passes of the "
               "batch the plan allows on this machine (each pass reads the streamed trunk once)\n");
        run_memory_print_check(stdout, &fc);
    }
    return rc;
}
