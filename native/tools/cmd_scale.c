/* cmd_scale.c - `k3 bench-scale`: where the time of a forward pass goes at the release's
 * width, layer by layer, next to the physical limits measured in the same process: the
 * memory bandwidth (a triad before each stretch of steps) and the disk's own read speed at
 * the engine's block sizes (diskprobe.h). It writes every figure raw to --out JSON;
 * scripts/bench/scale.ts runs it under several budgets, makes the tables of docs/SCALE.md
 * and the machine profile the forecast is made from (native/src/forecast.c).
 *
 * A step is one forward pass of one token. Per layer it records the time from the previous
 * site to the attention output (the mixer: waiting for a streamed layer, the residual mix,
 * the norm, KDA or MLA) and from there to the FFN output (the dense MLP, or the router, the
 * shared experts, the routed experts and their reads), the weight bytes the kernels streamed
 * in each, and the trunk and expert waits; then the final norm and lm_head. With --repeat
 * every step decodes the same token at the same position (restored from a checkpoint), so
 * the experts it needs stay cached and a step is fully resident; without it each step
 * decodes the next token of a fixed pseudo-random sequence (teacher forcing). Not the greedy
 * token: on a fixture with random weights greedy decoding falls into short loops, each
 * repeated token choosing the same experts again, so an expert cache would keep 46-77 % of
 * what a step needs where routing spread evenly (what the forecast assumes) keeps 0-44 %.
 * Options: cli_usage() in main.c. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "clock.h"
#include "commands.h"
#include "diskprobe.h"
#include "k3.h"
#include "membw.h"
#include "numbers.h"
#include "options.h"
#include "run_memory.h"

#define SCALE_MAX_POSITIONS 17
/* The longest verify it times (past 32 positions a context cuts a verify into passes of 32
 * logit rows, so such a count times several passes). */
#define SCALE_MAX_VERIFY 512
#define SCALE_MAX_DISK 8

/* The clock and the counters at one moment of a pass. */
typedef struct {
    double t;
    uint64_t weight_bytes;
    double trunk_wait, expert_wait;
    uint64_t expert_requests, expert_bytes_read;
} mark;

/* One layer of one step: mixer (previous site -> attention output), ffn (-> FFN output). */
typedef struct {
    double mixer_s, ffn_s;
    uint64_t mixer_bytes, ffn_bytes;
    double trunk_wait, expert_wait;
    uint64_t expert_requests, expert_bytes_read;
} layer_time;

typedef struct {
    double seconds;         /* the whole k3_decode call */
    double cpu_s;           /* CPU time of the process (every thread) during it: below
                               seconds x threads when other work took the cores */
    double embed_s, head_s; /* call start -> embedding site; last FFN output -> logits */
    uint64_t head_bytes;
    double bandwidth;       /* the triad measured before this step's round (0: none) */
    /* What the readers did during the call (they also run ahead of it: a ring slot's next
     * layer, the next pass's experts; summed over steps this is the run's steady rate):
     * expert bytes and reader-seconds inside pread, trunk bytes and seconds. */
    uint64_t expert_bytes_read, trunk_bytes_read;
    double expert_read_s, trunk_read_s;
    uint64_t trunk_layer_reads, passes; /* streamed layers read into the ring; forward passes */
    layer_time *layers;     /* (n_layers) */
} step_time;

typedef struct {
    const k3_model *model;
    int n_layers;
    mark start, prev;
    layer_time *into; /* (n_layers) the current step's layers, or NULL: not recording */
    double embed_s, head_s;
    uint64_t head_bytes;
    char mixer[64][4], ffn[64][4]; /* per layer "kda"/"mla", "mlp"/"moe" (first 64 layers) */
} recorder;

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static mark mark_now(const k3_model *model) {
    k3_counters c;
    k3_memory_counters m;
    k3_counters_get(&c);
    k3_model_memory_counters(model, &m);
    return (mark){clock_now_s(), c.weight_bytes_read, m.trunk_wait_seconds, m.expert_wait_seconds, m.expert_requests,
                  m.expert_bytes_read};
}

static void interval(const mark *a, const mark *b, double *s, uint64_t *bytes, layer_time *lt) {
    *s = b->t - a->t;
    *bytes = b->weight_bytes - a->weight_bytes;
    lt->trunk_wait += b->trunk_wait - a->trunk_wait;
    lt->expert_wait += b->expert_wait - a->expert_wait;
    lt->expert_requests += b->expert_requests - a->expert_requests;
    lt->expert_bytes_read += b->expert_bytes_read - a->expert_bytes_read;
}

