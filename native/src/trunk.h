/* trunk.h - the per-layer dense weights (attention projections, dense MLP, router, latent
 * projections, shared experts) held in memory the engine owns, within a byte budget:
 * as many layers as the budget allows are pinned (read once at start), the rest stream
 * through a ring of layer slots, read by a reader thread just ahead of use. The layer
 * order is fixed, so the reader always knows the next layer; it keeps prefetching across
 * forward passes (after the last streamed layer comes the first again).
 *
 * It knows a layer only as a struct of `layer_size` bytes holding kernels_matrix fields at
 * registered offsets; acquiring a layer returns a copy of the caller's template whose
 * matrices point into the slot. Tensors are read with pread in runs of file-contiguous
 * tensors, so the release's shards need no repacking. It does not read the embedding
 * table or lm_head (except single embedding rows, trunk_embed_row) or routed experts, and
 * never touches the shards' mappings.
 *
 * Threading: acquire/release from one thread at a time (the model serialises forward
 * passes while it streams); the reader thread is internal. */
#ifndef K3_TRUNK_H
#define K3_TRUNK_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "safetensors.h"

typedef struct trunk trunk;

/* Cumulative since trunk_new. */
typedef struct trunk_counters {
    uint64_t layer_reads;   /* streamed layers read into the ring */
    uint64_t bytes_read;    /* their bytes, plus embedding rows */
    uint64_t direct_bytes;  /* of the layers' bytes, read around the page cache (O_DIRECT) */
    uint64_t embed_rows;    /* embedding rows read */
    double read_seconds;    /* reader thread time inside pread (and embedding rows) */
    double wait_seconds;    /* time trunk_acquire blocked */
    uint64_t pinned_bytes;  /* read once at trunk_start for the pinned layers */
    double pinned_seconds;
} trunk_counters;

/* The placement a budget buys (plan.c chooses it, trunk_start applies it). */
typedef struct trunk_layout {
    uint8_t pinned[K3_CONFIG_MAX_LAYERS]; /* (n_layers) 1: held for the model's lifetime */
    int ring_slots;      /* slots streaming the other layers: 0 when all are pinned */
    uint64_t slot_bytes; /* bytes of one ring slot */
} trunk_layout;

/* n_layers layer structs of layer_size bytes at `templates` (kept, not copied: they must
 * outlive the trunk). */
k3_status trunk_new(const st_set *set, int n_layers, const void *templates, size_t layer_size, trunk **out,
                    k3_error *err);

/* Registers the kernels_matrix at byte offset `field` of layer `layer`'s struct as tensor t. */
k3_status trunk_add(trunk *tr, int layer, size_t field, const st_tensor *t, k3_error *err);

/* The embedding table, for trunk_embed_row (rows of cols bf16 or f32 values). */
void trunk_set_embed(trunk *tr, const st_tensor *t);

/* Bytes layer `layer` occupies in a slot (its tensors in file-contiguous runs, each run
 * 64-byte aligned). Valid once every matrix is added. */
uint64_t trunk_layer_bytes(const trunk *tr, int layer);

/* Allocates the pinned layers and reads them (through the page cache, so a reopen finds
 * them there), allocates the ring and starts the reader: with direct, it reads through the
 * shards' O_DIRECT descriptors where open (an IO_BOUNCE_BYTES buffer of its own), and
 * through the page cache from the first refusal on. progress (may be NULL) is called after
 * each pinned layer with the bytes read so far and in all; a nonzero return stops with
 * K3_ERR_CANCELLED. */
k3_status trunk_start(trunk *tr, const trunk_layout *layout, int direct,
                      int (*progress)(void *user, const char *phase, uint64_t done, uint64_t total), void *user,
                      k3_error *err);

void trunk_free(trunk *tr);

/* *out = layer `layer`, its matrices in memory until trunk_release(layer). K3_ERR_IO when
 * its read failed (the detail names the layer, file and offset). */
k3_status trunk_acquire(trunk *tr, int layer, const void **out, k3_error *err);
void trunk_release(trunk *tr, int layer);

/* Layer `layer` when it is pinned (its matrices in memory for the trunk's lifetime), else
 * NULL: it streams, and only trunk_acquire may wait for it. */
const void *trunk_pinned(const trunk *tr, int layer);

/* Reads embedding row `row` into out as f32 (cols floats). K3_ERR_IO on a failed read. */
k3_status trunk_embed_row(trunk *tr, int row, float *out, k3_error *err);

void trunk_get_counters(trunk *tr, trunk_counters *out);

#endif
