/* clock.h - the monotonic clock the CLI's benchmarks time with, in seconds. */
#ifndef K3_TOOLS_CLOCK_H
#define K3_TOOLS_CLOCK_H

#include <time.h>

static inline double clock_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
