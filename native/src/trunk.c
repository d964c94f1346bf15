/* trunk.c - pinned trunk layers and the streaming ring (see trunk.h). One mutex guards the
 * ring; reads happen outside it. */
#include "trunk.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "io.h"
#include "kernels.h"

#define TRUNK_ALIGN 64

enum { RING_FREE, RING_LOADING, RING_READY, RING_FAILED, RING_IN_USE };

typedef struct trunk_matrix {
    size_t field;        /* offset of the kernels_matrix in the layer struct */
    const st_tensor *t;
    uint64_t slot_offset; /* where its bytes land in a slot */
} trunk_matrix;

typedef struct trunk_extent {
    uint64_t file_offset, len, slot_offset;
    int shard;
} trunk_extent;

typedef struct trunk_layer {
    trunk_matrix *matrices; /* (n_matrices) */
    int n_matrices, cap_matrices;
    trunk_extent *extents;  /* (n_extents) runs of file-contiguous tensors */
    int n_extents;
    uint64_t bytes;         /* in a slot */
    uint8_t *pinned;        /* (bytes) inside pinned_arena, when pinned */
    void *pinned_layer;     /* (layer_size) bound copy when pinned */
} trunk_layer;

typedef struct ring_slot {
    uint8_t *data;   /* (slot_bytes) */
    void *layer_copy; /* (layer_size) the template bound to data */
    int layer;       /* -1 when free */
    int state;       /* RING_* */
} ring_slot;

struct trunk {
    const st_set *set;
    int n_layers;
    const uint8_t *templates;
    size_t layer_size;
    trunk_layer *layers; /* (n_layers) */
    const st_tensor *embed;

    int *sequence;       /* (n_streamed) the streamed layers, ascending */
    int n_streamed;
    int *seq_index;      /* (n_layers) position in sequence, -1 when pinned */
    ring_slot *ring;     /* (n_ring) */
    int n_ring;
    uint64_t slot_bytes;
    uint8_t *pinned_arena, *ring_arena; /* (pinned_bytes), (n_ring, slot_bytes) */
    size_t pinned_bytes, ring_bytes;
    long next_read;      /* sequence position the reader loads next (modulo n_streamed) */
    char fail_detail[K3_ERROR_DETAIL_MAX];

    trunk_counters counters;
    pthread_mutex_t lock;
    pthread_cond_t reader_cv, consumer_cv;
    pthread_t reader;
    int reader_running, stop, sync_ready;
    int direct; /* the ring reader reads around the page cache (set by trunk_start) */
};

k3_status trunk_new(const st_set *set, int n_layers, const void *templates, size_t layer_size, trunk **out,
                    k3_error *err) {
    *out = NULL;
    trunk *tr = calloc(1, sizeof *tr);
    if (tr) {
        tr->layers = calloc((size_t)n_layers + 1, sizeof *tr->layers);
        tr->sequence = calloc((size_t)n_layers + 1, sizeof *tr->sequence);
        tr->seq_index = calloc((size_t)n_layers + 1, sizeof *tr->seq_index);
    }
    if (!tr || !tr->layers || !tr->sequence || !tr->seq_index) {
        trunk_free(tr);
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory for %d layers", n_layers);
    }
    tr->set = set;
    tr->n_layers = n_layers;
    tr->templates = templates;
    tr->layer_size = layer_size;
    pthread_mutex_init(&tr->lock, NULL);
    pthread_cond_init(&tr->reader_cv, NULL);
    pthread_cond_init(&tr->consumer_cv, NULL);
    tr->sync_ready = 1;
    *out = tr;
    return K3_OK;
}

static uint64_t align_up(uint64_t v) {
    return (v + TRUNK_ALIGN - 1) / TRUNK_ALIGN * TRUNK_ALIGN;
}

static int by_file_position(const void *a, const void *b) {
    const trunk_matrix *x = a, *y = b;
    if (x->t->shard != y->t->shard)
        return x->t->shard < y->t->shard ? -1 : 1;
    return x->t->file_offset < y->t->file_offset ? -1 : x->t->file_offset > y->t->file_offset ? 1 : 0;
}

