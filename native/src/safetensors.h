/* safetensors.h - opens a checkpoint directory in the safetensors format and hands out its
 * tensors in place: every shard is mmap'ed read-only and a tensor's data pointer points
 * into the mapping, so nothing is copied or converted here. It does not know what any
 * tensor is for (weights.c does) and never reads tensor bytes itself.
 *
 * A directory holds either `model.safetensors.index.json` (its "weight_map" maps each
 * tensor name to a shard file in the same directory) or a single `model.safetensors`;
 * the index wins when both exist. A shard is: an 8-byte little-endian header length N,
 * N bytes of JSON ({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
 * "__metadata__": {string: string}}), then the data region; offsets are relative to it.
 *
 * st_open() validates everything before it succeeds, so later code can trust the set:
 * the header fits in the file; each tensor's dtype is known, its shape has at most
 * ST_MAX_DIMS non-negative dimensions whose byte size does not overflow, and
 * end - begin == product(shape) * dtype size with begin <= end <= the data region's
 * length; no two tensors' bytes overlap (gaps between tensors are allowed); names are
 * unique across all shards; with an index, every tensor it names is in the shard it names,
 * every shard it names opens, and every tensor in those shards is named by it.
 *
 * Errors: K3_ERR_IO (a file cannot be opened, read or mapped), K3_ERR_FORMAT (a shard or
 * the index breaks the format), K3_ERR_TENSOR (the index and the shards disagree about a
 * tensor; st_require/st_check_* on a missing or mismatched tensor),
 * K3_ERR_OUT_OF_MEMORY. Details name the file, the tensor, the field and the numbers, e.g.
 * "model-00002-of-000003.safetensors: tensor 'x.weight' data_offsets [1024, 99999999] run
 * past the data region (5120 bytes)".
 *
 * Each mapping is registered with fault.h, so a read past the end of a shard that shrank
 * after opening can fail a pass instead of killing the process (forward.c).
 *
 * Threading: st_open/st_close are single-threaded; an open set is immutable and may be
 * read (st_find, the tensors, the mappings, pread on the fds) from any number of threads.
 *
 * Requires a 64-bit platform (shards are tens of GB). Tensor data is aligned only as the
 * file aligns it: check st_is_aligned() before reading it as float or uint16_t. */
#ifndef K3_SAFETENSORS_H
#define K3_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The highest tensor rank accepted (the checkpoint uses at most 3). */
#define ST_MAX_DIMS 8

/* Element types of the safetensors format that have a whole-byte size. The sub-byte ones
 * (F4, F6_E2M3, F6_E3M2) are refused as unsupported. MXFP4 experts are stored as U8. */
typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_F8_E5M2,
    ST_F8_E4M3,
    ST_F8_E8M0,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_I64,
    ST_U64,
    ST_F64,
    ST_DTYPE_COUNT
} st_dtype;

/* The format's spelling ("BF16", "F32", "U8", ...); "?" for a value out of range. */
const char *st_dtype_name(st_dtype dtype);

/* Bytes per element (1, 2, 4 or 8); 0 for a value out of range. */
size_t st_dtype_size(st_dtype dtype);

typedef struct st_tensor {
    const char *name;     /* NUL-terminated, owned by the set */
    st_dtype dtype;
    int ndim;             /* 0..ST_MAX_DIMS; 0 is a scalar (one element) */
    const int64_t *shape; /* (ndim) each >= 0, row-major, outermost first; owned by the set */
    uint64_t numel;       /* product of shape (1 for a scalar) */
    uint64_t nbytes;      /* numel * st_dtype_size(dtype) */
    const void *data;     /* nbytes bytes inside the shard's read-only mapping */
    int shard;            /* index for st_shard_at() */
    uint64_t file_offset; /* where data starts in the shard file, for pread() */
} st_tensor;

