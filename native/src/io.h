/* io.h - the engine's file reads and the few facts about the machine that memory planning
 * needs: positioned reads of weight bytes into caller memory (pread, restarted on EINTR and
 * on short reads until the file ends), the large allocations the slots live in, a
 * monotonic clock, and MemAvailable.
 *
 * Portable POSIX only: pread and clock_gettime. There is no io_uring and no O_DIRECT path;
 * if one is added it must sit behind a run-time capability check with this as the
 * fallback. It knows nothing of tensors, experts or layers: callers name those in their
 * error details, and io_read_describe() gives them the file half of the sentence. */
#ifndef K3_IO_H
#define K3_IO_H

#include <stddef.h>
#include <stdint.h>

/* Reads len bytes at offset of fd into buf. Returns the bytes read: len on success, fewer
 * when the file ends early or a read fails (*error then gets errno, or 0 for end of file). */
size_t io_read_at(int fd, void *buf, size_t len, uint64_t offset, int *error);

/* Writes "reading LEN bytes at offset OFF of PATH failed: WHY" into out, WHY being
 * "the file ends after GOT of them" or strerror(error). */
void io_read_describe(char *out, size_t size, const char *path, size_t len, uint64_t offset, size_t got,
                      int error);

/* Zero-filled memory for slots and pinned layers, bytes long: an anonymous mapping (huge
 * pages advised where the system has them) or malloc. Pages become resident when first
 * written. NULL when it cannot be had. io_free_large takes the same size back. */
void *io_alloc_large(size_t bytes);
void io_free_large(void *p, size_t bytes);

/* Seconds on a monotonic clock. */
double io_now(void);

/* The kernel's MemAvailable in bytes (Linux /proc/meminfo), or 0 when it cannot be read.
 * The environment variable K3_MEM_AVAILABLE (a byte count, e.g. 8e9) overrides it: for
 * tests of refusals, and to plan for a smaller machine. */
uint64_t io_mem_available(void);

#endif
