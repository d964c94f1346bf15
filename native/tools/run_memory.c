/* run_memory.c - memory options, plan and report of `k3 MODEL_DIR ...` (see run_memory.h). */
#include "run_memory.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

void run_memory_init(run_memory *rm) {
    memset(rm, 0, sizeof *rm);
    rm->io_threads = 2;
    k3_model_params_default(&rm->params);
}

static const char *human(double bytes, char *buf, size_t size) {
    if (bytes >= 1e9)
        snprintf(buf, size, "%.2f GB", bytes / 1e9);
    else
        snprintf(buf, size, "%.1f MB", bytes / 1e6);
    return buf;
}

/* The s/token and time-to-first-token cells for budgets mp on dir (NULL: the release): the
 * forecasts (the per-token one kept in *made), or "-" with the first failure's detail kept
 * in why (one reason is printed under the table). */
static void forecast_cells(const char *profile, const char *dir, const k3_model_params *mp, char *cell, char *ttft,
                           size_t size, char *detail, size_t detail_size, const char **why, k3_forecast *made) {
    k3_forecast fc;
    k3_prefill_forecast short_prompt, long_prompt;
    snprintf(cell, size, "-");
    snprintf(ttft, size, "-");
    if (!profile || *why)
        return;
    if (k3_forecast_make(profile, dir, mp, 1, &fc, detail, detail_size) == K3_OK &&
        k3_forecast_prefill(profile, dir, mp, 512, K3_BATCH_AUTO, -1.0, &short_prompt, detail, detail_size) == K3_OK &&
        k3_forecast_prefill(profile, dir, mp, 2048, K3_BATCH_AUTO, -1.0, &long_prompt, detail, detail_size) == K3_OK) {
        snprintf(cell, size, "%.2f", fc.seconds);
        snprintf(ttft, size, "%.0f/%.0f", short_prompt.seconds, long_prompt.seconds);
        *made = fc;
    } else {
        *why = detail;
    }
}

void run_memory_list_presets(FILE *f, const char *model_dir) {
    char a[32], b[32], c[32], d[32], profile[4096], detail[1024];
    const int have_path = k3_forecast_profile_path(profile, sizeof profile) == K3_OK;
    fprintf(f, "memory presets for the full-scale release (budgets passed to the engine; peak RSS measured by the\n"
               "seed driver with the same budgets; plan = this engine's forecast, 4096-token context; s/token =\n"
               "forecast for this machine from its measured profile; first token = seconds to prefill a 512- and a\n"
               "2,048-token prompt in the batches the plan allows here):\n");
    fprintf(f, "  %-12s %10s %12s %14s %12s %9s %11s  %s\n", "preset", "trunk", "expert cache", "peak RSS (seed)", "plan",
            "s/token", "first token", "");
    const char *why = NULL;
    k3_forecast made = {0};
    for (int i = 0; i < k3_preset_count(); i++) {
        const k3_preset *p = k3_preset_at(i);
        k3_model_params mp;
        k3_model_params_default(&mp);
        k3_preset_apply(p, &mp);
        char spt[32], ttft[32];
        forecast_cells(have_path ? profile : NULL, NULL, &mp, spt, ttft, sizeof spt, detail, sizeof detail, &why,
                       &made);
        fprintf(f, "  %-12s %10s %12s %14s %12s %9s %11s  %s\n", p->name, human((double)p->trunk_bytes, a, sizeof a),
                human((double)p->expert_cache_bytes, b, sizeof b), human((double)p->full_scale_peak_rss, c, sizeof c),
                human((double)p->full_scale_plan, d, sizeof d), spt, ttft, p->note);
    }
    k3_model_params mp;
    k3_plan plan;
    char adetail[1024];
    const k3_status s = k3_preset_auto(model_dir, NULL, 0, &mp, &plan, adetail, sizeof adetail);
    if (s == K3_OK) {
        char spt[32], ttft[32];
        forecast_cells(have_path ? profile : NULL, model_dir, &mp, spt, ttft, sizeof spt, detail, sizeof detail, &why,
                       &made);
        fprintf(f, "  %-12s %10s %12s %14s %12s %9s %11s  sized from this machine's MemAvailable (%s) for %s\n",
                "auto", human((double)mp.trunk_bytes, a, sizeof a), human((double)mp.expert_cache_bytes, b, sizeof b),
                "-", human((double)plan.total, c, sizeof c), spt, ttft, human((double)plan.available, d, sizeof d),
                model_dir ? model_dir : "the release");
    } else
        fprintf(f, "  %-12s refused on this machine for %s: %s\n", "auto", model_dir ? model_dir : "the release",
                adetail);
    if (!have_path)
        fprintf(f, "s/token: no machine profile (set HOME or K3_MACHINE_PROFILE)\n");
    else if (why)
        fprintf(f, "s/token: %s\n", why);
    else
        fprintf(f, "s/token: from %s; `k3 forecast` shows what each is made of\n", profile);
    if (have_path && !why)
        run_memory_print_check(f, &made);
    fprintf(f, "Trunk first: every streamed trunk byte is read on every forward pass, only the chosen experts are.\n"
               "Any preset gives bit-identical output; --trunk-gb / --cache-gb after --preset override it.\n");
}

