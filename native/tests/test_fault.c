/* test_fault.c - a read of a registered mapping past the end of a file that shrank after it
 * was mapped (a real SIGBUS, not a simulated one) comes back to the recovery point with the
 * address: on the calling thread, inline and inside a pool loop, and on a pool worker, whose
 * fault reaches the loop's caller only after the loop ends, leaving the pool usable; a
 * SIGBUS on a mapping that is not registered still ends the process. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "threads.h"
#include "test_files.h"

enum { FT_PAGES = 16, FT_KEEP = 2 };

typedef struct {
    char dir[64], path[128];
    int fd;
    const volatile uint8_t *map;
    size_t page, size;
} shrunk_file;

/* Writes FT_PAGES pages, maps them, then cuts the file to FT_KEEP pages: pages from
 * FT_KEEP on fault when read. register_it: announce the mapping to fault.c. */
static int shrunk_open(shrunk_file *f, int register_it) {
    f->page = (size_t)sysconf(_SC_PAGESIZE);
    f->size = f->page * FT_PAGES;
    if (!tf_mkdtemp(f->dir))
        return -1;
    tf_path(f->path, sizeof f->path, f->dir, "shard.bin");
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f->fd < 0 || ftruncate(f->fd, (off_t)f->size) != 0)
        return -1;
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (map == MAP_FAILED)
        return -1;
    f->map = map;
    if (register_it && fault_register(map, f->size) != 0)
        return -1;
    (void)f->map[0]; /* resident before the cut, as weights already read would be */
    return ftruncate(f->fd, (off_t)(f->page * FT_KEEP));
}

static void shrunk_close(shrunk_file *f, int registered) {
    if (registered)
        fault_unregister((const void *)f->map);
    munmap((void *)(uintptr_t)f->map, f->size);
    close(f->fd);
    unlink(f->path);
    rmdir(f->dir);
}

/* Which thread reads what: READ_ALL reads page i for item i (each thread its chunks);
 * CUT_ON_CALLER and CUT_ON_WORKER read only cut pages, on the caller alone or on workers
 * alone (the caller then holds the loop open until a worker has joined). */
typedef enum { READ_ALL, CUT_ON_CALLER, CUT_ON_WORKER } page_mode;

typedef struct {
    const volatile uint8_t *map;
    size_t page;
    pthread_t caller;
    page_mode mode;
    atomic_int worker_in, sum;
} page_job;

static void read_pages(void *arg, int begin, int end) {
    page_job *j = arg;
    const int on_caller = pthread_equal(pthread_self(), j->caller);
    if (j->mode == CUT_ON_WORKER && on_caller) {
        while (!atomic_load(&j->worker_in))
            ;
        return;
    }
    if (j->mode == CUT_ON_CALLER && !on_caller)
        return;
    if (!on_caller)
        atomic_store(&j->worker_in, 1);
    for (int i = begin; i < end; i++) {
        const int page = j->mode == READ_ALL ? i : FT_KEEP + i % (FT_PAGES - FT_KEEP);
        atomic_fetch_add(&j->sum, j->map[(size_t)page * j->page]);
    }
}

TEST(fault_caught_on_the_calling_thread_names_the_address) {
    shrunk_file f;
    CHECK(shrunk_open(&f, 1) == 0);
    page_job job = {f.map, f.page, pthread_self(), READ_ALL, 0, 0};
    fault_point pt;
    volatile int caught = 0;
    if (FAULT_CATCH(&pt)) {
        caught = 1;
    } else {
        threads_run(NULL, FT_PAGES, 1, read_pages, &job);
        fault_disarm(&pt);
    }
    CHECK(caught);
    CHECK((const uint8_t *)pt.addr == (const uint8_t *)f.map + f.page * FT_KEEP);
    shrunk_close(&f, 1);
}

TEST(fault_in_a_pool_loop_reaches_the_caller_after_the_loop_and_the_pool_still_works) {
    shrunk_file f;
    CHECK(shrunk_open(&f, 1) == 0);
    threads *pool;
    k3_error err;
    CHECK_OK(threads_new(3, &pool, &err), err);
    for (int worker = 0; worker < 2; worker++) { /* the caller faults, then a worker does */
        page_job job = {f.map, f.page, pthread_self(), worker ? CUT_ON_WORKER : CUT_ON_CALLER, 0, 0};
        fault_point pt;
        volatile int caught = 0;
        if (FAULT_CATCH(&pt)) {
            caught = 1;
        } else {
            threads_run(pool, FT_PAGES, 1, read_pages, &job);
            fault_disarm(&pt);
        }
        CHECK(caught);
        const uint8_t *a = (const uint8_t *)pt.addr, *cut = (const uint8_t *)f.map + f.page * FT_KEEP;
        CHECK(a >= cut && a < (const uint8_t *)f.map + f.size);
        /* The next loop over the kept pages runs to the end on every thread. */
        page_job fine = {f.map, f.page, pthread_self(), READ_ALL, 0, 0};
        threads_run(pool, FT_KEEP, 1, read_pages, &fine);
        CHECK_INT(atomic_load(&fine.sum), 0);
    }
    threads_free(pool);
    shrunk_close(&f, 1);
}

TEST(fault_on_a_mapping_not_registered_still_ends_the_process) {
    shrunk_file ours, other; /* ours makes sure the handler is installed */
    CHECK(shrunk_open(&ours, 1) == 0);
    CHECK(shrunk_open(&other, 0) == 0);
    fflush(NULL);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        const int null_fd = open("/dev/null", O_WRONLY); /* a sanitizer's report is expected here */
        if (null_fd >= 0)
            dup2(null_fd, 2);
        fault_point pt;
        if (FAULT_CATCH(&pt))
            _exit(3); /* caught: wrong */
        (void)other.map[other.page * FT_KEEP];
        _exit(4); /* read past the end without a fault: wrong */
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's own handler was there first: it reports the fault and exits 1. */
    CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1));
#else
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
#endif
    shrunk_close(&other, 0);
    shrunk_close(&ours, 1);
}
