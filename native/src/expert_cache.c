/* expert_cache.c - the routed-expert slot cache and its reader threads (see
 * expert_cache.h). One mutex guards all shared state; reads happen outside it. */
#include "expert_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

#define EC_TENSORS 6      /* w1, w1 scale, w3, w3 scale, w2, w2 scale */
#define EC_ALIGN 64       /* every extent starts at a multiple of this in a slot */
#define EC_MAX_READERS 16

enum { SLOT_EMPTY, SLOT_LOADING, SLOT_READY, SLOT_FAILED };

/* len bytes at file_offset of shard go to slot_offset within a slot. */
typedef struct ec_extent {
    uint64_t file_offset;
    uint64_t len;
    uint64_t slot_offset;
    int shard;
} ec_extent;

/* One expert: its tensors, where each lands in a slot, and the reads that fill it. */
typedef struct ec_expert {
    const st_tensor *t[EC_TENSORS]; /* NULL: absent (a dense expert has no scales) */
    uint64_t slot_offset[EC_TENSORS];
    uint32_t first_extent;
    uint8_t n_extents;
} ec_expert;

typedef struct ec_slot {
    uint8_t *data;       /* (slot_bytes) */
    int32_t key;         /* moe_layer * n_experts + expert, or -1 */
    int state;           /* SLOT_* */
    int pins;
    uint64_t last_use;   /* LRU clock at the last release */
    uint64_t loaded_job; /* the job whose read filled it */
    uint64_t wanted_job; /* a job that will ask for it (set at begin) */
    int wanted_index;    /* its item index in that job */
    int early;           /* filled (or being filled) by an early read no job has asked for yet */
    int early_claimed;   /* a job asked for it while the early read was in flight */
    double early_seconds; /* the early read's time inside pread, until a job asks for it */
} ec_slot;

struct expert_cache {
    const st_set *set;
    int n_moe_layers, n_experts;
    int *layer_of;          /* (n_moe_layers) model layer, for messages */
    ec_expert *experts;     /* (n_moe_layers * n_experts) */
    ec_extent *extents;     /* (n_extents) */
    uint32_t n_extents;
    kernels_matrix shape[3];
    uint64_t slot_bytes, pool_bytes;

    ec_slot *slots;         /* (n_slots) */
    uint8_t *arena;         /* (n_slots, slot_bytes) */
    size_t arena_bytes;
    int n_slots;
    int32_t *slot_of;       /* (n_moe_layers * n_experts) slot index or -1 */
    uint64_t clock;

    /* the current job */
    int job_active, job_layer, job_n;
    uint64_t job_id;
    int *job_experts;       /* (n_experts) */
    int *job_slot;          /* (n_experts) the slot of each item, -1 until acquired */
    int job_next;           /* items [0, job_next) are acquired */
    int job_consumed;       /* items [0, job_consumed) are released */
    int in_flight;
    int job_failed;
    char job_detail[K3_ERROR_DETAIL_MAX];

    /* early reads: the pending guesses (read in order) and the last guess, for its hit rate */
    int hint_layer, hint_n, hint_next;
    int *hint_experts;      /* (n_experts) */
    int guess_layer, guess_n;
    int *guess_experts;     /* (n_experts) ascending */
    int early_in_flight;

    long fault_read;
    uint64_t reads_started;
    int direct;             /* read around the page cache (shards' direct_fd), until refused */
    expert_cache_counters counters;

    pthread_mutex_t lock;
    pthread_cond_t reader_cv;   /* work to do, a slot freed, or stop */
    pthread_cond_t consumer_cv; /* an item acquired or read, or a read finished */
    pthread_t readers[EC_MAX_READERS];
    int n_readers, stop, sync_ready;
};

uint64_t expert_cache_table_bytes(int n_moe_layers, int n_experts) {
    const uint64_t n = (uint64_t)n_moe_layers * (uint64_t)n_experts;
    /* expert records, one extent each in the usual layout, the slot map, the job arrays */
    return n * (sizeof(ec_expert) + sizeof(ec_extent) + sizeof(int32_t)) + 4u * sizeof(int) * (uint64_t)n_experts;
}