void run_memory_print_check(FILE *f, const k3_forecast *fc) {
    if (fc->check_configurations > 0)
        fprintf(f,
                "forecast checked where the profile was measured: %d of %d configurations of the slice within 15 %%, "
                "the worst off by %d %%\n",
                fc->check_within, fc->check_configurations, (int)floor(100.0 * fc->check_worst + 0.5));
}

/* A size in GB (decimal), or "map" for the mapped default. */
static int parse_gb(const char *s, double *out) {
    if (!strcmp(s, "map")) {
        *out = -1.0;
        return 0;
    }
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.0) || v > 1e6)
        return -1;
    *out = v;
    return 0;
}

int run_memory_option(run_memory *rm, int argc, char **argv, int *i, const char *model_dir) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--list-presets")) {
        run_memory_list_presets(stdout, model_dir);
        return 2;
    }
    if (!strcmp(a, "--cold")) {
        rm->cold = 1;
        return 1;
    }
    if (!strcmp(a, "--expert-prefetch")) {
        if (v && (!strcmp(v, "on") || !strcmp(v, "off"))) {
            rm->expert_prefetch = !strcmp(v, "on");
            (*i)++;
            return 1;
        }
        fprintf(stderr, "k3: --expert-prefetch '%s': give on or off\n", v ? v : "");
        return -1;
    }
    if (!strcmp(a, "--reads")) {
        static const char *const modes[] = {"auto", "direct", "buffered"}; /* k3_reads order */
        for (int m = 0; v && m < 3; m++)
            if (!strcmp(v, modes[m])) {
                rm->reads = m;
                (*i)++;
                return 1;
            }
        fprintf(stderr, "k3: --reads '%s': give auto, direct or buffered\n", v ? v : "");
        return -1;
    }
    const int budget = !strcmp(a, "--trunk-gb") || !strcmp(a, "--cache-gb");
    if (!budget && strcmp(a, "--preset") && strcmp(a, "--io-threads") && strcmp(a, "--fault-expert-read"))
        return 0;
    if (!v) {
        fprintf(stderr, "k3: %s needs a value\n\n", a);
        cli_usage(stderr);
        return -1;
    }
    (*i)++;
    if ((budget || !strcmp(a, "--preset")) && rm->n_steps == RUN_MEMORY_MAX_STEPS) {
        fprintf(stderr, "k3: more than %d budget options\n", RUN_MEMORY_MAX_STEPS);
        return -1;
    }
    if (!strcmp(a, "--preset")) {
        /* A name is checked here, before any work; "auto" is sized when the run resolves it. */
        k3_model_params scratch;
        k3_model_params_default(&scratch);
        char why[512];
        if (strcmp(v, "auto") && k3_preset_resolve(v, NULL, NULL, &scratch, why, sizeof why) != K3_OK) {
            fprintf(stderr, "k3: %s\n\n", why);
            run_memory_list_presets(stderr, NULL);
            return -1;
        }
        rm->steps[rm->n_steps].kind = 'p';
        rm->steps[rm->n_steps++].preset = v;
        return 1;
    }
    if (budget) {
        double gb;
        if (parse_gb(v, &gb)) {
            fprintf(stderr, "k3: %s '%s': give a size in GB (e.g. 0.25) or 'map'\n", a, v);
            return -1;
        }
        rm->steps[rm->n_steps].kind = a[2] == 't' ? 't' : 'c';
        rm->steps[rm->n_steps++].gb = gb;
        return 1;
    }
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    const int threads = !strcmp(a, "--io-threads");
    if (errno || end == v || *end || n < (threads ? 1 : 0) || n > (threads ? 16 : 1L << 40)) {
        fprintf(stderr, "k3: %s '%s' is not a number in range\n", a, v);
        return -1;
    }
    if (threads)
        rm->io_threads = (int)n;
    else
        rm->fault_expert_read = n;
    return 1;
}

