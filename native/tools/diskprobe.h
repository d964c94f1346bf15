/* diskprobe.h - the disk's own read speed, measured on a checkpoint's shards the way the
 * engine reads them: into memory the process owns, with pread through the page cache or,
 * with direct (the engine's --reads direct), around it through a bounce buffer as
 * io_read_direct does; cold (the shards dropped from the page cache with posix_fadvise
 * DONTNEED first), either one reader going through the
 * shards in order at a given block size (as the trunk's ring reader does) or several
 * readers taking block-sized reads at random offsets (as expert misses are). It is the
 * physical limit `k3 bench-scale` sets the engine's own reads against.
 *
 * On a virtual machine the "disk" may be two tiers: bytes the host has cached come back
 * several times faster than bytes it has not. Dropping the guest's page cache does not drop
 * the host's, so a probe can be pointed at the very bytes a pass reads: an extents file
 * (lines "SHARD_NAME OFFSET LENGTH t|e", each inside its shard, at most 2^20) lists the
 * sequential stream (t: e.g. the trunk's tensors in file order) and the units random reads
 * take whole (e: e.g. one routed expert each). Without one (extents NULL) the stream is
 * every shard in name order and a random read is a block at a random offset. */
#ifndef K3_DISKPROBE_H
#define K3_DISKPROBE_H

#include <stdint.h>

typedef struct diskprobe_result {
    uint64_t block;      /* bytes per pread */
    int readers;         /* threads reading at once */
    uint64_t bytes;      /* read in all */
    double seconds;      /* wall-clock time of the whole probe */
    double read_seconds; /* summed over readers: time inside pread */
    double cpu_seconds;  /* CPU time the process spent meanwhile (every thread): what reading
                            costs the cores, mostly copying from the page cache */
} diskprobe_result;

/* Drops dir's shards from the page cache, then reads `bytes` of the sequential stream in
 * order from byte `skip` on, wrapping to the start, at most the whole stream once, `block`
 * bytes per pread (never across an extent's end).
 * Returns 0, or -1 after writing why into why. */
int diskprobe_sequential(const char *dir, const char *extents, int direct, uint64_t block, uint64_t skip,
                         uint64_t bytes, diskprobe_result *out, char *why, int why_size);

/* Drops dir's shards from the page cache, then `readers` threads make `count` random
 * reads (seeded): whole extents of the random pool, or blocks of `block` bytes at random
 * 4 KiB-aligned offsets (inside one shard each). No extent or block is read twice (the
 * second read would come from the page cache), so count is at most the pool's size; out
 * says how many bytes were read. */
int diskprobe_random(const char *dir, const char *extents, int direct, uint64_t block, int count, int readers,
                     unsigned seed, diskprobe_result *out, char *why, int why_size);

/* Both at once, as a pass that streams its trunk while its experts are read: one reader
 * going through `seq_bytes` of the shards in order from `skip` at `seq_block` bytes per
 * read, and `readers` threads taking `count` random blocks of `block` bytes. out gets the
 * bytes of both and the wall-clock time until the last finished. */
int diskprobe_mixed(const char *dir, const char *extents, int direct, uint64_t seq_block, uint64_t skip,
                    uint64_t seq_bytes, uint64_t block, int count, int readers, unsigned seed, diskprobe_result *out,
                    char *why, int why_size);

#endif