k3_status expert_cache_new(const st_set *set, int n_moe_layers, int n_experts, expert_cache **out, k3_error *err) {
    *out = NULL;
    expert_cache *ec = calloc(1, sizeof *ec);
    const size_t n = (size_t)n_moe_layers * (size_t)n_experts;
    if (ec) {
        ec->set = set;
        ec->n_moe_layers = n_moe_layers;
        ec->n_experts = n_experts;
        ec->layer_of = calloc((size_t)n_moe_layers + 1, sizeof *ec->layer_of);
        ec->experts = calloc(n + 1, sizeof *ec->experts);
        ec->slot_of = malloc((n + 1) * sizeof *ec->slot_of);
        ec->job_experts = calloc((size_t)n_experts + 1, sizeof *ec->job_experts);
        ec->job_slot = calloc((size_t)n_experts + 1, sizeof *ec->job_slot);
        ec->hint_experts = calloc((size_t)n_experts + 1, sizeof *ec->hint_experts);
        ec->guess_experts = calloc((size_t)n_experts + 1, sizeof *ec->guess_experts);
    }
    if (!ec || !ec->layer_of || !ec->experts || !ec->slot_of || !ec->job_experts || !ec->job_slot ||
        !ec->hint_experts || !ec->guess_experts) {
        expert_cache_free(ec);
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "expert cache: out of memory for the table of %d x %d experts",
                         n_moe_layers, n_experts);
    }
    for (size_t i = 0; i < n; i++)
        ec->slot_of[i] = -1;
    pthread_mutex_init(&ec->lock, NULL);
    pthread_cond_init(&ec->reader_cv, NULL);
    pthread_cond_init(&ec->consumer_cv, NULL);
    ec->sync_ready = 1;
    *out = ec;
    return K3_OK;
}

void expert_cache_add(expert_cache *ec, int moe_layer, int layer, int expert, int which, const kernels_matrix *shape,
                      const st_tensor *data, const st_tensor *scale) {
    ec_expert *x = &ec->experts[(size_t)moe_layer * ec->n_experts + expert];
    x->t[2 * which] = data;
    x->t[2 * which + 1] = scale;
    ec->shape[which] = *shape;
    ec->shape[which].data = NULL;
    ec->shape[which].scale = NULL;
    ec->layer_of[moe_layer] = layer;
}

static int by_file_position(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset ? 1 : 0;
}

static uint64_t align_up(uint64_t v) {
    return (v + EC_ALIGN - 1) / EC_ALIGN * EC_ALIGN;
}