int run_memory_drop_page_cache(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    char path[4096];
    int n = 0;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        fdatasync(fd);
        if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            n++;
        close(fd);
    }
    closedir(d);
    return n;
}

/* Bytes per token of a batch: tens to hundreds of kB, so kB below a MB. */
static const char *per_token(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= 1000000)
        return human((double)bytes, buf, size);
    snprintf(buf, size, "%.1f kB", (double)bytes / 1e3);
    return buf;
}

static void print_plan(const k3_plan *p) {
    char a[32], b[32], c[32];
    fprintf(stderr, "memory plan (a forecast; the measured peak RSS is printed after the run):\n");
    if (p->trunk_mapped)
        fprintf(stderr, "  %-18s %12s  mapped from the shards\n", "trunk", human((double)p->trunk, a, sizeof a));
    else
        fprintf(stderr, "  %-18s %12s  %d of %d layers pinned, %d ring slot%s of %s (all layers: %s)\n", "trunk",
                human((double)p->trunk, a, sizeof a), p->layers_pinned, p->layers, p->ring_slots,
                p->ring_slots == 1 ? "" : "s", human((double)p->ring_slot_bytes, b, sizeof b),
                human((double)p->dense_weights, c, sizeof c));
    fprintf(stderr, "  %-18s %12s  %s\n", "embed + lm_head", human((double)p->embed_lm_head, a, sizeof a),
            p->trunk_mapped ? "mapped" : "lm_head mapped, embedding rows read on demand");
    if (p->experts_mapped)
        fprintf(stderr, "  %-18s %12s  all %lld routed experts mapped\n", "expert cache",
                human((double)p->expert_cache, a, sizeof a), (long long)p->experts);
    else
        fprintf(stderr, "  %-18s %12s  %d slots of %.1f kB, %.1f%% of the %lld-expert pool (%s)\n", "expert cache",
                human((double)p->expert_cache, a, sizeof a), p->expert_slots, (double)p->expert_slot_bytes / 1e3,
                100.0 * (double)p->expert_slots / (double)p->experts, (long long)p->experts,
                human((double)p->expert_pool, b, sizeof b));
    fprintf(stderr, "  %-18s %12s\n", "vectors", human((double)p->vectors, a, sizeof a));
    fprintf(stderr, "  %-18s %12s\n", "index", human((double)p->index, a, sizeof a));
    fprintf(stderr, "  %-18s %12s\n", "recurrent state", human((double)p->recurrent_state, a, sizeof a));
    fprintf(stderr, "  %-18s %12s  %d positions\n", "KV cache", human((double)p->kv_cache, a, sizeof a),
            p->max_context);
    if (p->batch_sized)
        fprintf(stderr, "  %-18s %12s  prefill batch %d, sized to memory at %s per token%s\n", "buffers",
                human((double)p->buffers, a, sizeof a), p->batch, per_token(p->batch_token_bytes, b, sizeof b),
                p->ring_slots > 0 || p->expert_slots < p->experts ? "" : " (nothing streams: the default)");
    else
        fprintf(stderr, "  %-18s %12s  batch %d (%s per token)\n", "buffers", human((double)p->buffers, a, sizeof a),
                p->batch, per_token(p->batch_token_bytes, b, sizeof b));
    fprintf(stderr, "  %-18s %12s  of %s available\n", "total", human((double)p->total, a, sizeof a),
            p->available ? human((double)p->available, b, sizeof b) : "an unknown amount");
}

