/* diskprobe.c - cold sequential and random reads of a checkpoint's shards (see diskprobe.h). */
#include "diskprobe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "io.h"

#define PROBE_MAX_SHARDS 4096
#define PROBE_MAX_READERS 16
#define PROBE_MAX_EXTENTS (1 << 20)

/* len bytes at offset of shard. */
typedef struct {
    int shard;
    uint64_t offset, len;
} probe_extent;

/* The shards, and what the probes read of them: the sequential stream (seq, in order) and
 * the pool random reads draw whole extents from (rnd; none: block-sized pieces at random
 * offsets of the shards). */
typedef struct {
    int fd[PROBE_MAX_SHARDS];
    int dfd[PROBE_MAX_SHARDS]; /* O_DIRECT descriptors when the probe reads as the engine's
                                  --reads direct does, else -1 */
    uint64_t size[PROBE_MAX_SHARDS];
    char *name[PROBE_MAX_SHARDS];
    int n;
    uint64_t total;
    probe_extent *seq, *rnd;
    int n_seq, n_rnd;
    uint64_t seq_total;
} shard_set;

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void shards_close(shard_set *s) {
    for (int i = 0; i < s->n; i++) {
        close(s->fd[i]);
        if (s->dfd[i] >= 0)
            close(s->dfd[i]);
        free(s->name[i]);
    }
    free(s->seq);
    free(s->rnd);
    memset(s, 0, sizeof *s);
}

static int add_extent(probe_extent **list, int *n, int shard, uint64_t offset, uint64_t len) {
    if (*n >= PROBE_MAX_EXTENTS)
        return -1;
    if ((*n & (*n - 1)) == 0) { /* grow at powers of two */
        probe_extent *grown = realloc(*list, sizeof **list * (size_t)(*n ? 2 * *n : 1));
        if (!grown)
            return -1;
        *list = grown;
    }
    (*list)[(*n)++] = (probe_extent){shard, offset, len};
    return 0;
}

/* Reads the extents file: lines "SHARD_NAME OFFSET LENGTH KIND", KIND t (the sequential
 * stream) or e (a random read's unit), each inside its shard. */
static int read_extents(const char *path, shard_set *s, char *why, int why_size) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, (size_t)why_size, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char name[256], kind[4];
    unsigned long long offset, len;
    int line = 0, rc = 0, got;
    while (!rc && (got = fscanf(f, "%255s %llu %llu %3s", name, &offset, &len, kind)) != EOF) {
        line++;
        int shard = -1;
        for (int i = 0; got == 4 && i < s->n; i++)
            if (!strcmp(s->name[i], name))
                shard = i;
        if (got != 4 || shard < 0 || (strcmp(kind, "t") && strcmp(kind, "e")) || len == 0 ||
            offset > s->size[shard] || len > s->size[shard] - offset) {
            snprintf(why, (size_t)why_size, "%s line %d: expected 'SHARD OFFSET LENGTH t|e' inside one of the shards", path,
                     line);
            rc = -1;
        } else if (add_extent(kind[0] == 't' ? &s->seq : &s->rnd, kind[0] == 't' ? &s->n_seq : &s->n_rnd, shard, offset,
                              len)) {
            snprintf(why, (size_t)why_size, "%s: more than %d extents, or out of memory", path, PROBE_MAX_EXTENTS);
            rc = -1;
        } else if (kind[0] == 't') {
            s->seq_total += len;
        }
    }
    fclose(f);
    if (!rc && (s->n_seq == 0 || s->n_rnd == 0)) {
        snprintf(why, (size_t)why_size, "%s names no %s extent", path, s->n_seq == 0 ? "sequential (t)" : "random (e)");
        rc = -1;
    }
    return rc;
}

/* Opens dir's *.safetensors in name order (a second time with O_DIRECT when direct and the
 * file system allows), drops them from the page cache and sets what the probes read
 * (extents NULL: every shard in order, random offsets). */