k3_status expert_cache_layout(expert_cache *ec, k3_error *err) {
    const size_t n = (size_t)ec->n_moe_layers * ec->n_experts;
    /* At most EC_TENSORS extents per expert; shrink nothing, the table is small. */
    free(ec->extents);
    ec->extents = malloc((n * EC_TENSORS + 1) * sizeof *ec->extents);
    if (!ec->extents)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "expert cache: out of memory for the read table of %zu experts", n);
    ec->n_extents = 0;
    ec->slot_bytes = 0;
    ec->pool_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        ec_expert *x = &ec->experts[i];
        if (!x->t[0] || !x->t[2] || !x->t[4])
            return error_set(err, K3_ERR_INTERNAL, "expert cache: expert %zu of layer %d was never bound",
                             i % (size_t)ec->n_experts, ec->layer_of[i / (size_t)ec->n_experts]);
        const st_tensor *sorted[EC_TENSORS];
        int k = 0;
        for (int j = 0; j < EC_TENSORS; j++)
            if (x->t[j])
                sorted[k++] = x->t[j];
        qsort(sorted, (size_t)k, sizeof sorted[0], by_file_position);
        x->first_extent = ec->n_extents;
        x->n_extents = 0;
        uint64_t used = 0;
        for (int j = 0; j < k; j++) {
            const st_tensor *t = sorted[j];
            ec_extent *last = x->n_extents ? &ec->extents[ec->n_extents - 1] : NULL;
            if (last && last->shard == t->shard && last->file_offset + last->len == t->file_offset) {
                last->len += t->nbytes;
            } else {
                used = align_up(used);
                ec->extents[ec->n_extents++] = (ec_extent){t->file_offset, t->nbytes, used, t->shard};
                x->n_extents++;
                last = &ec->extents[ec->n_extents - 1];
            }
            used = last->slot_offset + last->len;
            ec->pool_bytes += t->nbytes;
        }
        /* Where each tensor landed: its extent's slot offset plus its place in the run. */
        for (int j = 0; j < EC_TENSORS; j++) {
            const st_tensor *t = x->t[j];
            if (!t)
                continue;
            for (uint32_t e = x->first_extent; e < x->first_extent + x->n_extents; e++) {
                const ec_extent *ex = &ec->extents[e];
                if (ex->shard == t->shard && t->file_offset >= ex->file_offset &&
                    t->file_offset < ex->file_offset + ex->len)
                    x->slot_offset[j] = ex->slot_offset + (t->file_offset - ex->file_offset);
            }
        }
        if (align_up(used) > ec->slot_bytes)
            ec->slot_bytes = align_up(used);
    }
    return K3_OK;
}

uint64_t expert_cache_pool_bytes(const expert_cache *ec) {
    return ec->pool_bytes;
}

int expert_cache_slots(const expert_cache *ec) {
    return ec->n_slots;
}

uint64_t expert_cache_slot_bytes(const expert_cache *ec) {
    return ec->slot_bytes;
}

/* The slot a miss may take: an empty one, else the least recently used unpinned one that
 * this job does not want, else the unpinned wanted one needed last. -1: all pinned. */
static int pick_victim(expert_cache *ec) {
    int best = -1, best_wanted = -1;
    uint64_t best_use = UINT64_MAX;
    int best_index = -1;
    for (int s = 0; s < ec->n_slots; s++) {
        const ec_slot *sl = &ec->slots[s];
        if (sl->pins)
            continue;
        if (sl->key < 0)
            return s;
        if (sl->wanted_job == ec->job_id) {
            if (sl->wanted_index > best_index) {
                best_index = sl->wanted_index;
                best_wanted = s;
            }
        } else if (sl->last_use < best_use) {
            best_use = sl->last_use;
            best = s;
        }
    }
    return best >= 0 ? best : best_wanted;
}

/* The slot an early read may take: an empty one, else the least recently used unpinned one
 * that holds no early read a job has yet to ask for. -1: none (the guess is dropped). */
static int pick_early_victim(const expert_cache *ec) {
    int best = -1;
    uint64_t best_use = UINT64_MAX;
    for (int s = 0; s < ec->n_slots; s++) {
        const ec_slot *sl = &ec->slots[s];
        if (sl->pins || sl->early)
            continue;
        if (sl->key < 0)
            return s;
        if (sl->last_use < best_use) {
            best_use = sl->last_use;
            best = s;
        }
    }
    return best;
}

/* Reads expert `key` into slot s: through bounce and the shards' O_DIRECT descriptors
 * when bounce is given, else through the page cache. Returns 0, or -1 with *detail filled.
 * *direct_bytes gets the bytes read around the page cache; *refused is set when the file
 * system refused a direct read (that extent is then read through the page cache). */
