/* driver.c - `k3-fuzz HARNESS [options]`: runs one fuzz harness (fuzz.h; docs/FUZZING.md)
 * under AddressSanitizer + UBSan. It replays the seed corpora, then mutates inputs from its
 * pool (the harness's structure-aware mutator or byte edits) until the time is up, keeping
 * every input that reaches a control-flow edge not seen before. Edges come from gcc's
 * -fsanitize-coverage=trace-pc: each instrumented block calls __sanitizer_cov_trace_pc,
 * which hashes (previous block, this block) into a bitmap. An input that crashes, trips a
 * sanitizer, breaks an invariant (fuzz_fail) or runs past the per-input time is written to
 * the findings folder before the process dies, with the command that replays it. The last
 * line on stdout is the figures: runs, edges, pool (reaching it means no finding: a finding
 * ends the process with a non-zero status). This file is built without
 * coverage instrumentation; it is a tool, not part of the engine. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "fuzz.h"

static const fuzz_harness *const harnesses[] = {&fuzz_json, &fuzz_config, &fuzz_safetensors, &fuzz_tokenizer,
                                                &fuzz_state, &fuzz_http,  &fuzz_chat};
enum { N_HARNESSES = sizeof harnesses / sizeof harnesses[0] };

/* ---- coverage ------------------------------------------------------------------------------- */

enum { MAP_BITS = 18 };
static uint8_t edge_seen[1u << MAP_BITS];
static size_t edges;
/* Not thread-local: the ifunc resolvers of target_clones (ops.c) are instrumented and run
 * during relocation, before TLS exists. Threads racing on it only blur a few edges. */
static uintptr_t prev_block;

/* Called by every instrumented basic block (any thread, and before main: before ASan has
 * mapped its shadow memory, so it must not be instrumented itself). */
void __sanitizer_cov_trace_pc(void);
__attribute__((no_sanitize_address, no_sanitize_undefined)) void __sanitizer_cov_trace_pc(void) {
    const uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    const size_t i = ((pc >> 1) ^ prev_block) & ((1u << MAP_BITS) - 1);
    prev_block = pc >> 2;
    if (!edge_seen[i]) {
        edge_seen[i] = 1;
        edges++;
    }
}

/* ---- the input in flight, and findings -------------------------------------------------------- */

static const fuzz_harness *harness;
static const uint8_t *current;
static size_t current_n;
static char findings_dir[1024] = "out/fuzz/findings";

static uint64_t fnv(const uint8_t *d, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return h;
}

/* Writes the input in flight to the findings folder and says how to replay it. Only
 * async-signal-safe calls after the path is made (it also runs from signal handlers). */
static void save_finding(const char *why) {
    if (!current)
        return;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s-%016llx", findings_dir, harness->name, (unsigned long long)fnv(current, current_n));
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        size_t done = 0;
        while (done < current_n) {
            const ssize_t w = write(fd, current + done, current_n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        close(fd);
    }
    char line[1600];
    const int len = snprintf(line, sizeof line, "k3-fuzz %s: FINDING (%s), input saved to %s; replay: k3-fuzz %s --replay %s\n",
                             harness->name, why, path, harness->name, path);
    if (len > 0)
        (void)!write(2, line, (size_t)len);
    current = NULL;
}

static void on_death(void) { save_finding("a sanitizer report above"); }

/* UBSan's runtime keeps its own copy of the death callbacks, so its reports end in abort()
 * (abort_on_error below), caught here; fuzz_fail's abort() too. */
static void on_abort(int sig) {
    save_finding("a report above");
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The sanitizers' settings, the same whether run by scripts/fuzz.mjs or by hand: allocation
 * failures are part of the input space (a hostile size must take the out-of-memory path). */
__attribute__((no_sanitize_address, no_sanitize_undefined)) const char *__asan_default_options(void);
__attribute__((no_sanitize_address, no_sanitize_undefined)) const char *__asan_default_options(void) {
    return "detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=2048";
}
__attribute__((no_sanitize_address, no_sanitize_undefined)) const char *__ubsan_default_options(void);
__attribute__((no_sanitize_address, no_sanitize_undefined)) const char *__ubsan_default_options(void) {
    return "print_stacktrace=1:abort_on_error=1";
}

static void on_alarm(int sig) {
    (void)sig;
    save_finding("the input ran past the time limit");
    _exit(71);
}

void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "k3-fuzz %s: invariant broken: ", harness ? harness->name : "?");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    save_finding("an invariant broken");
    signal(SIGABRT, SIG_DFL);
    abort();
}

