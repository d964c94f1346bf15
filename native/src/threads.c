/* threads.c - the worker pool behind threads_run(): workers take chunks from a shared
 * atomic counter during a loop. Between loops they spin on the loop generation for a
 * short while before sleeping on a condition variable, because a decode step runs
 * hundreds of short loops back to back and a sleep/wake per loop would cost more than the
 * loop itself. */
#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct threads {
    int n_threads;
    pthread_t *workers; /* (n_threads - 1) */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_ulong generation; /* bumped per loop; workers wait for a change */
    atomic_int active;       /* workers still inside the current loop */
    int sleepers;            /* workers blocked on `wake` (under mu) */
    atomic_int quit;
    /* The current loop. */
    threads_fn fn;
    void *arg;
    int n_items, grain;
    atomic_int next_chunk;
};

static void run_chunks(threads *p) {
    const int n_chunks = (p->n_items + p->grain - 1) / p->grain;
    for (;;) {
        const int c = atomic_fetch_add(&p->next_chunk, 1);
        if (c >= n_chunks)
            return;
        const int begin = c * p->grain;
        const int end = begin + p->grain < p->n_items ? begin + p->grain : p->n_items;
        p->fn(p->arg, begin, end);
    }
}

/* Spin iterations before a worker sleeps (roughly tens of microseconds). */
#define SPIN_LIMIT 20000

static void *worker_main(void *arg) {
    threads *p = arg;
    unsigned long seen = 0;
    for (;;) {
        for (int i = 0; i < SPIN_LIMIT && atomic_load(&p->generation) == seen && !atomic_load(&p->quit); i++)
            ;
        if (atomic_load(&p->generation) == seen) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (!atomic_load(&p->quit) && atomic_load(&p->generation) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            break;
        seen = atomic_load(&p->generation);
        run_chunks(p);
        if (atomic_fetch_sub(&p->active, 1) == 1) {
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
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            threads_free(p);
            return error_set(err, K3_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
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
    p->fn = fn;
    p->arg = arg;
    p->n_items = n_items;
    p->grain = grain;
    atomic_store(&p->next_chunk, 0);
    atomic_store(&p->active, p->n_threads - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->generation, 1); /* publishes the loop above to spinning workers */
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    for (int i = 0; i < SPIN_LIMIT && atomic_load(&p->active) > 0; i++)
        ;
    if (atomic_load(&p->active) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->active) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