static int read_expert(expert_cache *ec, int key, uint8_t *slot, int inject, void *bounce, char *detail, size_t size,
                       uint64_t *bytes, uint64_t *direct_bytes, int *refused) {
    const ec_expert *x = &ec->experts[key];
    *bytes = *direct_bytes = 0;
    for (uint32_t e = x->first_extent; e < x->first_extent + x->n_extents; e++) {
        const ec_extent *ex = &ec->extents[e];
        const st_shard *sh = st_shard_at(ec->set, ex->shard);
        int error = 0, direct = 0;
        const size_t got = inject ? 0
                                  : io_read_streamed(sh->fd, sh->direct_fd, bounce, refused, slot + ex->slot_offset,
                                                     ex->len, ex->file_offset, &error, &direct);
        *bytes += got;
        *direct_bytes += direct ? got : 0;
        if (got != ex->len) {
            char why[768];
            io_read_describe(why, sizeof why, sh->path, ex->len, ex->file_offset, got, error);
            const int moe_layer = key / ec->n_experts, expert = key % ec->n_experts;
            snprintf(detail, size, "routed expert %d of layer %d could not be read (%s%s); the run is invalid",
                     expert, ec->layer_of[moe_layer], why, inject ? ", an injected fault" : "");
            return -1;
        }
    }
    return 0;
}

/* Gives slot s to expert key, evicting what it held; the caller holds the lock. */
static void take_slot(expert_cache *ec, int s, int key) {
    ec_slot *sl = &ec->slots[s];
    if (sl->key >= 0) {
        ec->slot_of[sl->key] = -1;
        ec->counters.evictions++;
    }
    sl->key = key;
    sl->state = SLOT_LOADING;
    sl->pins = 1;
    sl->wanted_job = 0;
    sl->early = 0;
    sl->early_claimed = 0;
    ec->slot_of[key] = s;
}

/* Reads expert key into slot s with the lock released around the read, and counts it.
 * Returns 1 when it failed (detail filled). The caller holds the lock. */
static int fill_slot(expert_cache *ec, int s, int key, void *bounce, char *detail, size_t size, double *seconds,
                     uint64_t *got) {
    const int inject = ec->fault_read > 0 && (long)++ec->reads_started == ec->fault_read;
    int refused = !ec->direct;
    pthread_mutex_unlock(&ec->lock);
    uint64_t bytes, direct_bytes;
    const double t0 = io_now();
    const int bad =
        read_expert(ec, key, ec->slots[s].data, inject, bounce, detail, size, &bytes, &direct_bytes, &refused);
    const double t1 = io_now();
    pthread_mutex_lock(&ec->lock);
    if (refused)
        ec->direct = 0;
    ec->counters.reads++;
    ec->counters.bytes_read += bytes;
    ec->counters.direct_bytes += direct_bytes;
    ec->counters.read_seconds += t1 - t0;
    *seconds = t1 - t0;
    *got = bytes;
    return bad;
}

static int job_work(const expert_cache *ec) {
    return ec->job_active && !ec->job_failed && ec->job_next < ec->job_n;
}

/* Ends a job's read of slot s (bad: it failed, with detail); the caller holds the lock. */
static void job_read_done(expert_cache *ec, ec_slot *sl, uint64_t job, int bad, const char *detail) {
    sl->loaded_job = job;
    sl->state = bad ? SLOT_FAILED : SLOT_READY;
    if (bad && !ec->job_failed) {
        ec->job_failed = 1;
        snprintf(ec->job_detail, sizeof ec->job_detail, "%s", detail);
    }
    ec->in_flight--;
    pthread_cond_broadcast(&ec->consumer_cv);
}

/* One guessed expert: read into a cold slot unless it is cached or loading already. An
 * early read that fails is forgotten, unless a job took the slot while it was in flight:
 * then it is read again at once as that job's read. */