int run_memory_resolve(run_memory *rm, const char *model_dir, const k3_context_params *cp) {
    char detail[2048];
    k3_model_params_default(&rm->params);
    for (int i = 0; i < rm->n_steps; i++) {
        if (rm->steps[i].kind == 't') {
            rm->params.trunk_bytes = rm->steps[i].gb < 0 ? -1 : (int64_t)(rm->steps[i].gb * 1e9);
            continue;
        }
        if (rm->steps[i].kind == 'c') {
            rm->params.expert_cache_bytes = rm->steps[i].gb < 0 ? -1 : (int64_t)(rm->steps[i].gb * 1e9);
            continue;
        }
        rm->preset_used = rm->steps[i].preset;
        const k3_status s = k3_preset_resolve(rm->preset_used, model_dir, cp, &rm->params, detail, sizeof detail);
        if (s != K3_OK) {
            fprintf(stderr, "k3: refusing to start (%s): %s\n", k3_status_name(s), detail);
            return s == K3_ERR_BUDGET ? 3 : 1;
        }
        if (!strcmp(rm->preset_used, "auto")) {
            char a[32], b[32];
            fprintf(stderr, "k3: preset auto: trunk %s, expert cache %s\n",
                    human((double)rm->params.trunk_bytes, a, sizeof a),
                    human((double)rm->params.expert_cache_bytes, b, sizeof b));
        }
    }
    rm->params.io_threads = rm->io_threads;
    rm->params.reads = rm->reads;
    rm->params.fault_expert_read = rm->fault_expert_read;
    rm->params.expert_prefetch = rm->expert_prefetch;
    return 0;
}

int run_memory_prepare(run_memory *rm, const char *model_dir, const k3_context_params *cp) {
    char detail[2048];
    const int rc = run_memory_resolve(rm, model_dir, cp);
    if (rc)
        return rc;
    if (rm->cold)
        fprintf(stderr, "k3: dropped %d shards from the page cache (posix_fadvise DONTNEED)\n",
                run_memory_drop_page_cache(model_dir));
    const k3_status s = k3_plan_model(model_dir, &rm->params, cp, &rm->plan, detail, sizeof detail);
    if (s != K3_OK) {
        fprintf(stderr, "k3: %s (%s): %s\n", s == K3_ERR_BUDGET ? "refusing to start" : "planning the model failed",
                k3_status_name(s), detail);
        return s == K3_ERR_BUDGET ? 3 : 1;
    }
    print_plan(&rm->plan);
    if (!rm->plan.fits) {
        char need[32], have[32], gap[32], buf[32], tok[32];
        fprintf(stderr,
                "k3: refusing to start (budget): the plan needs %s and this machine has %s available, a shortfall "
                "of %s (buffers %s for a prefill batch of %d at %s per token); choose a smaller preset or "
                "--trunk-gb / --cache-gb, a shorter context or a smaller --batch\n",
                human((double)rm->plan.total, need, sizeof need), human((double)rm->plan.available, have, sizeof have),
                human((double)(rm->plan.total - rm->plan.available), gap, sizeof gap),
                human((double)rm->plan.buffers, buf, sizeof buf), rm->plan.batch,
                per_token(rm->plan.batch_token_bytes, tok, sizeof tok));
        return 3;
    }
    return 0;
}

void run_memory_start(run_memory *rm, const k3_model *model) {
    k3_model_memory_counters(model, &rm->before);
}