static void on_site(void *user, const k3_activation *a) {
    recorder *r = user;
    if (a->layer >= 0 && a->layer < 64 && a->kind) {
        const int attn = a->site == K3_SITE_ATTN_INPUT || a->site == K3_SITE_ATTN_OUTPUT;
        snprintf(attn ? r->mixer[a->layer] : r->ffn[a->layer], 4, "%s", a->kind);
    }
    if (!r->into || (a->site != K3_SITE_EMBED && a->site != K3_SITE_ATTN_OUTPUT && a->site != K3_SITE_FFN_OUTPUT &&
                     a->site != K3_SITE_LOGITS))
        return;
    const mark m = mark_now(r->model);
    if (a->site == K3_SITE_EMBED) {
        r->embed_s = m.t - r->start.t;
    } else if (a->site == K3_SITE_LOGITS) {
        layer_time ignored = {0};
        double s;
        interval(&r->prev, &m, &s, &r->head_bytes, &ignored);
        r->head_s = s;
    } else {
        layer_time *lt = &r->into[a->layer];
        if (a->site == K3_SITE_ATTN_OUTPUT)
            interval(&r->prev, &m, &lt->mixer_s, &lt->mixer_bytes, lt);
        else
            interval(&r->prev, &m, &lt->ffn_s, &lt->ffn_bytes, lt);
    }
    r->prev = m;
}

/* Decodes ids (n) with every site timed into *out; argmax (n) receives the greedy tokens. */
static k3_status timed_decode(recorder *r, k3_context *ctx, const int32_t *ids, int n, int32_t *argmax,
                              step_time *out) {
    memset(out->layers, 0, sizeof *out->layers * (size_t)r->n_layers);
    r->into = out->layers;
    r->embed_s = r->head_s = 0.0;
    r->head_bytes = 0;
    const double cpu0 = cpu_now();
    k3_memory_counters c0, c1;
    k3_model_memory_counters(r->model, &c0);
    r->start = r->prev = mark_now(r->model);
    const k3_status s = k3_decode(ctx, ids, n, NULL, 0, argmax);
    out->seconds = clock_now_s() - r->start.t;
    out->cpu_s = cpu_now() - cpu0;
    k3_model_memory_counters(r->model, &c1);
    out->expert_bytes_read = c1.expert_bytes_read - c0.expert_bytes_read;
    out->expert_read_s = c1.expert_read_seconds - c0.expert_read_seconds;
    out->trunk_bytes_read = c1.trunk_bytes_read - c0.trunk_bytes_read;
    out->trunk_read_s = c1.trunk_read_seconds - c0.trunk_read_seconds;
    out->trunk_layer_reads = c1.trunk_layer_reads - c0.trunk_layer_reads;
    out->passes = c1.forward_passes - c0.forward_passes;
    r->into = NULL;
    out->embed_s = r->embed_s;
    out->head_s = r->head_s;
    out->head_bytes = r->head_bytes;
    return s;
}

/* The trunk's reader reads ahead across passes, filling every free ring slot with the next
 * layers in order (trunk.h), so counters taken while it is still reading ahead count a
 * varying share of those reads. Waits until the streamed layers read reach `expected` (the
 * layers the passes so far consumed plus a full ring), or pass it (an excess is reported as
 * it is), or 120 s have gone; returns the count. With a full ring at both ends, a window's
 * count is exactly the layers its passes consumed. */
static uint64_t wait_read_ahead(const k3_model *model, uint64_t expected) {
    const struct timespec poll = {0, 10 * 1000 * 1000};
    k3_memory_counters c;
    for (int i = 0;; i++) {
        k3_model_memory_counters(model, &c);
        if (c.trunk_layer_reads >= expected || i >= 12000)
            return c.trunk_layer_reads;
        nanosleep(&poll, NULL);
    }
}

typedef struct {
    const char *dir, *out;
    const char *disk_extents; /* NULL: the probes read whole shards */
    int threads, prompt_len, steps, rounds, repeat, cold_each_token, prefill, prefill_batch, verify_reps;
    int positions[SCALE_MAX_POSITIONS], n_positions;
    uint64_t disk_blocks[SCALE_MAX_DISK];
    int n_disk, disk_random;
    double disk_mixed_gb; /* > 0: also both probes at once, the sequential one over this
                             many GB at the largest --disk block size */
    int disk_twice; /* run each probe twice and keep the second: bytes a virtual disk's host
                       has just served come back from its cache, as a pass's re-reads do */
    int disk_after; /* the sequential, random and mixed probes again after the steps: the
                       run between them saw the disk somewhere from one to the other */
    int beside_reads; /* after the steps: the triad alone and while the random probe's reads
                         run, and with --repeat the steps again beside such reads */
    double disk_gb;
    run_memory memory;
} scale_options;