/* Rebuilds the layer's runs and slot offsets after a matrix was added. */
static k3_status lay_out(trunk_layer *ly, k3_error *err) {
    qsort(ly->matrices, (size_t)ly->n_matrices, sizeof *ly->matrices, by_file_position);
    free(ly->extents);
    ly->extents = malloc(sizeof *ly->extents * (size_t)ly->n_matrices);
    if (!ly->extents)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory laying out %d tensors", ly->n_matrices);
    ly->n_extents = 0;
    uint64_t used = 0;
    for (int i = 0; i < ly->n_matrices; i++) {
        const st_tensor *t = ly->matrices[i].t;
        trunk_extent *last = ly->n_extents ? &ly->extents[ly->n_extents - 1] : NULL;
        if (last && last->shard == t->shard && last->file_offset + last->len == t->file_offset) {
            last->len += t->nbytes;
        } else {
            used = align_up(used);
            ly->extents[ly->n_extents++] = (trunk_extent){t->file_offset, t->nbytes, used, t->shard};
            last = &ly->extents[ly->n_extents - 1];
        }
        ly->matrices[i].slot_offset = last->slot_offset + (t->file_offset - last->file_offset);
        used = last->slot_offset + last->len;
    }
    ly->bytes = align_up(used);
    return K3_OK;
}

k3_status trunk_add(trunk *tr, int layer, size_t field, const st_tensor *t, k3_error *err) {
    trunk_layer *ly = &tr->layers[layer];
    if (ly->n_matrices == ly->cap_matrices) {
        const int cap = ly->cap_matrices ? 2 * ly->cap_matrices : 16;
        trunk_matrix *grown = realloc(ly->matrices, sizeof *grown * (size_t)cap);
        if (!grown)
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory registering tensor '%s'", t->name);
        ly->matrices = grown;
        ly->cap_matrices = cap;
    }
    ly->matrices[ly->n_matrices++] = (trunk_matrix){field, t, 0};
    return lay_out(ly, err);
}

void trunk_set_embed(trunk *tr, const st_tensor *t) {
    tr->embed = t;
}

uint64_t trunk_layer_bytes(const trunk *tr, int layer) {
    return tr->layers[layer].bytes;
}

/* Reads layer l into data (at least its bytes): through bounce and the shards' O_DIRECT
 * descriptors when bounce is given and the file system has not refused (*refused), else
 * through the page cache. Returns 0, or -1 with detail filled. */
static int read_layer(trunk *tr, int l, uint8_t *data, void *bounce, int *refused, char *detail, size_t size,
                      uint64_t *bytes, uint64_t *direct_bytes) {
    const trunk_layer *ly = &tr->layers[l];
    *bytes = *direct_bytes = 0;
    for (int e = 0; e < ly->n_extents; e++) {
        const trunk_extent *ex = &ly->extents[e];
        const st_shard *sh = st_shard_at(tr->set, ex->shard);
        int error = 0, direct = 0;
        const size_t got = io_read_streamed(sh->fd, sh->direct_fd, bounce, refused, data + ex->slot_offset, ex->len,
                                            ex->file_offset, &error, &direct);
        *bytes += got;
        *direct_bytes += direct ? got : 0;
        if (got != ex->len) {
            char why[768];
            io_read_describe(why, sizeof why, sh->path, ex->len, ex->file_offset, got, error);
            snprintf(detail, size, "trunk layer %d could not be read (%s)", l, why);
            return -1;
        }
    }
    return 0;
}

/* Copies layer l's template to copy and points its matrices into data. */
static void bind_copy(const trunk *tr, int l, const uint8_t *data, void *copy) {
    const trunk_layer *ly = &tr->layers[l];
    memcpy(copy, tr->templates + (size_t)l * tr->layer_size, tr->layer_size);
    for (int i = 0; i < ly->n_matrices; i++) {
        kernels_matrix *m = (kernels_matrix *)((uint8_t *)copy + ly->matrices[i].field);
        m->data = data + ly->matrices[i].slot_offset;
    }
}