static int shards_open(const char *dir, const char *extents, int direct, shard_set *s, char *why, int why_size) {
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, (size_t)why_size, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) && s->n < PROBE_MAX_SHARDS) {
        const size_t len = strlen(e->d_name);
        if (len >= 12 && !strcmp(e->d_name + len - 12, ".safetensors"))
            s->name[s->n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(s->name, (size_t)s->n, sizeof s->name[0], by_name);
    int rc = 0;
    for (int i = 0; i < s->n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, s->name[i]);
        struct stat st;
        s->fd[i] = s->dfd[i] = -1;
        if (rc)
            continue;
        const int fd = open(path, O_RDONLY);
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(why, (size_t)why_size, "cannot open %s: %s", path, strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = -1;
            continue;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        s->fd[i] = fd;
        s->dfd[i] = direct ? io_open_direct(path) : -1;
        s->size[i] = (uint64_t)st.st_size;
        s->total += (uint64_t)st.st_size;
    }
    if (!rc && s->n == 0) {
        snprintf(why, (size_t)why_size, "%s holds no .safetensors shard to read", dir);
        rc = -1;
    }
    if (!rc && extents) {
        rc = read_extents(extents, s, why, why_size);
    } else if (!rc) {
        for (int i = 0; !rc && i < s->n; i++)
            rc = add_extent(&s->seq, &s->n_seq, i, 0, s->size[i]);
        s->seq_total = s->total;
        if (rc)
            snprintf(why, (size_t)why_size, "out of memory listing the shards");
    }
    if (rc)
        shards_close(s); /* close(-1) of a shard never opened is harmless */
    return rc;
}

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* Reads len bytes at off of shard i fully, as the engine would: around the page cache
 * through bounce when the shard has a direct descriptor, else with pread. 0, or -1 on a
 * short read or an error. */
static int read_fully(const shard_set *s, int i, void *bounce, uint8_t *buf, uint64_t len, uint64_t off) {
    if (s->dfd[i] >= 0 && bounce) {
        int error;
        return io_read_direct(s->dfd[i], buf, (size_t)len, off, bounce, &error) == len ? 0 : -1;
    }
    const int fd = s->fd[i];
    while (len > 0) {
        const ssize_t r = pread(fd, buf, (size_t)len, (off_t)off);
        if (r <= 0)
            return -1;
        buf += r;
        len -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int diskprobe_sequential(const char *dir, const char *extents, int direct, uint64_t block, uint64_t skip,
                         uint64_t bytes, diskprobe_result *out, char *why, int why_size) {
    shard_set s;
    if (shards_open(dir, extents, direct, &s, why, why_size))
        return -1;
    /* A read never crosses an extent's end, so the buffer needs only the largest extent
     * (or block); like the engine's ring slots it is huge-page advised and touched before
     * the clock starts: the engine's steady passes read into memory faulted in already. */
    uint64_t need = 0;
    for (int i = 0; i < s.n_seq; i++)
        need = s.seq[i].len > need ? s.seq[i].len : need;
    need = need < block ? need : block;
    uint8_t *buf = io_alloc_large((size_t)need);
    if (buf)
        memset(buf, 0, (size_t)need);
    void *bounce = direct ? io_bounce_alloc() : NULL;
    memset(out, 0, sizeof *out);
    out->block = block;
    out->readers = 1;
    int rc = buf ? 0 : -1;
    if (!buf)
        snprintf(why, (size_t)why_size, "out of memory for a %llu-byte block", (unsigned long long)block);
    /* The stream of s.seq_total bytes, read from skip on and wrapping to the start, at
     * most once over; a read never crosses an extent's end. */
    if (bytes > s.seq_total)
        bytes = s.seq_total;
    uint64_t at = skip % s.seq_total;
    const double t0 = clock_now_s(), c0 = cpu_now();
    while (!rc && out->bytes < bytes) {
        int i = 0;
        uint64_t off = at;
        while (off >= s.seq[i].len)
            off -= s.seq[i++].len;
        const probe_extent *x = &s.seq[i];
        uint64_t len = x->len - off < block ? x->len - off : block;
        if (len > bytes - out->bytes)
            len = bytes - out->bytes;
        const double r0 = clock_now_s();
        if (read_fully(&s, x->shard, bounce, buf, len, x->offset + off)) {
            snprintf(why, (size_t)why_size, "reading %s at %llu failed", s.name[x->shard],
                     (unsigned long long)(x->offset + off));
            rc = -1;
            break;
        }
        out->read_seconds += clock_now_s() - r0;
        out->bytes += len;
        at = (at + len) % s.seq_total;
    }
    out->seconds = clock_now_s() - t0;
    out->cpu_seconds = cpu_now() - c0;
    io_free_large(buf, (size_t)need);
    io_bounce_free(bounce);
    shards_close(&s);
    return rc;
}

typedef struct {
    const shard_set *s;
    uint64_t block;
    int count;
    const uint32_t *order; /* (count) distinct units: extents of the pool, or block slots */
    pthread_mutex_t lock;
    int next, failed;
    uint64_t bytes;
    double read_seconds;
} random_job;

/* The i-th random read: a whole extent of the pool, or a block at a 4 KiB-aligned offset
 * (the order's unit times the block, moved back to fit inside its shard). */
static void pick(const random_job *j, int i, int *shard, uint64_t *off, uint64_t *len) {
    const uint32_t u = j->order[i];
    if (j->s->n_rnd) {
        const probe_extent *e = &j->s->rnd[u];
        *shard = e->shard;
        *off = e->offset;
        *len = e->len;
        return;
    }
    uint64_t at = (uint64_t)u * j->block;
    int k = 0;
    while (at >= j->s->size[k])
        at -= j->s->size[k++];
    const uint64_t room = j->s->size[k] > j->block ? j->s->size[k] - j->block : 0;
    *shard = k;
    *off = (at < room ? at : room) / 4096 * 4096;
    *len = j->s->size[k] - *off < j->block ? j->s->size[k] - *off : j->block;
}

/* splitmix64: the seeded stream the shuffle draws from. */
static uint64_t next_random(uint64_t *state) {
    uint64_t x = (*state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The first `count` units of a seeded shuffle of `units`: every read a different unit. A
 * probe drops the page cache once, before it starts, so a unit read twice would come back
 * from memory the second time and make the disk look faster than it is (drawn with
 * replacement, 100 reads of a 192-expert pool read only about 78 from the disk). */
static uint32_t *shuffled_units(uint32_t units, int count, unsigned seed) {
    uint32_t *all = malloc(sizeof *all * units);
    if (!all)
        return NULL;
    for (uint32_t u = 0; u < units; u++)
        all[u] = u;
    uint64_t state = seed;
    for (uint32_t u = 0; u < (uint32_t)count && u + 1 < units; u++) {
        const uint32_t v = u + (uint32_t)(next_random(&state) % (units - u));
        const uint32_t t = all[u];
        all[u] = all[v];
        all[v] = t;
    }
    return all;
}

static void *random_reader(void *arg) {
    random_job *j = arg;
    uint64_t biggest = j->block;
    for (int i = 0; i < j->s->n_rnd; i++)
        biggest = j->s->rnd[i].len > biggest ? j->s->rnd[i].len : biggest;
    uint8_t *buf = malloc(biggest);
    if (buf)
        memset(buf, 0, biggest); /* faulted in before the first read, as a reused cache slot is */
    void *bounce = io_bounce_alloc(); /* used only where the shards have direct descriptors */
    double busy = 0.0;
    uint64_t got = 0;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        const int i = j->next < j->count && buf && !j->failed ? j->next++ : -1;
        if (!buf)
            j->failed = 1;
        pthread_mutex_unlock(&j->lock);
        if (i < 0)
            break;
        int shard;
        uint64_t off, len;
        pick(j, i, &shard, &off, &len);
        const double r0 = clock_now_s();
        const int bad = read_fully(j->s, shard, bounce, buf, len, off);
        busy += clock_now_s() - r0;
        got += len;
        if (bad) {
            pthread_mutex_lock(&j->lock);
            j->failed = 1;
            pthread_mutex_unlock(&j->lock);
        }
    }
    pthread_mutex_lock(&j->lock);
    j->bytes += got;
    j->read_seconds += busy;
    pthread_mutex_unlock(&j->lock);
    free(buf);
    io_bounce_free(bounce);
    return NULL;
}

/* The random reads on an open shard set. */
static int random_reads(const shard_set *s, uint64_t block, int count, int readers, unsigned seed,
                        diskprobe_result *out, char *why, int why_size) {
    if (readers < 1)
        readers = 1;
    if (readers > PROBE_MAX_READERS)
        readers = PROBE_MAX_READERS;
    /* Units: the pool's extents, or the block-sized slots of the shards end to end. */
    const uint64_t slots = block ? s->total / block : 0;
    const uint32_t units = s->n_rnd ? (uint32_t)s->n_rnd : slots > UINT32_MAX ? UINT32_MAX : slots ? (uint32_t)slots : 1;
    if (count > 0 && (uint32_t)count > units)
        count = (int)units;
    uint32_t *order = shuffled_units(units, count, seed);
    if (!order) {
        snprintf(why, (size_t)why_size, "out of memory for the order of %u random reads", units);
        return -1;
    }
    random_job j = {s, block, count, order, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0.0};
    pthread_t tid[PROBE_MAX_READERS];
    const double t0 = clock_now_s(), c0 = cpu_now();
    int started = 0;
    for (; started < readers; started++)
        if (pthread_create(&tid[started], NULL, random_reader, &j))
            break;
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    memset(out, 0, sizeof *out);
    out->block = s->n_rnd ? s->rnd[0].len : block;
    out->readers = started;
    out->bytes = j.bytes;
    out->seconds = clock_now_s() - t0;
    out->read_seconds = j.read_seconds;
    out->cpu_seconds = cpu_now() - c0;
    free(order);
    if (started == 0 || j.failed) {
        snprintf(why, (size_t)why_size, "random reads of %llu bytes failed (%d readers started)",
                 (unsigned long long)block, started);
        return -1;
    }
    return 0;
}

int diskprobe_random(const char *dir, const char *extents, int direct, uint64_t block, int count, int readers,
                     unsigned seed, diskprobe_result *out, char *why, int why_size) {
    shard_set s;
    if (shards_open(dir, extents, direct, &s, why, why_size))
        return -1;
    const int rc = random_reads(&s, block, count, readers, seed, out, why, why_size);
    shards_close(&s);
    return rc;
}

typedef struct {
    const char *dir, *extents;
    int direct;
    uint64_t block, skip, bytes;
    diskprobe_result result;
    int rc;
    char why[512];
} sequential_job;

static void *sequential_thread(void *arg) {
    sequential_job *j = arg;
    j->rc = diskprobe_sequential(j->dir, j->extents, j->direct, j->block, j->skip, j->bytes, &j->result, j->why,
                                 (int)sizeof j->why);
    return NULL;
}

int diskprobe_mixed(const char *dir, const char *extents, int direct, uint64_t seq_block, uint64_t skip,
                    uint64_t seq_bytes, uint64_t block, int count, int readers, unsigned seed, diskprobe_result *out,
                    char *why, int why_size) {
    sequential_job job = {dir, extents, direct, seq_block, skip, seq_bytes, {0}, 0, ""};
    pthread_t seq;
    const double t0 = clock_now_s(), c0 = cpu_now();
    if (pthread_create(&seq, NULL, sequential_thread, &job)) {
        snprintf(why, (size_t)why_size, "cannot start the sequential reader");
        return -1;
    }
    diskprobe_result rnd;
    const int rc = diskprobe_random(dir, extents, direct, block, count, readers, seed, &rnd, why, why_size);
    pthread_join(seq, NULL);
    memset(out, 0, sizeof *out);
    out->block = block;
    out->readers = rnd.readers + 1;
    out->bytes = rnd.bytes + job.result.bytes;
    out->seconds = clock_now_s() - t0;
    out->read_seconds = rnd.read_seconds + job.result.read_seconds;
    out->cpu_seconds = cpu_now() - c0;
    if (!rc && job.rc)
        snprintf(why, (size_t)why_size, "%s", job.why);
    return rc || job.rc ? -1 : 0;
}
