/* diskprobe.c - cold sequential and random reads of a checkpoint's shards (see diskprobe.h). */
#include "diskprobe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROBE_MAX_SHARDS 4096
#define PROBE_MAX_READERS 16

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct {
    int fd[PROBE_MAX_SHARDS];
    uint64_t size[PROBE_MAX_SHARDS];
    int n;
    uint64_t total;
} shard_set;

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void shards_close(shard_set *s) {
    for (int i = 0; i < s->n; i++)
        close(s->fd[i]);
    s->n = 0;
}

/* Opens dir's *.safetensors in name order and drops them from the page cache. */
static int shards_open(const char *dir, shard_set *s, char *why, int why_size) {
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, (size_t)why_size, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    char *names[PROBE_MAX_SHARDS];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < PROBE_MAX_SHARDS) {
        const size_t len = strlen(e->d_name);
        if (len >= 12 && !strcmp(e->d_name + len - 12, ".safetensors"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        free(names[i]);
        if (rc)
            continue;
        struct stat st;
        const int fd = open(path, O_RDONLY);
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(why, (size_t)why_size, "cannot open %s: %s", path, strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = -1;
            continue;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        s->fd[s->n] = fd;
        s->size[s->n++] = (uint64_t)st.st_size;
        s->total += (uint64_t)st.st_size;
    }
    if (!rc && s->n == 0) {
        snprintf(why, (size_t)why_size, "%s holds no .safetensors shard to read", dir);
        rc = -1;
    }
    if (rc)
        shards_close(s);
    return rc;
}

/* Reads len bytes at off of fd fully; 0, or -1 on a short read or error. */
static int read_fully(int fd, uint8_t *buf, uint64_t len, uint64_t off) {
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

int diskprobe_sequential(const char *dir, uint64_t block, uint64_t skip, uint64_t bytes, diskprobe_result *out,
                         char *why, int why_size) {
    shard_set s;
    if (shards_open(dir, &s, why, why_size))
        return -1;
    uint8_t *buf = malloc(block);
    memset(out, 0, sizeof *out);
    out->block = block;
    out->readers = 1;
    int rc = buf ? 0 : -1;
    if (!buf)
        snprintf(why, (size_t)why_size, "out of memory for a %llu-byte block", (unsigned long long)block);
    /* The shards as one stream of s.total bytes, read from skip on and wrapping to the
     * start, at most once over. */
    if (bytes > s.total)
        bytes = s.total;
    uint64_t at = skip % s.total;
    const double t0 = now_s();
    while (!rc && out->bytes < bytes) {
        int i = 0;
        uint64_t off = at;
        while (off >= s.size[i])
            off -= s.size[i++];
        uint64_t len = s.size[i] - off < block ? s.size[i] - off : block;
        if (len > bytes - out->bytes)
            len = bytes - out->bytes;
        const double r0 = now_s();
        if (read_fully(s.fd[i], buf, len, off)) {
            snprintf(why, (size_t)why_size, "reading shard %d at %llu failed", i, (unsigned long long)off);
            rc = -1;
            break;
        }
        out->read_seconds += now_s() - r0;
        out->bytes += len;
        at = (at + len) % s.total;
    }
    out->seconds = now_s() - t0;
    free(buf);
    shards_close(&s);
    return rc;
}

typedef struct {
    const shard_set *s;
    uint64_t block;
    int count;
    unsigned seed;
    pthread_mutex_t lock;
    int next, failed;
    uint64_t bytes;
    double read_seconds;
} random_job;

/* The i-th random block: a shard chosen by size, a 4 KiB-aligned offset inside it. */
static void pick(const random_job *j, int i, int *shard, uint64_t *off, uint64_t *len) {
    uint64_t x = (uint64_t)j->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)(i + 1) * 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 29;
    uint64_t at = x % j->s->total;
    int k = 0;
    while (at >= j->s->size[k])
        at -= j->s->size[k++];
    const uint64_t room = j->s->size[k] > j->block ? j->s->size[k] - j->block : 0;
    *shard = k;
    *off = (at < room ? at : room) / 4096 * 4096;
    *len = j->s->size[k] - *off < j->block ? j->s->size[k] - *off : j->block;
}

static void *random_reader(void *arg) {
    random_job *j = arg;
    uint8_t *buf = malloc(j->block);
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
        const double r0 = now_s();
        const int bad = read_fully(j->s->fd[shard], buf, len, off);
        busy += now_s() - r0;
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
    return NULL;
}

int diskprobe_random(const char *dir, uint64_t block, int count, int readers, unsigned seed, diskprobe_result *out,
                     char *why, int why_size) {
    shard_set s;
    if (shards_open(dir, &s, why, why_size))
        return -1;
    if (readers < 1)
        readers = 1;
    if (readers > PROBE_MAX_READERS)
        readers = PROBE_MAX_READERS;
    random_job j = {&s, block, count, seed, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0.0};
    pthread_t tid[PROBE_MAX_READERS];
    const double t0 = now_s();
    int started = 0;
    for (; started < readers; started++)
        if (pthread_create(&tid[started], NULL, random_reader, &j))
            break;
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    memset(out, 0, sizeof *out);
    out->block = block;
    out->readers = started;
    out->bytes = j.bytes;
    out->seconds = now_s() - t0;
    out->read_seconds = j.read_seconds;
    shards_close(&s);
    if (started == 0 || j.failed) {
        snprintf(why, (size_t)why_size, "random reads of %llu bytes failed (%d readers started)",
                 (unsigned long long)block, started);
        return -1;
    }
    return 0;
}
