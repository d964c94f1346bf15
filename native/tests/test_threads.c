/* test_threads.c - the pool's loop protocol: every item of every loop runs exactly once,
 * whether workers are spinning, join late, or sleep between loops and are woken. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "threads.h"

typedef struct {
    atomic_int *hits;
} count_job;

static void count_items(void *arg, int begin, int end) {
    const count_job *j = arg;
    for (int i = begin; i < end; i++)
        atomic_fetch_add(&j->hits[i], 1);
}

static int each_once(threads *pool, int n, int grain) {
    static atomic_int hits[4096];
    for (int i = 0; i < n; i++)
        atomic_store(&hits[i], 0);
    count_job job = {hits};
    threads_run(pool, n, grain, count_items, &job);
    for (int i = 0; i < n; i++)
        if (atomic_load(&hits[i]) != 1)
            return 0;
    return 1;
}

TEST(threads_run_covers_every_item_once_across_many_back_to_back_loops) {
    for (int n_threads = 2; n_threads <= 3; n_threads++) {
        threads *pool = NULL;
        CHECK(threads_new(n_threads, &pool, NULL) == K3_OK);
        /* Tens of thousands of loops of 1..4096 items, from one chunk to one item a chunk:
         * most close before a worker joins, some while one is inside. */
        unsigned seed = 7;
        int ok = 1;
        for (int loop = 0; loop < 20000 && ok; loop++) {
            seed = seed * 1103515245u + 12345u;
            const int n = 1 + (int)((seed >> 8) % 4096u), grain = 1 + (int)((seed >> 20) % 64u);
            ok = each_once(pool, n, grain);
        }
        CHECK(ok);
        threads_free(pool);
    }
}

TEST(threads_run_wakes_sleeping_workers_and_never_waits_for_them) {
    threads *pool = NULL;
    CHECK(threads_new(2, &pool, NULL) == K3_OK);
    for (int loop = 0; loop < 20; loop++) {
        /* Past the worker's spin window, so it is asleep when the loop starts. */
        const struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
        CHECK(each_once(pool, 4096, 16));
    }
    threads_free(pool);
}

typedef struct {
    atomic_int inside, outside;
} shared_job;

static void note_shared(void *arg, int begin, int end) {
    shared_job *j = arg;
    for (int i = begin; i < end; i++)
        atomic_fetch_add(threads_in_shared_loop() ? &j->inside : &j->outside, 1);
}

/* Chunks of a loop of a pool of two report that they share it, on the caller and the
 * worker alike; a loop run inline (one thread, or one chunk) and the code around a loop
 * report that they do not. */
TEST(threads_in_shared_loop_is_set_only_inside_a_shared_loop) {
    threads *one = NULL, *two = NULL;
    CHECK(threads_new(1, &one, NULL) == K3_OK);
    CHECK(threads_new(2, &two, NULL) == K3_OK);
    shared_job job = {0, 0};
    threads_run(two, 64, 1, note_shared, &job);
    CHECK(atomic_load(&job.inside) == 64 && atomic_load(&job.outside) == 0);
    CHECK(!threads_in_shared_loop());
    shared_job alone = {0, 0};
    threads_run(one, 64, 1, note_shared, &alone);
    threads_run(two, 8, 8, note_shared, &alone);
    threads_run(NULL, 8, 1, note_shared, &alone);
    CHECK(atomic_load(&alone.inside) == 0 && atomic_load(&alone.outside) == 80);
    threads_free(one);
    threads_free(two);
}
