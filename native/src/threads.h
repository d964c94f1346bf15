/* threads.h - a fixed pool of worker threads that runs one parallel loop at a time.
 * The engine splits work only between independent outputs (rows of a product, whole
 * routed experts of one token), never inside one output's sum, so what an output
 * computes never depends on how many threads there are or which one ran it: 1 thread ==
 * N threads, bit for bit. Workers spin briefly between loops (threads.c): a decode step
 * keeps them awake, an idle engine lets them sleep.
 * Not for nested parallelism: a task must not call threads_run on the same pool. */
#ifndef K3_THREADS_H
#define K3_THREADS_H

#include "error.h"

typedef struct threads threads;

/* fn(arg, begin, end) computes items [begin, end). */
typedef void (*threads_fn)(void *arg, int begin, int end);

/* n_threads >= 1 (the calling thread counts as one). */
k3_status threads_new(int n_threads, threads **out, k3_error *err);
void threads_free(threads *pool);
int threads_count(const threads *pool);

/* Runs fn over [0, n_items) split into contiguous chunks of `grain` items (the last may be
 * shorter); each thread takes the chunks of its own contiguous block of them first, then
 * helps with the others' (threads.c); returns when all are done. pool may be NULL
 * (runs inline). A chunk that faults on the mapped shards (fault.h) stops the loop; once
 * every worker has left it, the fault goes to the calling thread's recovery point. */
void threads_run(threads *pool, int n_items, int grain, threads_fn fn, void *arg);

/* 1 while the calling thread runs a chunk of a loop that more than one thread takes part
 * in, else 0: what it writes there is likely read next by another core (kernels_avx512.c
 * writes such outputs a row at a time). */
int threads_in_shared_loop(void);

#endif
