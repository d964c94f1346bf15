/* threads.c - the worker pool behind threads_run(): workers take chunks from a shared
 * atomic counter during a loop.
 *
 * A decode step runs a few hundred loops back to back, each tens of microseconds long, so
 * the pool is built so that no loop ever waits for a worker to wake up:
 *  - Between loops a worker spins on the loop word for SPIN_SECONDS before it sleeps on a
 *    condition variable; a decode step's loops are closer together than that, so a worker
 *    stays awake for a whole step and sleeps only when the engine is idle.
 *  - A spinning thread yields its core after the first YIELD_SECONDS of a wait. With more
 *    runnable threads than cores (a 2-core VM shared with builds: load average 6) a pure
 *    spin held the core that the thread it waited for was queued on: 2-thread prefill of
 *    512 tokens on small took 1.24x the wall-clock time of 1 thread. Yielding: 0.79x the
 *    wall-clock time of the spinning pool (8 alternating pairs, 0.71-0.91) and 0.77x its
 *    CPU time; 2-thread decode 0.77x (0.65-1.01). Where nothing else is runnable a yield
 *    returns at once, so the wait stays a spin.
 *  - A worker takes part in a loop only by joining it while it is open. The calling
 *    thread closes the loop as soon as it finds no chunk left and then waits only for the
 *    workers that joined, which are running: a worker still asleep never holds it up, and
 *    on waking finds the loop closed and skips it.
 * Which thread runs a chunk never changes what the chunk computes (threads.h).
 *
 * A chunk that faults reading a shard that shrank (fault.h) is caught by whoever runs it;
 * nobody takes another chunk, and the loop ends as usual: only once no worker is inside
 * does the caller pass the fault outward (fault_escape), so no worker is ever left running
 * a chunk whose arguments live in a frame the jump unwound, and every worker is back
 * waiting for the next loop. */
#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "fault.h"
#include "io.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* The loop word: generation in the high 32 bits, OPEN while chunks may still be joined,
 * and the number of workers inside the loop in the low bits. */
#define LOOP_OPEN ((uint64_t)1 << 31)
#define LOOP_INSIDE ((uint64_t)LOOP_OPEN - 1)
#define LOOP_GEN(w) ((w) >> 32)

/* How long an idle worker spins before sleeping: longer than the longest gap between two
 * loops of a decode step (KDA's recurrence of one layer, tens of microseconds). */
#define SPIN_SECONDS 500e-6
/* How long a wait spins before it starts yielding (0 measured the same as 20 us under
 * load; 20 us keeps the first, likeliest part of a wait a pure spin). */
#define YIELD_SECONDS 20e-6

typedef struct {
    atomic_int next;
    char pad[64 - sizeof(atomic_int)];
} block_counter;

/* A worker's own index among the loop's participants (the caller is 0). */
typedef struct {
    struct threads *pool;
    int index;
} worker_arg;

struct threads {
    int n_threads;
    pthread_t *workers; /* (n_threads - 1) */
    worker_arg *worker_args; /* (n_threads - 1) */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    _Atomic uint64_t loop;
    atomic_int sleepers;  /* workers blocked on `wake` (changed under mu) */
    atomic_int waiting;   /* 1 while the caller sleeps on `done` (changed under mu) */
    atomic_int quit;
    /* The current loop, written before its generation is published. */
    threads_fn fn;
    void *arg;
    int n_items, grain;
    /* (n_threads) the next chunk of each participant's block, relative to its start; each
     * on its own line (two threads taking chunks would otherwise pass the line back and
     * forth). */
    block_counter *next;
    _Atomic uintptr_t fault_addr; /* the first fault met in the current loop, or 0 */
};

/* Past any chunk index: set when a chunk faults, so nobody takes another. */
#define NO_MORE_CHUNKS (1 << 30)

/* The chunks are cut into one contiguous block per participant, and participant i takes
 * its own block's chunks first, then helps with the blocks after it (i + 1, ...,
 * wrapping round). So when every participant joins, a given participant computes the
 * same items in every loop of the same shape, and a product's rows and the heads that
 * read them (KDA's per-head columns of q, k and v) land on the same core: on the 2-vCPU
 * VMs a line written by the other core costs a 0.5 us round trip. A participant that is
 * late or never joins changes only who computes its block, never what (threads.h). */
static int block_start(int n_chunks, int n_blocks, int b) {
    return (int)((long)n_chunks * b / n_blocks);
}

static void run_chunks(threads *p, int self) {
    const int n_chunks = (p->n_items + p->grain - 1) / p->grain, T = p->n_threads;
    for (int k = 0; k < T; k++) {
        const int b = (self + k) % T;
        const int first = block_start(n_chunks, T, b), count = block_start(n_chunks, T, b + 1) - first;
        for (;;) {
            const int c = atomic_fetch_add(&p->next[b].next, 1);
            if (c >= count)
                break;
            const int begin = (first + c) * p->grain;
            const int end = begin + p->grain < p->n_items ? begin + p->grain : p->n_items;
            p->fn(p->arg, begin, end);
        }
    }
}

/* Set while this thread runs chunks of a pool's loop (threads_in_shared_loop). */
static _Thread_local int in_shared_loop;

int threads_in_shared_loop(void) {
    return in_shared_loop;
}

/* run_chunks, catching a fault on the shards: it is recorded (the first one) and ends the
 * loop's work for everyone. */