static void read_early(expert_cache *ec, void *bounce) {
    const int key = ec->hint_layer * ec->n_experts + ec->hint_experts[ec->hint_next++];
    const int s = ec->slot_of[key] >= 0 ? -1 : pick_early_victim(ec);
    if (s < 0) {
        if (ec->slot_of[key] < 0)
            ec->hint_n = ec->hint_next = 0; /* nowhere cold: the rest would evict what is wanted */
        pthread_cond_broadcast(&ec->consumer_cv); /* expert_cache_wait_early */
        return;
    }
    ec_slot *sl = &ec->slots[s];
    take_slot(ec, s, key);
    sl->early = 1;
    ec->early_in_flight++;
    char detail[K3_ERROR_DETAIL_MAX];
    double seconds;
    uint64_t bytes;
    const int bad = fill_slot(ec, s, key, bounce, detail, sizeof detail, &seconds, &bytes);
    ec->counters.early_reads++;
    ec->counters.early_bytes += bytes;
    sl->pins--; /* the reader's own */
    sl->early_seconds = seconds;
    if (sl->early_claimed && !bad)
        ec->counters.early_used_seconds += seconds;
    sl->early_claimed = 0;
    if (bad && sl->pins > 0) {
        /* A job waits on it: its own read, counted in flight so expert_cache_end waits. */
        const uint64_t job = ec->job_id;
        ec->in_flight++;
        const int again = fill_slot(ec, s, key, bounce, detail, sizeof detail, &seconds, &bytes);
        job_read_done(ec, sl, job, again, detail);
    } else if (bad) {
        ec->slot_of[key] = -1;
        sl->key = -1;
        sl->state = SLOT_EMPTY;
        sl->early = 0;
    } else {
        sl->state = SLOT_READY;
        sl->last_use = ++ec->clock; /* fresh: the next layer's misses evict older slots first */
        sl->loaded_job = ec->job_id;
    }
    ec->early_in_flight--;
    pthread_cond_broadcast(&ec->consumer_cv);
    pthread_cond_broadcast(&ec->reader_cv);
}

static void *reader_main(void *arg) {
    expert_cache *ec = arg;
    /* Each reader its own bounce buffer; without one it reads through the page cache. */
    void *bounce = ec->direct ? io_bounce_alloc() : NULL;
    pthread_mutex_lock(&ec->lock);
    for (;;) {
        while (!ec->stop && !job_work(ec) && ec->hint_next >= ec->hint_n)
            pthread_cond_wait(&ec->reader_cv, &ec->lock);
        if (ec->stop)
            break;
        if (!job_work(ec)) {
            read_early(ec, bounce);
            continue;
        }
        const int i = ec->job_next;
        const int key = ec->job_layer * ec->n_experts + ec->job_experts[i];
        int s = ec->slot_of[key];
        if (s >= 0) {
            ec_slot *sl = &ec->slots[s];
            sl->pins++;
            ec->job_slot[i] = s;
            ec->job_next++;
            if (sl->early) {
                sl->early = 0;
                ec->counters.early_used++;
                if (sl->state == SLOT_LOADING)
                    sl->early_claimed = 1; /* its time is counted when the read ends */
                else
                    ec->counters.early_used_seconds += sl->early_seconds;
            } else if (sl->state == SLOT_READY && sl->loaded_job < ec->job_id) {
                ec->counters.retained++;
            }
            pthread_cond_broadcast(&ec->consumer_cv);
            continue;
        }
        s = pick_victim(ec);
        if (s < 0) {
            pthread_cond_wait(&ec->reader_cv, &ec->lock);
            continue;
        }
        ec_slot *sl = &ec->slots[s];
        take_slot(ec, s, key);
        ec->job_slot[i] = s;
        ec->job_next++;
        ec->in_flight++;
        const uint64_t job = ec->job_id;
        char detail[K3_ERROR_DETAIL_MAX];
        double seconds;
        uint64_t bytes;
        const int bad = fill_slot(ec, s, key, bounce, detail, sizeof detail, &seconds, &bytes);
        job_read_done(ec, sl, job, bad, detail);
    }
    pthread_mutex_unlock(&ec->lock);
    io_bounce_free(bounce);
    return NULL;
}

