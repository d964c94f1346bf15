/* io.c - positioned reads, large allocations, the clock and MemAvailable (see io.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS and MADV_HUGEPAGE next to _POSIX_C_SOURCE (glibc) */
#define _GNU_SOURCE     /* O_DIRECT (glibc) */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

size_t io_read_at(int fd, void *buf, size_t len, uint64_t offset, int *error) {
    size_t got = 0;
    *error = 0;
    while (got < len) {
        /* At most 1 GiB per call: some kernels cap a single read below 2 GiB. */
        const size_t want = len - got > ((size_t)1 << 30) ? ((size_t)1 << 30) : len - got;
        const ssize_t n = pread(fd, (char *)buf + got, want, (off_t)(offset + got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            *error = errno;
            break;
        }
        if (n == 0)
            break; /* end of file */
        got += (size_t)n;
    }
    return got;
}

int io_open_direct(const char *path) {
#if defined(O_DIRECT)
    return open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
#else
    (void)path;
    return -1;
#endif
}

void *io_bounce_alloc(void) {
    /* Huge pages, faulted in now: a direct read is split into one device request per
     * max_segments pages (254 on this VM's virtio disk), so 4 KiB pages cap a request near
     * 1 MiB and huge ones let it reach the device's 4 MiB (max_sectors_kb). Reading 8 MiB
     * at a time into 4 KiB pages ran at 0.6-0.9 GB/s here, into huge pages 1.4-2.6. */
    uint8_t *p = io_alloc_large(IO_BOUNCE_BYTES);
    if (p && (uintptr_t)p % IO_DIRECT_ALIGN != 0) {
        io_free_large(p, IO_BOUNCE_BYTES);
        return NULL;
    }
    if (p)
        memset(p, 0, IO_BOUNCE_BYTES);
    return p;
}

void io_bounce_free(void *bounce) {
    io_free_large(bounce, IO_BOUNCE_BYTES);
}

size_t io_read_direct(int fd, void *buf, size_t len, uint64_t offset, void *bounce, int *error) {
    const uint64_t end = offset + len;
    uint64_t at = offset; /* the next byte buf still needs */
    *error = 0;
    while (at < end) {
        const uint64_t block = at / IO_DIRECT_ALIGN * IO_DIRECT_ALIGN;
        const uint64_t block_end = (end + IO_DIRECT_ALIGN - 1) / IO_DIRECT_ALIGN * IO_DIRECT_ALIGN;
        const size_t want = block_end - block > IO_BOUNCE_BYTES ? IO_BOUNCE_BYTES : (size_t)(block_end - block);
        const ssize_t n = pread(fd, bounce, want, (off_t)block);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            *error = errno;
            break;
        }
        /* A short read holds good bytes; one that stops inside a block stopped at the end
         * of the file. */
        const uint64_t got_end = block + (uint64_t)n;
        if (got_end <= at)
            break; /* end of file */
        const uint64_t copy_end = got_end < end ? got_end : end;
        memcpy((char *)buf + (at - offset), (const char *)bounce + (at - block), (size_t)(copy_end - at));
        at = copy_end;
        if ((size_t)n < want && (size_t)n % IO_DIRECT_ALIGN != 0)
            break; /* the file ends inside this block */
    }
    return (size_t)(at - offset);
}

size_t io_read_streamed(int fd, int direct_fd, void *bounce, int *refused, void *buf, size_t len, uint64_t offset,
                        int *error, int *direct) {
    *direct = 0;
    if (bounce && direct_fd >= 0 && !*refused) {
        const size_t got = io_read_direct(direct_fd, buf, len, offset, bounce, error);
        if (!(*error == EINVAL && got == 0)) {
            *direct = 1;
            return got;
        }
        *refused = 1;
    }
    return io_read_at(fd, buf, len, offset, error);
}

void io_read_describe(char *out, size_t size, const char *path, size_t len, uint64_t offset, size_t got,
                      int error) {
    if (error)
        snprintf(out, size, "reading %zu bytes at offset %llu of %s failed: %s", len, (unsigned long long)offset,
                 path, strerror(error));
    else
        snprintf(out, size, "reading %zu bytes at offset %llu of %s failed: the file ends after %zu of them", len,
                 (unsigned long long)offset, path, got);
}

void *io_alloc_large(size_t bytes) {
    if (bytes == 0)
        bytes = 1;
#if defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Fewer first-touch faults: a slot filled by a read is touched a huge page at a time. */
    io_advise_huge_pages(p, bytes);
    return p;
#else
    return malloc(bytes);
#endif
}

void io_advise_huge_pages(void *p, size_t bytes) {
#if defined(MADV_HUGEPAGE)
    if (p && bytes >= ((size_t)8 << 20))
        madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void io_free_large(void *p, size_t bytes) {
    if (!p)
        return;
#if defined(MAP_ANONYMOUS)
    munmap(p, bytes ? bytes : 1);
#else
    (void)bytes;
    free(p);
#endif
}

double io_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

uint64_t io_mem_available(void) {
    const char *forced = getenv("K3_MEM_AVAILABLE");
    if (forced && *forced) {
        char *end;
        const double v = strtod(forced, &end);
        if (end != forced && *end == '\0' && v >= 1.0 && v < 1e18)
            return (uint64_t)v;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) {
            kb = strtoull(line + 13, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}