static void *reader_main(void *arg) {
    trunk *tr = arg;
    /* The ring streams every pass: around the page cache where it can (trunk.h). */
    void *bounce = tr->direct ? io_bounce_alloc() : NULL;
    int refused = 0;
    pthread_mutex_lock(&tr->lock);
    for (;;) {
        int free_slot = -1;
        while (!tr->stop) {
            for (int s = 0; s < tr->n_ring && free_slot < 0; s++)
                if (tr->ring[s].state == RING_FREE)
                    free_slot = s;
            if (free_slot >= 0)
                break;
            pthread_cond_wait(&tr->reader_cv, &tr->lock);
        }
        if (tr->stop)
            break;
        const int l = tr->sequence[tr->next_read % tr->n_streamed];
        tr->next_read++;
        ring_slot *rs = &tr->ring[free_slot];
        rs->layer = l;
        rs->state = RING_LOADING;
        pthread_mutex_unlock(&tr->lock);

        char detail[K3_ERROR_DETAIL_MAX];
        uint64_t bytes, direct_bytes;
        const double t0 = io_now();
        const int bad = read_layer(tr, l, rs->data, bounce, &refused, detail, sizeof detail, &bytes, &direct_bytes);
        const double t1 = io_now();
        if (!bad)
            bind_copy(tr, l, rs->data, rs->layer_copy);

        pthread_mutex_lock(&tr->lock);
        tr->counters.layer_reads++;
        tr->counters.bytes_read += bytes;
        tr->counters.direct_bytes += direct_bytes;
        tr->counters.read_seconds += t1 - t0;
        if (bad)
            memcpy(tr->fail_detail, detail, sizeof detail);
        rs->state = bad ? RING_FAILED : RING_READY;
        pthread_cond_broadcast(&tr->consumer_cv);
    }
    pthread_mutex_unlock(&tr->lock);
    io_bounce_free(bounce);
    return NULL;
}

k3_status trunk_start(trunk *tr, const trunk_layout *layout, int direct,
                      int (*progress)(void *user, const char *phase, uint64_t done, uint64_t total), void *user,
                      k3_error *err) {
    tr->direct = direct;
    tr->n_streamed = 0;
    for (int l = 0; l < tr->n_layers; l++) {
        tr->seq_index[l] = -1;
        if (!layout->pinned[l]) {
            tr->seq_index[l] = tr->n_streamed;
            tr->sequence[tr->n_streamed++] = l;
        }
    }
    uint64_t to_pin = 0;
    for (int l = 0; l < tr->n_layers; l++)
        to_pin += layout->pinned[l] ? tr->layers[l].bytes : 0;
    /* One allocation for every pinned layer (each layer's bytes are a multiple of 64). */
    tr->pinned_bytes = (size_t)to_pin;
    if (to_pin && !(tr->pinned_arena = io_alloc_large(tr->pinned_bytes)))
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory pinning %.1f MB of layers",
                         (double)to_pin / 1e6);
    uint64_t placed = 0;
    const double t0 = io_now();
    for (int l = 0; l < tr->n_layers; l++) {
        trunk_layer *ly = &tr->layers[l];
        if (!layout->pinned[l])
            continue;
        if (progress && progress(user, "trunk", tr->counters.pinned_bytes, to_pin))
            return error_set(err, K3_ERR_CANCELLED, "opening the model was cancelled after pinning %.1f of %.1f MB",
                             (double)tr->counters.pinned_bytes / 1e6, (double)to_pin / 1e6);
        ly->pinned = tr->pinned_arena + placed;
        placed += ly->bytes;
        ly->pinned_layer = malloc(tr->layer_size);
        if (!ly->pinned_layer)
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory pinning layer %d", l);
        char detail[K3_ERROR_DETAIL_MAX];
        uint64_t bytes, direct_bytes;
        int refused = 0;
        /* Pinned layers are read once, through the page cache: a reopen finds them there. */
        const int bad = read_layer(tr, l, ly->pinned, NULL, &refused, detail, sizeof detail, &bytes, &direct_bytes);
        tr->counters.pinned_bytes += bytes;
        if (bad)
            return error_set(err, K3_ERR_IO, "%s", detail);
        bind_copy(tr, l, ly->pinned, ly->pinned_layer);
    }
    if (progress && to_pin && progress(user, "trunk", tr->counters.pinned_bytes, to_pin))
        return error_set(err, K3_ERR_CANCELLED, "opening the model was cancelled after pinning all %.1f MB",
                         (double)to_pin / 1e6);
    tr->counters.pinned_seconds = io_now() - t0;
    if (tr->n_streamed == 0)
        return K3_OK;
    if (layout->ring_slots < 1)
        return error_set(err, K3_ERR_INTERNAL, "trunk: %d layers stream but the layout has no ring slot",
                         tr->n_streamed);
    for (int i = 0; i < tr->n_streamed; i++)
        if (tr->layers[tr->sequence[i]].bytes > layout->slot_bytes)
            return error_set(err, K3_ERR_INTERNAL, "trunk: layer %d needs %llu bytes, ring slots hold %llu",
                             tr->sequence[i], (unsigned long long)tr->layers[tr->sequence[i]].bytes,
                             (unsigned long long)layout->slot_bytes);
    tr->ring = calloc((size_t)layout->ring_slots, sizeof *tr->ring);
    if (!tr->ring)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory for %d ring slots", layout->ring_slots);
    tr->n_ring = layout->ring_slots;
    tr->slot_bytes = layout->slot_bytes;
    tr->ring_bytes = (size_t)tr->n_ring * (size_t)tr->slot_bytes;
    if (!(tr->ring_arena = io_alloc_large(tr->ring_bytes)))
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory for %d ring slots of %.1f MB", tr->n_ring,
                         (double)tr->slot_bytes / 1e6);
    for (int s = 0; s < tr->n_ring; s++) {
        tr->ring[s].layer = -1;
        tr->ring[s].data = tr->ring_arena + (size_t)s * tr->slot_bytes;
        tr->ring[s].layer_copy = malloc(tr->layer_size);
        if (!tr->ring[s].layer_copy)
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "trunk: out of memory for ring slot %d of %d", s + 1,
                             tr->n_ring);
    }
    if (pthread_create(&tr->reader, NULL, reader_main, tr) != 0)
        return error_set(err, K3_ERR_INTERNAL, "trunk: could not start the reader thread");
    tr->reader_running = 1;
    return K3_OK;
}

