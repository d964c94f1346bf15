/* fault.c - the SIGBUS handler and the recovery points of fault.h.
 *
 * The handler runs on the faulting thread (a SIGBUS from a read is synchronous). It reads
 * only the range table (atomics) and the thread's current point, then either jumps or
 * hands the signal on; it takes no lock and calls nothing that allocates. The range is
 * checked before the thread-local point is read, so a thread the engine never armed reads
 * its point only when the fault is on the engine's mappings. */
#include "fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local fault_point *current;

/* Registered mappings: begin 0 marks a free slot. end is written before begin, so the
 * handler never sees a begin with a stale end. */
static _Atomic uintptr_t range_begin[FAULT_MAX_RANGES], range_end[FAULT_MAX_RANGES];
static pthread_mutex_t range_mu = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static struct sigaction previous; /* the disposition before ours, for faults not ours */

static int on_mappings(uintptr_t a) {
    for (int i = 0; i < FAULT_MAX_RANGES; i++) {
        const uintptr_t b = atomic_load_explicit(&range_begin[i], memory_order_acquire);
        if (b && a >= b && a < atomic_load_explicit(&range_end[i], memory_order_relaxed))
            return 1;
    }
    return 0;
}

/* Not ours: the previous handler decides, or the default action ends the process. */
static void pass_on(int sig, siginfo_t *info, void *uctx) {
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, info, uctx);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* Returning re-runs the faulting read, which now meets the default action; a SIGBUS
     * sent by kill() (si_code <= 0) has no read to re-run, so it is raised again. */
    signal(sig, SIG_DFL);
    if (info->si_code <= 0)
        raise(sig);
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    if (info->si_code > 0 && on_mappings((uintptr_t)info->si_addr)) {
        fault_point *pt = current;
        if (pt) {
            current = pt->outer;
            pt->addr = info->si_addr;
            siglongjmp(pt->jump, 1);
        }
    }
    pass_on(sig, info, uctx);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

void fault_arm(fault_point *pt) {
    pt->addr = NULL;
    pt->outer = current;
    current = pt;
}

void fault_disarm(fault_point *pt) {
    current = pt->outer;
}

_Noreturn void fault_escape(const void *addr) {
    fault_point *pt = current;
    if (pt) {
        current = pt->outer;
        pt->addr = addr;
        siglongjmp(pt->jump, 1);
    }
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
    abort(); /* not reached: SIGBUS's default action has ended the process */
}

int fault_register(const void *base, size_t len) {
    pthread_once(&install_once, install);
    pthread_mutex_lock(&range_mu);
    int slot = -1;
    for (int i = 0; i < FAULT_MAX_RANGES && slot < 0; i++)
        if (!atomic_load(&range_begin[i]))
            slot = i;
    if (slot >= 0) {
        atomic_store_explicit(&range_end[slot], (uintptr_t)base + len, memory_order_relaxed);
        atomic_store_explicit(&range_begin[slot], (uintptr_t)base, memory_order_release);
    }
    pthread_mutex_unlock(&range_mu);
    return slot >= 0 ? 0 : -1;
}

void fault_unregister(const void *base) {
    pthread_mutex_lock(&range_mu);
    for (int i = 0; i < FAULT_MAX_RANGES; i++)
        if (atomic_load(&range_begin[i]) == (uintptr_t)base) {
            atomic_store(&range_begin[i], 0);
            atomic_store(&range_end[i], 0);
            break;
        }
    pthread_mutex_unlock(&range_mu);
}