/* The probes read the way the engine's reads do in this run: around the page cache under
 * --reads direct, else through it. */
static int probe_direct(const scale_options *o) {
    return o->memory.reads == K3_READS_DIRECT;
}

static int parse_list(const char *s, int *out, int cap, int lo, int hi) {
    int n = 0;
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (errno || end == p || v < lo || v > hi || n == cap || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* The list options, which a table cannot describe. */
static int list_option(void *user, int argc, char **argv, int *i) {
    scale_options *o = user;
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if ((!strcmp(a, "--verify") || !strcmp(a, "--disk")) && !v)
        return options_usage_error("k3 bench-scale", "a value is missing after '%s'", a);
    if (!strcmp(a, "--verify")) {
        if ((o->n_positions = parse_list(v, o->positions, SCALE_MAX_POSITIONS, 1, SCALE_MAX_VERIFY)) < 0)
            return options_usage_error("k3 bench-scale", "--verify '%s': expected up to 17 position counts 1..%d", v, SCALE_MAX_VERIFY);
    } else if (!strcmp(a, "--disk")) {
        int mb[SCALE_MAX_DISK];
        if ((o->n_disk = parse_list(v, mb, SCALE_MAX_DISK, 0, 4096)) < 0)
            return options_usage_error("k3 bench-scale", "--disk '%s': expected up to 8 block sizes in MB (0: the expert slot)", v);
        for (int k = 0; k < o->n_disk; k++)
            o->disk_blocks[k] = (uint64_t)mb[k] * 1000000ULL;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

static int parse_options(int argc, char **argv, scale_options *o) {
    *o = (scale_options){.dir = argv[1], .threads = 1, .prompt_len = 8, .steps = 8, .rounds = 0, .verify_reps = 3,
                         .disk_gb = 1.0};
    run_memory_init(&o->memory);
    const option table[] = {
        {"--threads", OPTION_INT, &o->threads, 1, 1 << 16},
        {"--prompt-tokens", OPTION_INT, &o->prompt_len, 1, 1 << 16},
        {"--steps", OPTION_INT, &o->steps, 1, 1 << 16},
        {"--rounds", OPTION_INT, &o->rounds, 0, 1 << 16},
        {"--prefill", OPTION_INT, &o->prefill, 0, 1 << 16},
        {"--prefill-batch", OPTION_INT, &o->prefill_batch, 0, 1 << 16},
        {"--verify-reps", OPTION_INT, &o->verify_reps, 1, 1 << 16},
        {"--disk-random", OPTION_INT, &o->disk_random, 0, 1 << 16},
        {"--disk-gb", OPTION_POSITIVE, &o->disk_gb, 0, 1000},
        {"--disk-mixed", OPTION_POSITIVE, &o->disk_mixed_gb, 0, 1000},
        {"--disk-extents", OPTION_TEXT, &o->disk_extents, 0, 0},
        {"--out", OPTION_TEXT, &o->out, 0, 0},
        {"--repeat", OPTION_FLAG, &o->repeat, 0, 0},
        {"--disk-twice", OPTION_FLAG, &o->disk_twice, 0, 0},
        {"--disk-after", OPTION_FLAG, &o->disk_after, 0, 0},
        {"--beside-reads", OPTION_FLAG, &o->beside_reads, 0, 0},
        {"--cold-each-token", OPTION_FLAG, &o->cold_each_token, 0, 0},
    };
    const option_parser parser = {"k3 bench-scale", table, (int)(sizeof table / sizeof table[0]), &o->memory, o->dir,
                                  list_option, o};
    const int rc = options_parse(&parser, argc, argv, 2);
    if (rc)
        return rc;
    if (o->rounds > o->steps)
        return options_usage_error("k3 bench-scale", "--rounds %d is more than --steps %d", o->rounds, o->steps);
    if (o->beside_reads && (!o->rounds || !o->disk_random))
        return options_usage_error("k3 bench-scale", "--beside-reads needs --rounds (the triad) and --disk-random (the reads)");
    return 0;
}

/* The random probe's reads over and over on their own thread until told to stop. */
typedef struct {
    const scale_options *o;
    uint64_t block;
    atomic_int stop;
    uint64_t bytes;
    double seconds;
    int failed;
} background_reads;

static void *read_in_background(void *arg) {
    background_reads *b = arg;
    char why[512];
    for (unsigned seed = 100; !atomic_load(&b->stop); seed++) {
        diskprobe_result r;
        if (diskprobe_random(b->o->dir, b->o->disk_extents, probe_direct(b->o), b->block, b->o->disk_random,
                             b->o->memory.io_threads, seed, &r, why, sizeof why)) {
            b->failed = 1;
            break;
        }
        b->bytes += r.bytes;
        b->seconds += r.seconds;
    }
    return NULL;
}

static int background_start(background_reads *b, const scale_options *o, uint64_t block, pthread_t *tid) {
    *b = (background_reads){o, block, 0, 0, 0.0, 0};
    atomic_init(&b->stop, 0);
    if (pthread_create(tid, NULL, read_in_background, b))
        return -1;
    /* Let the readers get going: dropping the shards from the page cache comes first. */
    struct timespec settle = {0, 300 * 1000 * 1000};
    nanosleep(&settle, NULL);
    return 0;
}

/* Stops the readers; their rate in bytes/s, or -1 when they could not read. */
static double background_stop(background_reads *b, pthread_t tid) {
    atomic_store(&b->stop, 1);
    pthread_join(tid, NULL);
    return b->failed || !b->seconds ? -1.0 : (double)b->bytes / b->seconds;
}

#define BESIDE_READS_SAMPLES 5

/* What computing beside disk reads leaves of the machine: on a virtual machine the host's
 * side of each read takes memory bandwidth (and the guest's copy out of its page cache,
 * CPU) from the machine that computes. Five pairs, each the triad alone and then again while
 * the disk reads random experts on the engine's reader count, side by side because this
 * machine's triad drifts by 1.5x within minutes (five of each in a row gave a slowdown of
 * 1.13x in one run and 1.70x in the next); the ratio is the pairs' median. With --repeat,
 * the same step as many times again beside such reads. */
typedef struct {
    double triad_alone, triad_reading, triad_read_rate;
    double *steps; /* (n_steps) seconds, or NULL */
    int n_steps;
    double steps_read_rate;
} beside_reads;

static int measure_beside_reads(const scale_options *o, const membw *tr, uint64_t block, recorder *rec,
                                k3_context *ctx, const int32_t *ids, int32_t *argmax, step_time *scratch,
                                beside_reads *out) {
    double alone[BESIDE_READS_SAMPLES], reading[BESIDE_READS_SAMPLES], ratio[BESIDE_READS_SAMPLES];
    double read_bytes = 0.0, read_seconds = 0.0;
    background_reads b;
    pthread_t tid;
    for (int i = 0; i < BESIDE_READS_SAMPLES; i++) {
        alone[i] = membw_triad(tr, o->threads);
        if (background_start(&b, o, block, &tid))
            return -1;
        reading[i] = membw_triad(tr, o->threads);
        if (background_stop(&b, tid) < 0)
            return -1;
        read_bytes += (double)b.bytes;
        read_seconds += b.seconds;
        ratio[i] = alone[i] / reading[i];
    }
    out->triad_read_rate = read_bytes / read_seconds;
    /* The alone figure is the median; the reading one is what the median ratio leaves of it,
     * so triad_alone / triad_reading is the pairs' median slowdown. */
    out->triad_alone = numbers_median(alone, BESIDE_READS_SAMPLES);
    out->triad_reading = out->triad_alone / numbers_median(ratio, BESIDE_READS_SAMPLES);
    if (!o->repeat)
        return 0;
    if (background_start(&b, o, block, &tid))
        return -1;
    k3_status s = K3_OK;
    for (int i = 0; s == K3_OK && i < out->n_steps; i++) {
        const int32_t tok = ids[o->prompt_len];
        if ((s = k3_sync(ctx, ids, o->prompt_len, NULL)) == K3_OK && (s = timed_decode(rec, ctx, &tok, 1, argmax, scratch)) == K3_OK)
            out->steps[i] = scratch->seconds;
    }
    out->steps_read_rate = background_stop(&b, tid);
    return s == K3_OK && out->steps_read_rate > 0 ? 0 : -1;
}

/* The sequential probes (one per --disk block size), the random one and, with
 * --disk-mixed, both at once, each twice with --disk-twice (the second kept); `when`
 * labels the lines on stderr. */
static int disk_probes(const scale_options *o, const k3_plan *plan, const char *when, diskprobe_result *seq,
                       diskprobe_result *rnd, diskprobe_result *mixed) {
    char detail[2048];
    for (int k = 0; k < o->n_disk; k++) {
        const uint64_t block = o->disk_blocks[k] ? o->disk_blocks[k] : plan->expert_slot_bytes;
        /* Each block size reads its own stretch: on a virtual disk a stretch read once comes
         * back faster from the host's cache. */
        const uint64_t bytes = (uint64_t)(o->disk_gb * 1e9);
        for (int pass = 0; pass <= o->disk_twice; pass++)
            if (diskprobe_sequential(o->dir, o->disk_extents, probe_direct(o), block, (uint64_t)k * bytes, bytes,
                                     &seq[k], detail, sizeof detail)) {
                fprintf(stderr, "k3 bench-scale: disk probe failed: %s\n", detail);
                return -1;
            }
        fprintf(stderr, "k3 bench-scale: disk%s, cold, sequential %.1f MB blocks: %.1f MB/s\n", when,
                (double)block / 1e6, (double)seq[k].bytes / seq[k].seconds / 1e6);
    }
    for (int pass = 0; o->disk_random && pass <= o->disk_twice; pass++) {
        if (diskprobe_random(o->dir, o->disk_extents, probe_direct(o), plan->expert_slot_bytes, o->disk_random,
                             o->memory.io_threads, 7, rnd, detail, sizeof detail)) {
            fprintf(stderr, "k3 bench-scale: disk probe failed: %s\n", detail);
            return -1;
        }
        fprintf(stderr, "k3 bench-scale: disk%s, cold, %d random expert-sized reads on %d readers: %.1f MB/s\n", when,
                o->disk_random, rnd->readers, (double)rnd->bytes / rnd->seconds / 1e6);
    }
    for (int pass = 0; o->disk_mixed_gb > 0.0 && o->disk_random && o->n_disk && pass <= o->disk_twice; pass++) {
        uint64_t block = 0;
        for (int k = 0; k < o->n_disk; k++)
            block = o->disk_blocks[k] > block ? o->disk_blocks[k] : block;
        if (diskprobe_mixed(o->dir, o->disk_extents, probe_direct(o), block ? block : plan->expert_slot_bytes, 0,
                            (uint64_t)(o->disk_mixed_gb * 1e9), plan->expert_slot_bytes, o->disk_random,
                            o->memory.io_threads, 7, mixed, detail, sizeof detail)) {
            fprintf(stderr, "k3 bench-scale: disk probe failed: %s\n", detail);
            return -1;
        }
        fprintf(stderr, "k3 bench-scale: disk%s, cold, both at once: %.1f MB/s\n", when,
                (double)mixed->bytes / mixed->seconds / 1e6);
    }
    return 0;
}

static void json_disk(FILE *f, const char *key, const diskprobe_result *d, int n) {
    fprintf(f, ",\n  \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "%s\n    {\"block\": %llu, \"readers\": %d, \"bytes\": %llu, \"seconds\": %.6f, \"read_seconds\": %.6f, "
                "\"cpu_seconds\": %.6f}",
                i ? "," : "", (unsigned long long)d[i].block, d[i].readers, (unsigned long long)d[i].bytes,
                d[i].seconds, d[i].read_seconds, d[i].cpu_seconds);
    fprintf(f, "\n  ]");
}

static void json_step(FILE *f, const step_time *st, int n_layers) {
    fprintf(f, "{\"seconds\": %.6f, \"cpu_s\": %.6f, \"embed_s\": %.6f, \"head_s\": %.6f, \"head_bytes\": %llu, \"bandwidth\": %.0f, "
               "\"reads\": [%llu, %.6f, %llu, %.6f], \"layers\": [",
            st->seconds, st->cpu_s, st->embed_s, st->head_s, (unsigned long long)st->head_bytes, st->bandwidth,
            (unsigned long long)st->expert_bytes_read, st->expert_read_s, (unsigned long long)st->trunk_bytes_read,
            st->trunk_read_s);
    for (int l = 0; l < n_layers; l++) {
        const layer_time *t = &st->layers[l];
        fprintf(f, "%s[%.6f, %.6f, %llu, %llu, %.6f, %.6f, %llu, %llu]", l ? ", " : "", t->mixer_s, t->ffn_s,
                (unsigned long long)t->mixer_bytes, (unsigned long long)t->ffn_bytes, t->trunk_wait, t->expert_wait,
                (unsigned long long)t->expert_requests, (unsigned long long)t->expert_bytes_read);
    }
    fprintf(f, "]}");
}

static void load_average(double out[3]) {
    out[0] = out[1] = out[2] = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
            out[0] = out[1] = out[2] = -1.0;
        fclose(f);
    }
}

int scale_main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "k3 bench-scale: give MODEL_DIR\n\n");
        cli_usage(stderr);
        return 2;
    }
    scale_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.out)
        return options_usage_error("k3 bench-scale", "--out FILE is required");
    double load_before[3], load_after[3];
    load_average(load_before);

    /* The disk first, while nothing of the model is in memory. */
    diskprobe_result seq[SCALE_MAX_DISK], rnd = {0}, mixed = {0};
    k3_plan probe_plan;
    char detail[2048];
    if (o.n_disk || o.disk_random) {
        k3_status ps = k3_plan_model(o.dir, NULL, NULL, &probe_plan, detail, sizeof detail);
        if (ps != K3_OK) {
            fprintf(stderr, "k3 bench-scale: planning %s failed (%s): %s\n", o.dir, k3_status_name(ps), detail);
            return 1;
        }
    }
    if (disk_probes(&o, &probe_plan, "", seq, &rnd, &mixed))
        return 1;

    int max_positions = 1;
    for (int i = 0; i < o.n_positions; i++)
        max_positions = o.positions[i] > max_positions ? o.positions[i] : max_positions;
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = o.prompt_len + o.steps + max_positions + o.prefill + 2;
    cp.n_threads = o.threads;
    /* A prefill in the batches the plan allows (or --prefill-batch); never fewer than a
     * verify pass's positions, so verify passes stay whole (a sized batch is at least the
     * default 128, so only a longer verify pass fixes it). */
    const int batch = o.prefill ? o.prefill_batch : cp.batch;
    const int least = batch == K3_BATCH_AUTO && max_positions <= 128 ? 0 : max_positions;
    cp.batch = batch < least ? least : batch;
    if ((rc = run_memory_prepare(&o.memory, o.dir, &cp)) != 0)
        return rc;
    rc = 1;
    k3_model *model = NULL;
    k3_context *ctx = NULL;
    recorder rec = {0};
    step_time *steps = NULL, prefill = {0}, *verify = NULL;
    int32_t *ids = NULL, *argmax = NULL;
    membw tr = {0};
    FILE *f = NULL;
    const int n_verify = o.n_positions * o.verify_reps;
    const double t_open = clock_now_s();
    k3_status s = k3_model_open(o.dir, &o.memory.params, &model, detail, sizeof detail);
    if (s != K3_OK) {
        fprintf(stderr, "k3 bench-scale: loading the model failed (%s): %s\n", k3_status_name(s), detail);
        return s == K3_ERR_BUDGET ? 3 : 1;
    }
    const double open_s = clock_now_s() - t_open;
    const int n_layers = k3_model_layer_count(model), vocab = k3_model_vocab_size(model);
    if ((s = k3_context_open(model, &cp, &ctx, detail, sizeof detail)) != K3_OK) {
        fprintf(stderr, "k3 bench-scale: creating the context failed (%s): %s\n", k3_status_name(s), detail);
        goto done;
    }
    rec.model = model;
    rec.n_layers = n_layers;
    k3_context_observe(ctx, on_site, &rec);
    steps = calloc((size_t)o.steps, sizeof *steps);
    verify = calloc((size_t)n_verify + 1, sizeof *verify);
    ids = malloc(sizeof *ids * (size_t)cp.max_context);
    argmax = malloc(sizeof *argmax * (size_t)cp.max_context);
    int ok = steps && verify && ids && argmax;
    for (int i = 0; ok && i < o.steps; i++)
        ok = (steps[i].layers = calloc((size_t)n_layers, sizeof(layer_time))) != NULL;
    for (int i = 0; ok && i < n_verify; i++)
        ok = (verify[i].layers = calloc((size_t)n_layers, sizeof(layer_time))) != NULL;
    if (ok && o.prefill)
        ok = (prefill.layers = calloc((size_t)n_layers, sizeof(layer_time))) != NULL;
    if (!ok || (o.rounds && membw_open(&tr))) {
        fprintf(stderr, "k3 bench-scale: out of memory for the records or the triad's arrays\n");
        goto done;
    }
    /* A fixed pseudo-random sequence inside the vocabulary: the same work on every run. */
    unsigned seed = 12345;
    for (int i = 0; i < cp.max_context; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (unsigned)vocab);
    }
    run_memory_start(&o.memory, model);
    const double t_run = clock_now_s();
    if (o.prefill) {
        /* The ring full before and after (a model opened ahead of a prompt has filled it), so
         * the count is the prefill's passes x streamed layers; the wait after is outside the
         * timed pass. */
        k3_plan ring;
        k3_model_plan(model, &cp, &ring);
        const uint64_t read_before = wait_read_ahead(model, (uint64_t)ring.ring_slots);
        if ((s = timed_decode(&rec, ctx, ids, o.prefill, NULL, &prefill)) != K3_OK)
            goto failed;
        prefill.trunk_layer_reads =
            wait_read_ahead(model, read_before + prefill.passes * (uint64_t)(ring.layers - ring.layers_pinned)) -
            read_before;
        fprintf(stderr, "k3 bench-scale: prefill %d tokens in %.2f s\n", o.prefill, prefill.seconds);
        k3_context_reset(ctx);
    }
    if ((s = k3_decode(ctx, ids, o.prompt_len, NULL, 0, argmax)) != K3_OK ||
        (o.repeat && (s = k3_checkpoint(ctx)) != K3_OK))
        goto failed;
    double drop_s = 0.0;
    int len = o.prompt_len;
    for (int i = 0, round = -1; i < o.steps; i++) {
        const int r = o.rounds ? i * o.rounds / o.steps : 0;
        if (o.rounds && r != round) {
            round = r;
            steps[i].bandwidth = membw_triad(&tr, o.threads);
        } else if (i > 0) {
            steps[i].bandwidth = steps[i - 1].bandwidth;
        }
        if (o.cold_each_token) {
            const double d0 = clock_now_s();
            run_memory_drop_page_cache(o.dir);
            drop_s += clock_now_s() - d0;
        }
        if (o.repeat && (s = k3_sync(ctx, ids, o.prompt_len, NULL)) != K3_OK)
            goto failed;
        const int32_t tok = ids[o.repeat ? o.prompt_len : len];
        if ((s = timed_decode(&rec, ctx, &tok, 1, argmax, &steps[i])) != K3_OK)
            goto failed;
        if (!o.repeat)
            len++;
        fprintf(stderr, "k3 bench-scale: step %d: %.3f s\n", i, steps[i].seconds);
    }
    /* Verification passes: n positions at once, all from the same point; the counts take
     * turns within each repetition, so a moment of other work on the machine slows one
     * repetition of every count rather than every repetition of one count. */
    if (o.n_positions && ((s = k3_sync(ctx, ids, len, NULL)) != K3_OK || (s = k3_checkpoint(ctx)) != K3_OK))
        goto failed;
    for (int k = 0; k < o.verify_reps; k++)
        for (int p = 0; p < o.n_positions; p++) {
            if (o.cold_each_token)
                run_memory_drop_page_cache(o.dir);
            if ((s = k3_sync(ctx, ids, len, NULL)) != K3_OK ||
                (s = timed_decode(&rec, ctx, ids + len, o.positions[p], argmax, &verify[p * o.verify_reps + k])) !=
                    K3_OK)
                goto failed;
            fprintf(stderr, "k3 bench-scale: verify %d positions: %.3f s\n", o.positions[p],
                    verify[p * o.verify_reps + k].seconds);
        }
    const double wall = clock_now_s() - t_run - drop_s;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double peak_rss = (double)ru.ru_maxrss * 1024.0;
    run_memory_stop(&o.memory, model, wall, peak_rss);
    diskprobe_result seq_after[SCALE_MAX_DISK], rnd_after = {0}, mixed_after = {0};
    if (o.disk_after && disk_probes(&o, &probe_plan, " after the steps", seq_after, &rnd_after, &mixed_after))
        goto done;
    beside_reads beside = {0};
    if (o.beside_reads) {
        step_time scratch = {0};
        beside.n_steps = o.repeat ? o.steps : 0;
        beside.steps = o.repeat ? calloc((size_t)o.steps, sizeof *beside.steps) : NULL;
        scratch.layers = calloc((size_t)n_layers, sizeof(layer_time));
        const int failed = (o.repeat && !beside.steps) || !scratch.layers ||
                           measure_beside_reads(&o, &tr, probe_plan.expert_slot_bytes, &rec, ctx, ids, argmax,
                                                &scratch, &beside);
        free(scratch.layers);
        if (failed) {
            fprintf(stderr, "k3 bench-scale: measuring beside disk reads failed (out of memory, the random probe "
                            "could not read, or a step failed)\n");
            free(beside.steps);
            goto done;
        }
        fprintf(stderr, "k3 bench-scale: triad %.1f GB/s alone, %.1f GB/s while the disk reads %.0f MB/s\n",
                beside.triad_alone / 1e9, beside.triad_reading / 1e9, beside.triad_read_rate / 1e6);
    }
    load_average(load_after);

    if (!(f = fopen(o.out, "w"))) {
        fprintf(stderr, "k3 bench-scale: cannot write %s: %s\n", o.out, strerror(errno));
        goto done;
    }
    fprintf(f, "{\n  \"model\": \"%s\",\n  \"threads\": %d,\n  \"io_threads\": %d,\n  \"repeat\": %d,\n"
               "  \"cold_each_token\": %d,\n  \"disk_twice\": %d,\n  \"prompt_tokens\": %d,\n  \"open_seconds\": %.3f,\n"
               "  \"load_average\": [%.2f, %.2f, %.2f, %.2f, %.2f, %.2f],\n  \"peak_rss_bytes\": %.0f,\n"
               "  \"drop_seconds\": %.6f,\n  \"layers\": [",
            o.dir, o.threads, o.memory.io_threads, o.repeat, o.cold_each_token, o.disk_twice, o.prompt_len, open_s, load_before[0],
            load_before[1], load_before[2], load_after[0], load_after[1], load_after[2], peak_rss, drop_s);
    for (int l = 0; l < n_layers; l++)
        fprintf(f, "%s{\"mixer\": \"%s\", \"ffn\": \"%s\"}", l ? ", " : "", l < 64 ? rec.mixer[l] : "",
                l < 64 ? rec.ffn[l] : "");
    fprintf(f, "],\n  \"steps\": [");
    for (int i = 0; i < o.steps; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_step(f, &steps[i], n_layers);
    }
    fprintf(f, "\n  ],\n  \"prefill\": ");
    if (o.prefill) {
        k3_plan used;
        k3_model_plan(model, &cp, &used);
        fprintf(f, "{\"tokens\": %d, \"batch\": %d, \"batch_sized\": %d, \"passes\": %llu, \"trunk_layer_reads\": %llu, "
                   "\"streamed_layers\": %d, \"pass\": ",
                o.prefill, used.batch, used.batch_sized, (unsigned long long)prefill.passes,
                (unsigned long long)prefill.trunk_layer_reads, used.layers - used.layers_pinned);
        json_step(f, &prefill, n_layers);
        fprintf(f, "}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"verify\": [");
    for (int p = 0; p < o.n_positions; p++)
        for (int k = 0; k < o.verify_reps; k++) {
            fprintf(f, "%s\n    {\"positions\": %d, \"pass\": ", p + k ? "," : "", o.positions[p]);
            json_step(f, &verify[p * o.verify_reps + k], n_layers);
            fprintf(f, "}");
        }
    fprintf(f, "\n  ]");
    json_disk(f, "disk_sequential", seq, o.n_disk);
    json_disk(f, "disk_random", &rnd, o.disk_random ? 1 : 0);
    json_disk(f, "disk_mixed", &mixed, mixed.bytes ? 1 : 0);
    json_disk(f, "disk_sequential_after", seq_after, o.disk_after ? o.n_disk : 0);
    json_disk(f, "disk_random_after", &rnd_after, o.disk_after && o.disk_random ? 1 : 0);
    json_disk(f, "disk_mixed_after", &mixed_after, mixed_after.bytes ? 1 : 0);
    if (o.beside_reads) {
        fprintf(f, ",\n  \"beside_reads\": {\"triad_alone\": %.0f, \"triad_reading\": %.0f, \"triad_read_bytes_per_s\": %.0f, "
                   "\"steps_read_bytes_per_s\": %.0f, \"steps\": [",
                beside.triad_alone, beside.triad_reading, beside.triad_read_rate, beside.steps_read_rate);
        for (int i = 0; i < beside.n_steps; i++)
            fprintf(f, "%s%.6f", i ? ", " : "", beside.steps[i]);
        fprintf(f, "]}");
    } else {
        fprintf(f, ",\n  \"beside_reads\": null");
    }
    free(beside.steps);
    run_memory_json(&o.memory, f);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "k3 bench-scale: cannot write %s: %s\n", o.out, strerror(errno));
        goto done;
    }
    f = NULL;
    rc = 0;
    goto done;
failed:
    fprintf(stderr, "k3 bench-scale: decoding failed (%s): %s\n", k3_status_name(s), k3_context_error(ctx));
done:
    if (f)
        fclose(f);
    for (int i = 0; steps && i < o.steps; i++)
        free(steps[i].layers);
    for (int i = 0; verify && i < n_verify; i++)
        free(verify[i].layers);
    free(steps);
    free(verify);
    free(prefill.layers);
    free(ids);
    free(argmax);
    membw_close(&tr);
    k3_context_close(ctx);
    k3_model_close(model);
    return rc;
}
