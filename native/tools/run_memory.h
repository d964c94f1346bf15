/* run_memory.h - the memory options of `k3 MODEL_DIR ...` (presets, budgets, cold page
 * cache, the fault hook), the plan printed before the model opens and the report printed
 * after the run: the CLI side of k3.h's "memory: presets, plans, budgets". Options are
 * described by cli_usage() in main.c. Everything prints to stderr; --out JSON gets the
 * figures. */
#ifndef K3_RUN_MEMORY_H
#define K3_RUN_MEMORY_H

#include <stdio.h>

#include "k3.h"

#define RUN_MEMORY_MAX_STEPS 16

typedef struct run_memory {
    /* budget flags in command-line order: a preset name ("auto" included) or one budget */
    struct {
        char kind; /* 'p' preset, 't' --trunk-gb, 'c' --cache-gb */
        const char *preset;
        double gb; /* < 0: mapped */
    } steps[RUN_MEMORY_MAX_STEPS];
    int n_steps;
    int io_threads;
    int reads;        /* k3_reads */
    long fault_expert_read;
    int expert_prefetch; /* --expert-prefetch: k3_model_params.expert_prefetch */
    int cold;         /* drop the shards from the page cache first */
    k3_model_params params; /* resolved by run_memory_prepare */
    const char *preset_used;
    k3_plan plan;
    k3_memory_counters before, after;
    double wall_seconds, peak_rss;
    int reported;
} run_memory;

void run_memory_init(run_memory *rm);

/* One line on how the forecast did where its profile was measured (k3_forecast's check),
 * the percentage rounded half up as the editor rounds it; nothing when none is recorded. */
void run_memory_print_check(FILE *f, const k3_forecast *fc);

/* If argv[*i] is a memory option, consumes it (and its value) and returns 1; 0 when it is
 * not one; -1 after printing why its value is bad (exit 2). --list-presets prints the
 * table and returns 2 (exit 0). */
int run_memory_option(run_memory *rm, int argc, char **argv, int *i, const char *model_dir);

/* posix_fadvise(DONTNEED) on every shard of dir, for cold-cache benchmarks: clean pages no
 * process maps are dropped; others stay. Returns how many shards it reached. */
int run_memory_drop_page_cache(const char *dir);

/* Prints the preset table (with "auto" sized for model_dir, or the release when NULL). */
void run_memory_list_presets(FILE *f, const char *model_dir);

/* Resolves the budget flags in order into rm->params ("auto" sized for model_dir, or the
 * release when NULL, and a context as cp). Returns 0, or the exit status after saying why. */
int run_memory_resolve(run_memory *rm, const char *model_dir, const k3_context_params *cp);

/* Before the model opens: resolves the budget flags in order, drops the page cache if
 * asked, prints the plan for a context as cp and refuses what does not fit. Returns 0 to
 * go on, else the exit status (3: the plan does not fit or a budget is below its floor). */
int run_memory_prepare(run_memory *rm, const char *model_dir, const k3_context_params *cp);

/* Around the timed part of the run. */
void run_memory_start(run_memory *rm, const k3_model *model);
void run_memory_stop(run_memory *rm, const k3_model *model, double wall_seconds, double peak_rss);

/* Writes the "memory" member (leading comma, no trailing one) for --out; its shape is
 * declared once for its readers in scripts/bench/lib/memory-report.ts: change both together. */
void run_memory_json(const run_memory *rm, FILE *f);

#endif