void run_memory_stop(run_memory *rm, const k3_model *model, double wall_seconds, double peak_rss) {
    k3_model_memory_counters(model, &rm->after);
    rm->wall_seconds = wall_seconds;
    rm->peak_rss = peak_rss;
    rm->reported = 1;
    const k3_memory_counters *a = &rm->before, *b = &rm->after;
    const double wait = (b->expert_wait_seconds - a->expert_wait_seconds) + (b->trunk_wait_seconds - a->trunk_wait_seconds);
    const double read = (b->expert_read_seconds - a->expert_read_seconds) + (b->trunk_read_seconds - a->trunk_read_seconds);
    char x[32], y[32], z[32];
    fprintf(stderr, "memory: peak RSS %s measured, plan %s (%+.1f%%)\n", human(peak_rss, x, sizeof x),
            human((double)rm->plan.total, y, sizeof y), 100.0 * (peak_rss / (double)rm->plan.total - 1.0));
    fprintf(stderr,
            "memory: I/O share %.1f%% of %.2f s wall-clock (waiting on trunk %.2f s + experts %.2f s; reads took "
            "%.2f s, overlapped with compute)\n",
            wall_seconds > 0 ? 100.0 * wait / wall_seconds : 0.0, wall_seconds,
            b->trunk_wait_seconds - a->trunk_wait_seconds, b->expert_wait_seconds - a->expert_wait_seconds, read);
    if (!rm->plan.experts_mapped) {
        const uint64_t req = b->expert_requests - a->expert_requests;
        fprintf(stderr, "memory: experts %llu requested, %llu retained (%.1f%%), %llu evicted, %s read\n",
                (unsigned long long)req, (unsigned long long)(b->expert_retained - a->expert_retained),
                req ? 100.0 * (double)(b->expert_retained - a->expert_retained) / (double)req : 0.0,
                (unsigned long long)(b->expert_evictions - a->expert_evictions),
                human((double)(b->expert_bytes_read - a->expert_bytes_read), z, sizeof z));
        const uint64_t guesses = b->expert_guesses - a->expert_guesses;
        const uint64_t early = b->expert_early_reads - a->expert_early_reads;
        if (rm->expert_prefetch)
            fprintf(stderr,
                    "memory: early reads (--expert-prefetch on): %llu experts guessed, %llu routed (%.1f%%); %llu read "
                    "early (%s), %llu used (%.1f%%), %.2f s of reads taken off the passes' path\n",
                    (unsigned long long)guesses,
                    (unsigned long long)(b->expert_guesses_routed - a->expert_guesses_routed),
                    guesses ? 100.0 * (double)(b->expert_guesses_routed - a->expert_guesses_routed) / (double)guesses
                            : 0.0,
                    (unsigned long long)early, human((double)(b->expert_early_bytes - a->expert_early_bytes), x, sizeof x),
                    (unsigned long long)(b->expert_early_used - a->expert_early_used),
                    early ? 100.0 * (double)(b->expert_early_used - a->expert_early_used) / (double)early : 0.0,
                    b->expert_early_used_seconds - a->expert_early_used_seconds);
    }
    if (!rm->plan.trunk_mapped)
        fprintf(stderr, "memory: trunk %llu layers streamed, %s read (%s pinned at open in %.2f s)\n",
                (unsigned long long)(b->trunk_layer_reads - a->trunk_layer_reads),
                human((double)(b->trunk_bytes_read - a->trunk_bytes_read), x, sizeof x),
                human((double)b->trunk_pinned_bytes, y, sizeof y), b->trunk_pinned_seconds);
    if (!rm->plan.trunk_mapped || !rm->plan.experts_mapped) {
        const uint64_t streamed =
            (b->expert_bytes_read - a->expert_bytes_read) + (b->trunk_bytes_read - a->trunk_bytes_read);
        fprintf(stderr, "memory: %s of %s read went around the page cache (--reads %s)\n",
                human((double)(b->direct_bytes_read - a->direct_bytes_read), x, sizeof x),
                human((double)streamed, y, sizeof y),
                rm->reads == K3_READS_DIRECT ? "direct" : rm->reads == K3_READS_BUFFERED ? "buffered" : "auto");
    }
}