/* ---- the pool ------------------------------------------------------------------------------- */

typedef struct input {
    uint8_t *data;
    size_t n;
} input;

static input *pool;
static size_t pool_n, pool_cap, seeds_n;
static char work_dir[1024];

static void pool_add(const uint8_t *d, size_t n, int save) {
    if (pool_n == pool_cap) {
        const size_t cap = pool_cap ? 2 * pool_cap : 256;
        input *grown = realloc(pool, sizeof *grown * cap);
        if (!grown)
            return;
        pool = grown;
        pool_cap = cap;
    }
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return;
    memcpy(copy, d, n);
    pool[pool_n++] = (input){copy, n};
    if (save && work_dir[0]) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%016llx", work_dir, (unsigned long long)fnv(d, n));
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(d, 1, n, f);
            fclose(f);
        }
    }
}

void fuzz_add_seed(const uint8_t *data, size_t n) { pool_add(data, n, 0); }

static void load_dir(const char *dir, size_t max_len) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(max_len);
        const size_t n = buf ? fread(buf, 1, max_len, f) : 0;
        if (buf)
            pool_add(buf, n, 0);
        free(buf);
        fclose(f);
    }
    closedir(d);
}

/* ---- running -------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int input_seconds = 10;

/* Runs one input; returns 1 when it reached a new edge. */
static int run_one(const uint8_t *d, size_t n) {
    const size_t before = edges;
    current = d;
    current_n = n;
    const struct itimerval limit = {{0, 0}, {input_seconds, 0}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &limit, NULL);
    harness->run(d, n);
    setitimer(ITIMER_REAL, &off, NULL);
    current = NULL;
    return edges > before;
}

static void mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

