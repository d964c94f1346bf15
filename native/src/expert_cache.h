/* expert_cache.h - routed experts read from the shards into a fixed number of slots with
 * LRU eviction, so the expert pool (1.45 TB in the release) never has to be in memory.
 * Each expert's tensors (three projections, each packed data + scale) are read into one
 * slot, in as few reads as the file layout allows (one when they are back to back, as in
 * the release and the generated fixtures).
 *
 * One layer pass is a job: after the router has chosen, expert_cache_begin() hands over the
 * layer's distinct experts in ascending order, and reader threads start acquiring them in
 * that order (a cached one is pinned, a missing one gets the least recently used unpinned
 * slot, preferring slots this job does not want, and is read) while the caller computes
 * the shared experts and the latent projection. The caller then takes the experts in the
 * same order (expert_cache_get, blocking until its bytes are in) and releases each after
 * use. Because acquisition and use follow one order, the pinned slots always form a window
 * of that list, so any number of slots >= 1 makes progress (the plan requires top_k).
 *
 * Early reads (expert_cache_prefetch): while a job runs, the caller may name the experts it
 * guesses the next layer will ask for. The readers take them only when the current job has
 * nothing left to acquire, so they never delay its reads or take a slot it holds; an early
 * read goes into an empty slot or the least recently used unpinned one that holds no other
 * early read not yet asked for, and the guesses are capped at the slots the current job
 * does not hold. A guess only warms the cache: which experts a job computes, and their
 * bytes, are whatever the job names. A wrong guess costs one wasted read.
 *
 * A failed read is never skipped: every later expert_cache_get of the job returns
 * K3_ERR_EXPERT_READ with a detail naming the expert, its layer, the file and the offset.
 * A failed early read is forgotten (its slot emptied), and the expert is read again when a
 * job asks for it; if a job already waits on it, it is read again at once as that job's.
 * The cache does no arithmetic and does not decide the summation order (moe.c does).
 *
 * Threading: one job at a time (the model serialises forward passes when it streams); the
 * calls of a job come from one thread. Reader threads are internal. */
#ifndef K3_EXPERT_CACHE_H
#define K3_EXPERT_CACHE_H

#include <stdint.h>

#include "error.h"
#include "moe.h"
#include "safetensors.h"

typedef struct expert_cache expert_cache;

/* Cumulative since expert_cache_new. */
typedef struct expert_cache_counters {
    uint64_t requests;     /* experts asked for, one per distinct expert per layer pass */
    uint64_t retained;     /* requests served by a slot filled during an earlier layer pass */
    uint64_t evictions;    /* slots whose expert was replaced */
    uint64_t reads;        /* experts read from disk */
    uint64_t bytes_read;   /* bytes those reads brought in */
    uint64_t direct_bytes; /* of those, read around the page cache (O_DIRECT) */
    double read_seconds;   /* summed over reader threads: time inside pread */
    double wait_seconds;   /* time the caller blocked in expert_cache_get */
    /* Early reads (expert_cache_prefetch); their reads and bytes are also in the above. */
    uint64_t guesses;         /* experts named by expert_cache_prefetch */
    uint64_t guesses_routed;  /* of those, asked for by the next job of that layer */
    uint64_t early_reads;     /* reads started from a guess */
    uint64_t early_bytes;     /* bytes those reads brought in */
    uint64_t early_used;      /* early reads a job then asked for before they were evicted */
    double early_used_seconds; /* reader time inside pread of those: read time taken off the
                                  caller's path, an upper bound on the wait they saved */
} expert_cache_counters;

/* An empty table for n_moe_layers x n_experts experts stored in `set`. */
k3_status expert_cache_new(const st_set *set, int n_moe_layers, int n_experts, expert_cache **out, k3_error *err);

/* Records where one projection of an expert lives: which 0 = w1 (gate), 1 = w3 (up),
 * 2 = w2 (down); shape gives type, rows and cols (its data pointers are ignored); data is
 * the weight tensor and scale the MXFP4 scale tensor (NULL for dense experts). layer is the
 * model layer, for messages. */
void expert_cache_add(expert_cache *ec, int moe_layer, int layer, int expert, int which, const kernels_matrix *shape,
                      const st_tensor *data, const st_tensor *scale);

/* Lays out every expert in a slot (all must have been added); expert_cache_slot_bytes()
 * is valid after it. */
k3_status expert_cache_layout(expert_cache *ec, k3_error *err);

/* Bytes of all experts as stored (the pool). Valid after expert_cache_layout. */
uint64_t expert_cache_pool_bytes(const expert_cache *ec);

/* Bytes of the table itself (for the plan). */
uint64_t expert_cache_table_bytes(int n_moe_layers, int n_experts);

/* Allocates n_slots slots and starts n_readers reader threads (>= 1). direct: read through
 * the shards' O_DIRECT descriptors (st_open_direct) where open, each reader with its own
 * IO_BOUNCE_BYTES buffer, and through the page cache from the first refusal on. fault_read > 0 makes
 * the fault_read-th expert read (counting from 1) fail as if the file ended there: the
 * tests' way to break a read. */
k3_status expert_cache_start(expert_cache *ec, int n_slots, int n_readers, int direct, long fault_read,
                             k3_error *err);

/* Stops the readers and frees everything; NULL is a no-op. */
void expert_cache_free(expert_cache *ec);

/* Starts a job: experts (n, ascending, distinct) of moe layer `moe_layer`. */
void expert_cache_begin(expert_cache *ec, int moe_layer, const int *experts, int n);

/* Guesses that the next job of moe layer `moe_layer` will ask for experts (n, ascending,
 * distinct), most likely first among equals by ascending order: reads the ones not cached
 * once the current job's are all under way (see the top of this file). A later call, or
 * the next expert_cache_begin, drops the guesses not yet started. */
void expert_cache_prefetch(expert_cache *ec, int moe_layer, const int *experts, int n);

/* Waits until every guess not dropped has been read or dropped (for tests: what an early
 * read leaves behind is then fixed). */
void expert_cache_wait_early(expert_cache *ec);

/* The weights of item i of the job (items are taken in order 0, 1, ...), valid until
 * expert_cache_release(i). K3_ERR_EXPERT_READ when any read of the job failed. */
k3_status expert_cache_get(expert_cache *ec, int i, moe_expert *out, k3_error *err);

/* Done with item i (the one last returned by expert_cache_get). */
void expert_cache_release(expert_cache *ec, int i);

/* Ends the job, complete or not: waits for reads in flight and unpins what the caller did
 * not release. Slots whose read failed are emptied. */
void expert_cache_end(expert_cache *ec);

int expert_cache_slots(const expert_cache *ec);
uint64_t expert_cache_slot_bytes(const expert_cache *ec);
void expert_cache_get_counters(expert_cache *ec, expert_cache_counters *out);

#endif
