/* run_dump.c - activation dumps of `k3 ... --dump-activations DIR` (see run_dump.h). */
#include "run_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct {
    char name[96];
    char kind[8];
    k3_site site;
    int layer, width, rows;
} dump_site;

struct run_dump {
    char dir[3072]; /* paths built from it stay under 4096 bytes */
    dump_site *sites; /* (n_sites) in the order first seen */
    int n_sites, cap_sites;
    char failed[4608]; /* the first failure, "" while none (a path and a reason) */
};

static int make_dirs(const char *dir) {
    char path[3072];
    const size_t len = strlen(dir);
    if (len == 0 || len >= sizeof path)
        return -1;
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static dump_site *site_of(run_dump *d, const k3_activation *a) {
    for (int i = 0; i < d->n_sites; i++)
        if (!strcmp(d->sites[i].name, a->name))
            return &d->sites[i];
    if (d->n_sites == d->cap_sites) {
        const int cap = d->cap_sites ? 2 * d->cap_sites : 64;
        dump_site *grown = realloc(d->sites, sizeof *grown * (size_t)cap);
        if (!grown)
            return NULL;
        d->sites = grown;
        d->cap_sites = cap;
    }
    dump_site *s = &d->sites[d->n_sites++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", a->name);
    snprintf(s->kind, sizeof s->kind, "%s", a->kind ? a->kind : "");
    s->site = a->site;
    s->layer = a->layer;
    s->width = a->width;
    return s;
}

static void on_site(void *user, const k3_activation *a) {
    run_dump *d = user;
    if (d->failed[0])
        return;
    dump_site *s = site_of(d, a);
    char path[4096];
    const int ints = a->site == K3_SITE_ROUTING;
    snprintf(path, sizeof path, "%s/%s.%s", d->dir, a->name, ints ? "i32" : "f32");
    if (!s) {
        snprintf(d->failed, sizeof d->failed, "out of memory indexing %s", path);
        return;
    }
    if (s->width != a->width) {
        snprintf(d->failed, sizeof d->failed, "%s: rows of %d values, earlier %d", path, a->width, s->width);
        return;
    }
    /* "r+b" keeps rows other passes wrote; the first write creates the file. */
    FILE *f = fopen(path, "r+b");
    if (!f && errno == ENOENT)
        f = fopen(path, "w+b");
    const size_t row = (size_t)a->width * 4u, n = (size_t)a->n_tokens;
    const void *src = ints ? (const void *)a->experts : (const void *)a->values;
    if (!f || fseeko(f, (off_t)((size_t)a->start * row), SEEK_SET) != 0 || fwrite(src, row, n, f) != n ||
        fclose(f) != 0) {
        snprintf(d->failed, sizeof d->failed, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    if (a->start + a->n_tokens > s->rows)
        s->rows = a->start + a->n_tokens;
}

run_dump *run_dump_start(const char *dir, k3_context *ctx) {
    run_dump *d = calloc(1, sizeof *d);
    if (!d || strlen(dir) >= sizeof d->dir || make_dirs(dir) != 0) {
        fprintf(stderr, "k3: --dump-activations: cannot create the directory %s: %s\n", dir,
                d ? strerror(errno) : "out of memory");
        free(d);
        return NULL;
    }
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    k3_context_observe(ctx, on_site, d);
    return d;
}

void run_dump_abandon(run_dump *d, k3_context *ctx) {
    if (!d)
        return;
    if (ctx)
        k3_context_observe(ctx, NULL, NULL);
    free(d->sites);
    free(d);
}

static const char *what_of(k3_site site) {
    switch (site) {
    case K3_SITE_EMBED:
    case K3_SITE_ATTN_OUTPUT:
    case K3_SITE_FFN_OUTPUT:
    case K3_SITE_FINAL_NORM:
    case K3_SITE_LOGITS:
        return "output";
    case K3_SITE_ATTN_INPUT:
    case K3_SITE_FFN_INPUT:
        return "input";
    case K3_SITE_ROUTING:
        return "topk_idx";
    }
    return "";
}

int run_dump_finish(run_dump *d, k3_context *ctx, const int32_t *ids, int n) {
    k3_context_observe(ctx, NULL, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/activations.json", d->dir);
    int rc = 0;
    if (d->failed[0]) {
        fprintf(stderr, "k3: --dump-activations: %s\n", d->failed);
        rc = -1;
    }
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!rc && !f) {
        fprintf(stderr, "k3: --dump-activations: cannot write %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    if (f) {
        fprintf(f, "{\n  \"format\": \"k3-activations\",\n  \"version\": 1,\n  \"ids\": [");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%d", i ? ", " : "", ids[i]);
        fprintf(f, "],\n  \"sites\": [");
        for (int i = 0; i < d->n_sites; i++) {
            const dump_site *s = &d->sites[i];
            const int ints = s->site == K3_SITE_ROUTING;
            fprintf(f,
                    "%s\n    {\"name\": \"%s\", \"file\": \"%s.%s\", \"dtype\": \"%s\", \"rows\": %d, \"width\": %d, "
                    "\"layer\": %d, \"kind\": \"%s\", \"what\": \"%s\"}",
                    i ? "," : "", s->name, s->name, ints ? "i32" : "f32", ints ? "int32" : "float32", s->rows,
                    s->width, s->layer, s->kind, what_of(s->site));
        }
        fprintf(f, "\n  ]\n}\n");
        if (fclose(f) != 0) {
            fprintf(stderr, "k3: --dump-activations: cannot write %s: %s\n", path, strerror(errno));
            rc = -1;
        }
    }
    free(d->sites);
    free(d);
    return rc;
}