k3_status expert_cache_start(expert_cache *ec, int n_slots, int n_readers, int direct, long fault_read,
                             k3_error *err) {
    if (n_slots < 1 || n_readers < 1 || n_readers > EC_MAX_READERS)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "expert cache: %d slots and %d reader threads (need >= 1 and 1..%d)",
                         n_slots, n_readers, EC_MAX_READERS);
    ec->slots = calloc((size_t)n_slots, sizeof *ec->slots);
    /* Pages are touched only when a read fills them, so the resident size grows with use. */
    ec->arena_bytes = (size_t)n_slots * ec->slot_bytes;
    ec->arena = io_alloc_large(ec->arena_bytes);
    if (!ec->slots || !ec->arena)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "expert cache: out of memory for %d slots of %llu bytes (%.1f MB)",
                         n_slots, (unsigned long long)ec->slot_bytes, (double)n_slots * (double)ec->slot_bytes / 1e6);
    ec->n_slots = n_slots;
    for (int s = 0; s < n_slots; s++) {
        ec->slots[s].data = ec->arena + (size_t)s * ec->slot_bytes;
        ec->slots[s].key = -1;
    }
    ec->fault_read = fault_read;
    ec->direct = direct;
    for (int r = 0; r < n_readers; r++) {
        if (pthread_create(&ec->readers[r], NULL, reader_main, ec) != 0)
            return error_set(err, K3_ERR_INTERNAL, "expert cache: could not start reader thread %d of %d", r + 1,
                             n_readers);
        ec->n_readers = r + 1;
    }
    return K3_OK;
}

void expert_cache_free(expert_cache *ec) {
    if (!ec)
        return;
    if (ec->sync_ready) {
        pthread_mutex_lock(&ec->lock);
        ec->stop = 1;
        pthread_cond_broadcast(&ec->reader_cv);
        pthread_mutex_unlock(&ec->lock);
        for (int r = 0; r < ec->n_readers; r++)
            pthread_join(ec->readers[r], NULL);
        pthread_cond_destroy(&ec->reader_cv);
        pthread_cond_destroy(&ec->consumer_cv);
        pthread_mutex_destroy(&ec->lock);
    }
    free(ec->layer_of);
    free(ec->experts);
    free(ec->extents);
    free(ec->slots);
    io_free_large(ec->arena, ec->arena_bytes);
    free(ec->slot_of);
    free(ec->job_experts);
    free(ec->job_slot);
    free(ec->hint_experts);
    free(ec->guess_experts);
    free(ec);
}

void expert_cache_begin(expert_cache *ec, int moe_layer, const int *experts, int n) {
    pthread_mutex_lock(&ec->lock);
    ec->job_id++;
    ec->job_layer = moe_layer;
    ec->job_n = n;
    ec->job_next = 0;
    ec->job_consumed = 0;
    ec->job_failed = 0;
    ec->job_detail[0] = '\0';
    /* The job names what it needs: guesses not yet started are dropped; the last guess for
     * this layer is scored against it (both lists ascending). */
    ec->hint_n = ec->hint_next = 0;
    if (ec->guess_layer == moe_layer && ec->guess_n > 0) {
        for (int i = 0, j = 0; i < n && j < ec->guess_n;) {
            if (experts[i] == ec->guess_experts[j]) {
                ec->counters.guesses_routed++;
                i++;
                j++;
            } else if (experts[i] < ec->guess_experts[j]) {
                i++;
            } else {
                j++;
            }
        }
    }
    ec->guess_n = 0;
    for (int i = 0; i < n; i++) {
        ec->job_experts[i] = experts[i];
        ec->job_slot[i] = -1;
        const int s = ec->slot_of[moe_layer * ec->n_experts + experts[i]];
        if (s >= 0) {
            ec->slots[s].wanted_job = ec->job_id;
            ec->slots[s].wanted_index = i;
        }
    }
    ec->counters.requests += (uint64_t)n;
    ec->job_active = 1;
    pthread_cond_broadcast(&ec->reader_cv);
    pthread_mutex_unlock(&ec->lock);
}