void run_memory_json(const run_memory *rm, FILE *f) {
    if (!rm->reported)
        return;
    const k3_plan *p = &rm->plan;
    const k3_memory_counters *a = &rm->before, *b = &rm->after;
    fprintf(f, ",\n  \"memory\": {\n    \"preset\": \"%s\",\n    \"trunk_budget_bytes\": %lld,\n"
               "    \"expert_cache_budget_bytes\": %lld,\n",
            rm->preset_used ? rm->preset_used : "", (long long)rm->params.trunk_bytes,
            (long long)rm->params.expert_cache_bytes);
    fprintf(f,
            "    \"plan\": {\"trunk\": %llu, \"embed_lm_head\": %llu, \"vectors\": %llu, \"index\": %llu, "
            "\"expert_cache\": %llu, \"recurrent_state\": %llu, \"kv_cache\": %llu, \"buffers\": %llu, "
            "\"total\": %llu, \"available\": %llu, \"layers\": %d, \"layers_pinned\": %d, \"ring_slots\": %d, "
            "\"ring_slot_bytes\": %llu, \"dense_weights\": %llu, \"expert_slots\": %d, \"expert_slot_bytes\": %llu, "
            "\"expert_pool\": %llu, \"experts\": %lld, \"trunk_mapped\": %d, \"experts_mapped\": %d, "
            "\"trunk_floor\": %llu, \"cache_floor\": %llu, \"batch\": %d, \"batch_sized\": %d, "
            "\"batch_token_bytes\": %llu},\n",
            (unsigned long long)p->trunk, (unsigned long long)p->embed_lm_head, (unsigned long long)p->vectors,
            (unsigned long long)p->index, (unsigned long long)p->expert_cache, (unsigned long long)p->recurrent_state,
            (unsigned long long)p->kv_cache, (unsigned long long)p->buffers, (unsigned long long)p->total,
            (unsigned long long)p->available, p->layers, p->layers_pinned, p->ring_slots,
            (unsigned long long)p->ring_slot_bytes, (unsigned long long)p->dense_weights, p->expert_slots,
            (unsigned long long)p->expert_slot_bytes, (unsigned long long)p->expert_pool, (long long)p->experts,
            p->trunk_mapped, p->experts_mapped, (unsigned long long)p->trunk_floor,
            (unsigned long long)p->cache_floor, p->batch, p->batch_sized, (unsigned long long)p->batch_token_bytes);
    fprintf(f,
            "    \"wall_seconds\": %.6f,\n    \"peak_rss_bytes\": %.0f,\n    \"expert_requests\": %llu,\n"
            "    \"expert_retained\": %llu,\n    \"expert_evictions\": %llu,\n    \"expert_reads\": %llu,\n"
            "    \"expert_bytes_read\": %llu,\n    \"expert_read_seconds\": %.6f,\n    \"expert_wait_seconds\": %.6f,\n"
            "    \"trunk_layer_reads\": %llu,\n    \"trunk_bytes_read\": %llu,\n    \"trunk_read_seconds\": %.6f,\n"
            "    \"trunk_wait_seconds\": %.6f,\n    \"trunk_pinned_bytes\": %llu,\n    \"trunk_pinned_seconds\": %.6f,\n"
            "    \"direct_bytes_read\": %llu,\n    \"forward_passes\": %llu,\n    \"forward_seconds\": %.6f,\n",
            rm->wall_seconds, rm->peak_rss, (unsigned long long)(b->expert_requests - a->expert_requests),
            (unsigned long long)(b->expert_retained - a->expert_retained),
            (unsigned long long)(b->expert_evictions - a->expert_evictions),
            (unsigned long long)(b->expert_reads - a->expert_reads),
            (unsigned long long)(b->expert_bytes_read - a->expert_bytes_read),
            b->expert_read_seconds - a->expert_read_seconds, b->expert_wait_seconds - a->expert_wait_seconds,
            (unsigned long long)(b->trunk_layer_reads - a->trunk_layer_reads),
            (unsigned long long)(b->trunk_bytes_read - a->trunk_bytes_read),
            b->trunk_read_seconds - a->trunk_read_seconds, b->trunk_wait_seconds - a->trunk_wait_seconds,
            (unsigned long long)b->trunk_pinned_bytes, b->trunk_pinned_seconds,
            (unsigned long long)(b->direct_bytes_read - a->direct_bytes_read),
            (unsigned long long)(b->forward_passes - a->forward_passes), b->forward_seconds - a->forward_seconds);
    fprintf(f,
            "    \"expert_prefetch\": %d,\n    \"expert_guesses\": %llu,\n    \"expert_guesses_routed\": %llu,\n"
            "    \"expert_early_reads\": %llu,\n    \"expert_early_bytes\": %llu,\n    \"expert_early_used\": %llu,\n"
            "    \"expert_early_used_seconds\": %.6f\n  }",
            rm->params.expert_prefetch, (unsigned long long)(b->expert_guesses - a->expert_guesses),
            (unsigned long long)(b->expert_guesses_routed - a->expert_guesses_routed),
            (unsigned long long)(b->expert_early_reads - a->expert_early_reads),
            (unsigned long long)(b->expert_early_bytes - a->expert_early_bytes),
            (unsigned long long)(b->expert_early_used - a->expert_early_used),
            b->expert_early_used_seconds - a->expert_early_used_seconds);
}