typedef struct st_shard {
    const char *path;    /* directory + "/" + file */
    const char *file;    /* the file name, as the index spells it */
    int fd;              /* open O_RDONLY until st_close(): for pread/posix_fadvise */
    int direct_fd;       /* the same file opened O_DIRECT by st_open_direct(), else -1 */
    uint64_t size;       /* file length in bytes, when opened */
    uint64_t dev, ino;   /* the file's identity when opened (st_check_unchanged) */
    int64_t mtime_ns;    /* its modification time when opened, in ns since the epoch */
    const uint8_t *map;  /* the whole file, PROT_READ + MAP_PRIVATE */
    uint64_t data_start; /* 8 + header length: file offset of the data region */
    size_t n_tensors;
} st_shard;

typedef struct st_set st_set; /* opaque; everything it hands out lives until st_close() */

/* Opens the checkpoint in directory `dir` (see the top comment). On success *out owns
 * the open files and mappings; on failure *out is NULL, nothing stays open, and err says
 * why. */
k3_status st_open(const char *dir, st_set **out, k3_error *err);

/* Unmaps and closes everything; every pointer the set handed out dies. NULL is a no-op. */
void st_close(st_set *set);

/* The tensor called `name`, or NULL. Expected O(1): a hash table over all names. */
const st_tensor *st_find(const st_set *set, const char *name);

/* All tensors, for validation and tests: i in [0, st_count()), in shard order and, within
 * a shard, in the order its header lists them. */
size_t st_count(const st_set *set);
const st_tensor *st_tensor_at(const st_set *set, size_t i);

/* Shards in file-name order; shard i is the one with st_tensor.shard == i. */
int st_shard_count(const st_set *set);
const st_shard *st_shard_at(const st_set *set, int i);

/* Opens every shard a second time with O_DIRECT (io_open_direct) for reads that go around
 * the page cache; each stays -1 where the file system refuses. Returns how many opened. */
int st_open_direct(st_set *set);

/* The directory given to st_open(), and the name of the file that listed the tensors:
 * "model.safetensors.index.json" or "model.safetensors". */
const char *st_dir(const st_set *set);
const char *st_source(const st_set *set);

/* K3_OK while every shard's path still names the file that was opened, with the size and
 * modification time it had then (one stat() per shard); else K3_ERR_IO naming the first
 * one that changed, with both sizes and times: "DIR/model.safetensors changed while the
 * engine ran (5120 bytes, modified at ... when loaded, 800 bytes, ... now): ...". A file
 * replaced by another (a new inode under its name) or removed counts as changed. */
k3_status st_check_unchanged(const st_set *set, k3_error *err);

/* The shard whose mapping holds addr (and, when offset is not NULL, addr's offset in the
 * file), or -1. */
int st_shard_of(const st_set *set, const void *addr, uint64_t *offset);

/* True iff t->data is aligned to its element size, i.e. may be read through a pointer to
 * an element type. */
bool st_is_aligned(const st_tensor *t);

/* The lookup the engine's loaders use: *out (when out is not NULL) = the tensor, or NULL
 * and K3_ERR_TENSOR "missing tensor 'NAME' (looked in DIR/model.safetensors.index.json
 * and its 96 shards)" / "(looked in DIR/model.safetensors)". */
k3_status st_require(const st_set *set, const char *name, const st_tensor **out,
                     k3_error *err);

/* K3_ERR_TENSOR "tensor 'NAME': dtype F32, expected BF16" unless t->dtype == want. */
k3_status st_check_dtype(const st_tensor *t, st_dtype want, k3_error *err);

/* K3_ERR_TENSOR "tensor 'NAME': shape [64, 32], expected [64, 48]" unless t has
 * rank ndim and shape[i] matches for every i; an expected dimension of -1 matches any
 * size and prints as '?'. shape may be NULL when ndim is 0. */
k3_status st_check_shape(const st_tensor *t, int ndim, const int64_t *shape, k3_error *err);

/* st_require, then st_check_dtype, then st_check_shape: the one call per weight. */
k3_status st_expect(const st_set *set, const char *name, st_dtype dtype, int ndim,
                    const int64_t *shape, const st_tensor **out, k3_error *err);

/* Tests only, not thread-safe: make the n-th allocation st_open makes from now fail
 * (1 = the next one); 0 turns injection off. */
void st_fault_alloc(long n);

#endif
