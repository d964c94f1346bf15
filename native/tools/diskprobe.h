/* diskprobe.h - the disk's own read speed, measured on a checkpoint's shards the way the
 * engine reads them: with pread into memory the process owns, cold (the shards dropped from
 * the page cache with posix_fadvise DONTNEED first), either one reader going through the
 * shards in order at a given block size (as the trunk's ring reader does) or several
 * readers taking block-sized reads at random offsets (as expert misses are). It is the
 * physical limit `k3 bench-scale` sets the engine's own reads against.
 *
 * On a virtual machine the "disk" may be two tiers: bytes the host has cached come back
 * several times faster than bytes it has not. Dropping the guest's page cache does not drop
 * the host's, so a probe reads what the engine will read next, just before it does. */
#ifndef K3_DISKPROBE_H
#define K3_DISKPROBE_H

#include <stdint.h>

typedef struct diskprobe_result {
    uint64_t block;      /* bytes per pread */
    int readers;         /* threads reading at once */
    uint64_t bytes;      /* read in all */
    double seconds;      /* wall-clock time of the whole probe */
    double read_seconds; /* summed over readers: time inside pread */
} diskprobe_result;

/* Drops dir's shards from the page cache, then reads `bytes` of them in order (the shards
 * sorted by name, as one stream) from byte `skip` on, wrapping to the start, at most the
 * whole stream once, `block` bytes per pread (never across a shard's end).
 * Returns 0, or -1 after writing why into why. */
int diskprobe_sequential(const char *dir, uint64_t block, uint64_t skip, uint64_t bytes, diskprobe_result *out,
                         char *why, int why_size);

/* Drops dir's shards from the page cache, then `readers` threads read `count` blocks of
 * `block` bytes at random 4 KiB-aligned offsets (seeded, inside one shard each). */
int diskprobe_random(const char *dir, uint64_t block, int count, int readers, unsigned seed, diskprobe_result *out,
                     char *why, int why_size);

#endif