void trunk_free(trunk *tr) {
    if (!tr)
        return;
    if (tr->reader_running) {
        pthread_mutex_lock(&tr->lock);
        tr->stop = 1;
        pthread_cond_broadcast(&tr->reader_cv);
        pthread_mutex_unlock(&tr->lock);
        pthread_join(tr->reader, NULL);
    }
    if (tr->sync_ready) {
        pthread_cond_destroy(&tr->reader_cv);
        pthread_cond_destroy(&tr->consumer_cv);
        pthread_mutex_destroy(&tr->lock);
    }
    if (tr->layers) {
        for (int l = 0; l < tr->n_layers; l++) {
            free(tr->layers[l].matrices);
            free(tr->layers[l].extents);
            free(tr->layers[l].pinned_layer);
        }
    }
    for (int s = 0; tr->ring && s < tr->n_ring; s++)
        free(tr->ring[s].layer_copy);
    free(tr->ring);
    io_free_large(tr->pinned_arena, tr->pinned_bytes);
    io_free_large(tr->ring_arena, tr->ring_bytes);
    free(tr->layers);
    free(tr->sequence);
    free(tr->seq_index);
    free(tr);
}

k3_status trunk_acquire(trunk *tr, int layer, const void **out, k3_error *err) {
    const trunk_layer *ly = &tr->layers[layer];
    if (ly->pinned_layer) {
        *out = ly->pinned_layer;
        return K3_OK;
    }
    pthread_mutex_lock(&tr->lock);
    const double t0 = io_now();
    int waited = 0;
    k3_status status = K3_OK;
    for (;;) {
        int s = -1;
        for (int i = 0; i < tr->n_ring && s < 0; i++)
            if (tr->ring[i].layer == layer && tr->ring[i].state != RING_FREE && tr->ring[i].state != RING_IN_USE)
                s = i;
        if (s >= 0 && tr->ring[s].state == RING_READY) {
            tr->ring[s].state = RING_IN_USE;
            *out = tr->ring[s].layer_copy;
            break;
        }
        if (s >= 0 && tr->ring[s].state == RING_FAILED) {
            status = error_set(err, K3_ERR_IO, "%s", tr->fail_detail);
            tr->ring[s].state = RING_FREE;
            tr->ring[s].layer = -1;
            pthread_cond_broadcast(&tr->reader_cv);
            break;
        }
        if (s < 0) {
            /* Not loaded and not loading: the sequence was broken (a forward pass stopped
             * early). Let reads in flight finish, drop what was prefetched, restart here. */
            int loading = 0;
            for (int i = 0; i < tr->n_ring; i++)
                loading |= tr->ring[i].state == RING_LOADING;
            if (!loading) {
                for (int i = 0; i < tr->n_ring; i++)
                    if (tr->ring[i].state == RING_READY || tr->ring[i].state == RING_FAILED) {
                        tr->ring[i].state = RING_FREE;
                        tr->ring[i].layer = -1;
                    }
                tr->next_read = tr->seq_index[layer];
                pthread_cond_broadcast(&tr->reader_cv);
            }
        }
        waited = 1;
        pthread_cond_wait(&tr->consumer_cv, &tr->lock);
    }
    if (waited)
        tr->counters.wait_seconds += io_now() - t0;
    pthread_mutex_unlock(&tr->lock);
    return status;
}