static void run_chunks_caught(threads *p, int self) {
    fault_point pt;
    in_shared_loop = 1;
    if (FAULT_CATCH(&pt)) {
        in_shared_loop = 0;
        uintptr_t none = 0;
        atomic_compare_exchange_strong(&p->fault_addr, &none, (uintptr_t)pt.addr);
        for (int b = 0; b < p->n_threads; b++)
            atomic_store(&p->next[b].next, NO_MORE_CHUNKS);
        return;
    }
    run_chunks(p, self);
    fault_disarm(&pt);
    in_shared_loop = 0;
}

/* After a loop no worker is inside: a fault met in it goes on to the caller's point. */
static void end_loop(threads *p) {
    const uintptr_t addr = atomic_exchange(&p->fault_addr, 0);
    if (addr)
        fault_escape((const void *)addr);
}

/* What a spinning thread waits for: a new loop (or quit), or an empty closed loop. */
static int loop_changed(threads *p, uint64_t seen) {
    return LOOP_GEN(atomic_load(&p->loop)) != seen || atomic_load(&p->quit);
}

static int nobody_inside(threads *p, uint64_t unused) {
    (void)unused;
    return !(atomic_load(&p->loop) & LOOP_INSIDE);
}

/* Spins until done(p, arg), for at most SPIN_SECONDS; 1 if it came. Past YIELD_SECONDS
 * each round of polls also offers the core to any other runnable thread: on a machine with
 * more runnable threads than cores, the thread this one waits for may be queued behind it. */
static int spin_until(threads *p, int (*done)(threads *, uint64_t), uint64_t arg) {
    const double start = io_now(), until = start + SPIN_SECONDS, yield_from = start + YIELD_SECONDS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (done(p, arg))
                return 1;
            CPU_RELAX();
        }
        const double now = io_now();
        if (now > until)
            return 0;
        if (now > yield_from)
            sched_yield();
    }
}

/* Joins the loop of generation `gen` if it is still open; 1 if joined. */
static int join_loop(threads *p, uint64_t gen) {
    uint64_t w = atomic_load(&p->loop);
    while (LOOP_GEN(w) == gen && (w & LOOP_OPEN))
        if (atomic_compare_exchange_weak(&p->loop, &w, w + 1))
            return 1;
    return 0;
}

static void *worker_main(void *arg) {
    const worker_arg *wa = arg;
    threads *p = wa->pool;
    const int self = wa->index;
    /* The generation when the pool was made, not when this thread happened to start: a
     * worker that starts after a loop was published still joins it while it is open. */
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(p, loop_changed, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!atomic_load(&p->quit) && LOOP_GEN(atomic_load(&p->loop)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            break;
        seen = LOOP_GEN(atomic_load(&p->loop));
        if (!join_loop(p, seen))
            continue; /* closed already: every chunk was taken without us */
        run_chunks_caught(p, self);
        const uint64_t before = atomic_fetch_sub(&p->loop, 1);
        if ((before & LOOP_INSIDE) == 1 && !(before & LOOP_OPEN) && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

k3_status threads_new(int n_threads, threads **out, k3_error *err) {
    if (n_threads < 1)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "thread count %d: must be at least 1", n_threads);
    threads *p = calloc(1, sizeof *p);
    if (!p)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->next = aligned_alloc(64, sizeof(block_counter) * (size_t)n_threads);
    if (!p->next) {
        threads_free(p); /* no worker yet: frees the pool and its mutex and conditions */
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    }
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        p->worker_args = calloc((size_t)n_threads - 1, sizeof *p->worker_args);
        if (!p->workers || !p->worker_args) {
            threads_free(p);
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->worker_args[i] = (worker_arg){p, i + 1};
            if (pthread_create(&p->workers[i], NULL, worker_main, &p->worker_args[i]) != 0) {
                p->n_threads = i + 1; /* only the started ones are joined */
                threads_free(p);
                return error_set(err, K3_ERR_INTERNAL, "thread pool: could not start thread %d of %d", i + 2, n_threads);
            }
        }
    }
    *out = p;
    return K3_OK;
}

void threads_free(threads *p) {
    if (!p)
        return;
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->quit, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads - 1; i++)
            pthread_join(p->workers[i], NULL);
        free(p->workers);
    }
    free(p->worker_args);
    free(p->next);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int threads_count(const threads *p) {
    return p ? p->n_threads : 1;
}

void threads_run(threads *p, int n_items, int grain, threads_fn fn, void *arg) {
    if (n_items <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->n_threads == 1 || n_items <= grain) {
        fn(arg, 0, n_items);
        return;
    }
    /* No worker is inside a loop here (the last one waited for them), so these plain
     * writes race with nothing; the store of the new generation publishes them. */
    p->fn = fn;
    p->arg = arg;
    p->n_items = n_items;
    p->grain = grain;
    for (int b = 0; b < p->n_threads; b++)
        atomic_store(&p->next[b].next, 0);
    const uint64_t gen = LOOP_GEN(atomic_load(&p->loop)) + 1;
    atomic_store(&p->loop, (gen << 32) | LOOP_OPEN);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_chunks_caught(p, 0);
    const uint64_t closed = atomic_fetch_and(&p->loop, ~LOOP_OPEN) & ~LOOP_OPEN;
    /* The workers inside are running a chunk, not asleep: usually a short wait. */
    if ((closed & LOOP_INSIDE) && !spin_until(p, nobody_inside, 0)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->waiting, 1);
        while (atomic_load(&p->loop) & LOOP_INSIDE)
            pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->waiting, 0);
        pthread_mutex_unlock(&p->mu);
    }
    end_loop(p);
}