void expert_cache_prefetch(expert_cache *ec, int moe_layer, const int *experts, int n) {
    pthread_mutex_lock(&ec->lock);
    ec->counters.guesses += (uint64_t)n;
    ec->guess_layer = moe_layer;
    ec->guess_n = n;
    memcpy(ec->guess_experts, experts, sizeof(int) * (size_t)n);
    /* No more early reads than the slots the current job does not hold. */
    const int cap = ec->n_slots - (ec->job_active ? ec->job_n : 0);
    ec->hint_layer = moe_layer;
    ec->hint_n = 0;
    ec->hint_next = 0;
    for (int i = 0; i < n && ec->hint_n < cap; i++)
        if (ec->slot_of[moe_layer * ec->n_experts + experts[i]] < 0)
            ec->hint_experts[ec->hint_n++] = experts[i];
    pthread_cond_broadcast(&ec->reader_cv);
    pthread_mutex_unlock(&ec->lock);
}

void expert_cache_wait_early(expert_cache *ec) {
    pthread_mutex_lock(&ec->lock);
    while (ec->hint_next < ec->hint_n || ec->early_in_flight > 0)
        pthread_cond_wait(&ec->consumer_cv, &ec->lock);
    pthread_mutex_unlock(&ec->lock);
}

k3_status expert_cache_get(expert_cache *ec, int i, moe_expert *out, k3_error *err) {
    pthread_mutex_lock(&ec->lock);
    const double t0 = io_now();
    int waited = 0;
    while (!ec->job_failed && (ec->job_slot[i] < 0 || ec->slots[ec->job_slot[i]].state == SLOT_LOADING)) {
        waited = 1;
        pthread_cond_wait(&ec->consumer_cv, &ec->lock);
    }
    if (waited)
        ec->counters.wait_seconds += io_now() - t0;
    if (ec->job_failed) {
        const k3_status s = error_set(err, K3_ERR_EXPERT_READ, "%s", ec->job_detail);
        pthread_mutex_unlock(&ec->lock);
        return s;
    }
    const ec_slot *sl = &ec->slots[ec->job_slot[i]];
    const ec_expert *x = &ec->experts[sl->key];
    kernels_matrix *m[3] = {&out->w1, &out->w3, &out->w2};
    for (int w = 0; w < 3; w++) {
        *m[w] = ec->shape[w];
        m[w]->data = sl->data + x->slot_offset[2 * w];
        m[w]->scale = x->t[2 * w + 1] ? sl->data + x->slot_offset[2 * w + 1] : NULL;
    }
    pthread_mutex_unlock(&ec->lock);
    return K3_OK;
}

void expert_cache_release(expert_cache *ec, int i) {
    pthread_mutex_lock(&ec->lock);
    ec_slot *sl = &ec->slots[ec->job_slot[i]];
    sl->pins--;
    sl->last_use = ++ec->clock;
    ec->job_consumed = i + 1;
    pthread_cond_broadcast(&ec->reader_cv);
    pthread_mutex_unlock(&ec->lock);
}

void expert_cache_end(expert_cache *ec) {
    pthread_mutex_lock(&ec->lock);
    ec->job_active = 0;
    while (ec->in_flight > 0)
        pthread_cond_wait(&ec->consumer_cv, &ec->lock);
    for (int i = ec->job_consumed; i < ec->job_next; i++)
        ec->slots[ec->job_slot[i]].pins--;
    for (int s = 0; ec->job_failed && s < ec->n_slots; s++) {
        ec_slot *sl = &ec->slots[s];
        if (sl->state == SLOT_FAILED) {
            ec->slot_of[sl->key] = -1;
            sl->key = -1;
            sl->state = SLOT_EMPTY;
        }
    }
    ec->job_n = 0;
    ec->job_next = 0;
    ec->job_consumed = 0;
    pthread_cond_broadcast(&ec->reader_cv);
    pthread_mutex_unlock(&ec->lock);
}

void expert_cache_get_counters(expert_cache *ec, expert_cache_counters *out) {
    pthread_mutex_lock(&ec->lock);
    *out = ec->counters;
    pthread_mutex_unlock(&ec->lock);
}