const void *trunk_pinned(const trunk *tr, int layer) {
    return tr->layers[layer].pinned_layer;
}

void trunk_release(trunk *tr, int layer) {
    if (tr->layers[layer].pinned_layer)
        return;
    pthread_mutex_lock(&tr->lock);
    for (int i = 0; i < tr->n_ring; i++)
        if (tr->ring[i].layer == layer && tr->ring[i].state == RING_IN_USE) {
            tr->ring[i].state = RING_FREE;
            tr->ring[i].layer = -1;
            break;
        }
    pthread_cond_broadcast(&tr->reader_cv);
    pthread_mutex_unlock(&tr->lock);
}

k3_status trunk_embed_row(trunk *tr, int row, float *out, k3_error *err) {
    const st_tensor *t = tr->embed;
    const int cols = (int)t->shape[1];
    const size_t elem = t->dtype == ST_F32 ? 4 : 2;
    const size_t len = elem * (size_t)cols;
    const uint64_t offset = t->file_offset + (uint64_t)row * len;
    const st_shard *sh = st_shard_at(tr->set, t->shard);
    /* A bf16 row is read into the upper half of out and widened front to back: float c
     * (bytes 4c..4c+3) never overlaps a bf16 value not yet read (bytes 2cols+2c' with c' > c). */
    uint8_t *dst = t->dtype == ST_F32 ? (uint8_t *)out : (uint8_t *)out + len;
    int error = 0;
    const double t0 = io_now();
    const size_t got = io_read_at(sh->fd, dst, len, offset, &error);
    const double t1 = io_now();
    pthread_mutex_lock(&tr->lock);
    tr->counters.embed_rows++;
    tr->counters.bytes_read += got;
    tr->counters.read_seconds += t1 - t0;
    tr->counters.wait_seconds += t1 - t0;
    pthread_mutex_unlock(&tr->lock);
    if (got != len) {
        char why[768];
        io_read_describe(why, sizeof why, sh->path, len, offset, got, error);
        return error_set(err, K3_ERR_IO, "embedding row %d of '%s' could not be read (%s)", row, t->name, why);
    }
    if (t->dtype != ST_F32)
        for (int c = 0; c < cols; c++) {
            uint16_t v; /* read through memcpy: the bytes are about to be reused as floats */
            memcpy(&v, dst + 2 * (size_t)c, sizeof v);
            out[c] = dtype_bf16_to_f32(v);
        }
    return K3_OK;
}

void trunk_get_counters(trunk *tr, trunk_counters *out) {
    pthread_mutex_lock(&tr->lock);
    *out = tr->counters;
    pthread_mutex_unlock(&tr->lock);
}