static int usage(FILE *to) {
    fprintf(to, "usage: k3-fuzz HARNESS [--seconds N] [--runs N] [--seed N] [--corpus DIR]... [--work DIR]\n"
                "               [--findings DIR] [--input-seconds N] [--repo DIR]\n"
                "       k3-fuzz HARNESS --replay FILE...\n"
                "       k3-fuzz --list\n"
                "Runs one fuzz harness under ASan + UBSan (docs/FUZZING.md). --corpus folders seed it (and are\n"
                "replayed first); --work keeps the inputs that reached new edges, and seeds the next run;\n"
                "findings are written to --findings (default out/fuzz/findings). The last stdout line gives\n"
                "the figures. --replay runs the given inputs once each.\n");
    return to == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < N_HARNESSES; i++)
            printf("%-12s %s\n", harnesses[i]->name, harnesses[i]->what);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        return usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
    for (int i = 0; i < N_HARNESSES; i++)
        if (!strcmp(argv[1], harnesses[i]->name))
            harness = harnesses[i];
    if (!harness) {
        fprintf(stderr, "k3-fuzz: no harness '%s' (k3-fuzz --list names them)\n", argv[1]);
        return 2;
    }
    double seconds = 10;
    unsigned long long runs_limit = 0, seed = 0;
    int have_seed = 0, replay_from = 0;
    const char *corpora[16];
    int n_corpora = 0;
    const char *repo = ".";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--replay")) {
            replay_from = i + 1;
            break;
        }
        if (!v)
            return usage(stderr);
        i++;
        if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--runs"))
            runs_limit = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, NULL, 0);
            have_seed = 1;
        } else if (!strcmp(a, "--corpus") && n_corpora < 16)
            corpora[n_corpora++] = v;
        else if (!strcmp(a, "--work"))
            snprintf(work_dir, sizeof work_dir, "%s", v);
        else if (!strcmp(a, "--findings"))
            snprintf(findings_dir, sizeof findings_dir, "%s", v);
        else if (!strcmp(a, "--input-seconds"))
            input_seconds = atoi(v) > 0 ? atoi(v) : 10;
        else if (!strcmp(a, "--repo"))
            repo = v;
        else
            return usage(stderr);
    }
    mkdirs(findings_dir);
    if (work_dir[0])
        mkdirs(work_dir);
    __sanitizer_set_death_callback(on_death);
    signal(SIGALRM, on_alarm);
    signal(SIGABRT, on_abort);
    signal(SIGPIPE, SIG_IGN);
    const size_t max_len = harness->max_len ? harness->max_len : 64 << 10;

    const double t0 = now_s();
    if (harness->init && harness->init(repo) != 0)
        return 2;
    const size_t edges_init = edges;

    if (replay_from) {
        for (size_t k = 0; k < pool_n; k++) /* the harness's own seeds are not replayed here */
            free(pool[k].data);
        for (int i = replay_from; i < argc; i++) {
            pool_n = 0;
            load_dir(argv[i], max_len); /* a folder of inputs */
            if (pool_n == 0) {
                FILE *f = fopen(argv[i], "rb");
                uint8_t *buf = malloc(max_len);
                const size_t n = f && buf ? fread(buf, 1, max_len, f) : 0;
                if (f)
                    fclose(f);
                if (!f) {
                    fprintf(stderr, "k3-fuzz: cannot read %s: %s\n", argv[i], strerror(errno));
                    free(buf);
                    return 2;
                }
                pool_add(buf, n, 0);
                free(buf);
            }
            for (size_t k = 0; k < pool_n; k++)
                run_one(pool[k].data, pool[k].n);
            printf("k3-fuzz %s: replayed %s (%zu inputs): no finding\n", harness->name, argv[i], pool_n);
            for (size_t k = 0; k < pool_n; k++)
                free(pool[k].data);
        }
        free(pool);
        return 0;
    }

    /* Seeds: the harness's own (from init), the corpora, the work folder. All replayed. */
    for (int i = 0; i < n_corpora; i++)
        load_dir(corpora[i], max_len);
    if (work_dir[0])
        load_dir(work_dir, max_len);
    seeds_n = pool_n;
    if (pool_n == 0)
        pool_add((const uint8_t *)"", 0, 0);
    for (size_t k = 0; k < pool_n; k++)
        run_one(pool[k].data, pool[k].n);
    const size_t edges_seeds = edges;

    if (!have_seed)
        seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    fuzz_rng rng = {seed};
    uint8_t *buf = malloc(max_len + 1);
    if (!buf)
        return 2;
    const double deadline = now_s() + seconds;
    unsigned long long runs = 0;
    double last_report = now_s();
    while ((runs_limit == 0 || runs < runs_limit) && (runs & 15 || now_s() < deadline)) {
        /* Half the time one of the newest inputs: what just found an edge is worth more. */
        const size_t recent = pool_n > 32 ? 32 : pool_n;
        const input *pick = fuzz_below(&rng, 2) ? &pool[pool_n - 1 - fuzz_below(&rng, recent)] : &pool[fuzz_below(&rng, pool_n)];
        const input *other = &pool[fuzz_below(&rng, pool_n)];
        size_t n = pick->n < max_len ? pick->n : max_len;
        memcpy(buf, pick->data, n);
        for (size_t k = 1 + fuzz_below(&rng, 4); k > 0; k--)
            n = harness->mutate && fuzz_below(&rng, 3) ? harness->mutate(buf, n, max_len, &rng)
                                                       : fuzz_mutate_bytes(buf, n, max_len, &rng, harness->dictionary,
                                                                           other->data, other->n);
        runs++;
        if (run_one(buf, n))
            pool_add(buf, n, 1);
        if (now_s() - last_report >= 30) {
            last_report = now_s();
            fprintf(stderr, "k3-fuzz %s: %llu runs, %zu edges, pool %zu\n", harness->name, runs, edges, pool_n);
        }
    }
    const double spent = now_s() - t0;
    printf("k3-fuzz %s: runs %llu in %.1f s (%.0f/s), edges %zu (%zu after init, %zu after %zu seeds), pool %zu, "
           "findings 0, seed 0x%llx\n",
           harness->name, runs, spent, runs / (spent > 0 ? spent : 1), edges, edges_init, edges_seeds, seeds_n, pool_n, seed);
    for (size_t k = 0; k < pool_n; k++)
        free(pool[k].data);
    free(pool);
    free(buf);
    return 0;
}
