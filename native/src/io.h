/* io.h - the engine's file reads and the few facts about the machine that memory planning
 * needs: positioned reads of weight bytes into caller memory (pread, restarted on EINTR and
 * on short reads until the file ends), the large allocations the slots live in, a
 * monotonic clock, and MemAvailable.
 *
 * Reads that stream (routed experts, ring layers) may go around the page cache: a file
 * opened with io_open_direct() (O_DIRECT where the system and the file system allow it,
 * else -1 and the caller keeps pread) is read in aligned blocks through a bounce buffer.
 * On the VM this project measures on, reading a cold shard through the page cache kept
 * 0.71-0.93 of a core busy in the kernel (`dd`, 0.7-1.0 GB/s) against 0.05-0.09 for
 * O_DIRECT at the same rate; with two cores that is compute the readers took from the
 * forward pass (docs/SCALE.md).
 * It knows nothing of tensors, experts or layers: callers name those in their error
 * details, and io_read_describe() gives them the file half of the sentence. */
#ifndef K3_IO_H
#define K3_IO_H

#include <stddef.h>
#include <stdint.h>

/* Reads len bytes at offset of fd into buf. Returns the bytes read: len on success, fewer
 * when the file ends early or a read fails (*error then gets errno, or 0 for end of file). */
size_t io_read_at(int fd, void *buf, size_t len, uint64_t offset, int *error);

/* O_DIRECT needs the file offset, the length and the memory address aligned to the
 * device's logical block; 4096 covers the block sizes in use (512 and 4096). */
#define IO_DIRECT_ALIGN 4096
/* One direct read moves at most this much: two of the device's largest requests (4 MiB
 * here) in flight per reader, at little memory per reader thread. Into huge pages, 8, 16
 * and 32 MiB read alike here (1.29-1.43 GB/s from a cold stretch of a shard). */
#define IO_BOUNCE_BYTES ((size_t)8 << 20)

/* path opened read-only with O_DIRECT, or -1 when the system or its file system refuses. */
int io_open_direct(const char *path);

/* A buffer for io_read_direct: IO_BOUNCE_BYTES aligned to IO_DIRECT_ALIGN, or NULL; in huge
 * pages where the system has them (so a read reaches the device as few large requests),
 * already faulted in. io_bounce_free takes it back. */
void *io_bounce_alloc(void);
void io_bounce_free(void *bounce);

/* Reads len bytes at offset of fd (from io_open_direct) into buf, any alignment, through
 * bounce: the aligned blocks that cover the range, IO_BOUNCE_BYTES at a time, each copied
 * out. Returns and reports as io_read_at does; *error is EINVAL when the file system took
 * the open but refuses the read (the caller then falls back to io_read_at). */
size_t io_read_direct(int fd, void *buf, size_t len, uint64_t offset, void *bounce, int *error);

/* A streaming reader's read: with io_read_direct through bounce on direct_fd when both are
 * given and *refused is 0, else io_read_at on fd. A direct read the file system refuses
 * (EINVAL before any byte) sets *refused and is made again with io_read_at, as are all
 * later ones of that reader. *direct is 1 when the bytes came around the page cache.
 * Returns and reports as io_read_at does. */
size_t io_read_streamed(int fd, int direct_fd, void *bounce, int *refused, void *buf, size_t len, uint64_t offset,
                        int *error, int *direct);

/* Writes "reading LEN bytes at offset OFF of PATH failed: WHY" into out, WHY being
 * "the file ends after GOT of them" or strerror(error). */
void io_read_describe(char *out, size_t size, const char *path, size_t len, uint64_t offset, size_t got,
                      int error);

/* Zero-filled memory for slots and pinned layers, bytes long: an anonymous mapping (huge
 * pages advised where the system has them) or malloc. Pages become resident when first
 * written. NULL when it cannot be had. io_free_large takes the same size back. */
void *io_alloc_large(size_t bytes);
void io_free_large(void *p, size_t bytes);

/* Asks for [p, p + bytes), a mapping of 8 MB or more, to be mapped in 2 MB pages where the
 * system allows (Linux MADV_HUGEPAGE); a request refused or unknown changes nothing. For
 * a read-only file mapping it makes the kernel read the file into 2 MB page-cache pages
 * on first touch, and map them whole, when the file is not yet cached in smaller ones. */
void io_advise_huge_pages(void *p, size_t bytes);

/* Seconds on a monotonic clock. */
double io_now(void);

/* The kernel's MemAvailable in bytes (Linux /proc/meminfo), or 0 when it cannot be read.
 * The environment variable K3_MEM_AVAILABLE (a byte count, e.g. 8e9) overrides it: for
 * tests of refusals, and to plan for a smaller machine. */
uint64_t io_mem_available(void);

#endif
