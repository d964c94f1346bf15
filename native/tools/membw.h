/* membw.h - this machine's memory bandwidth, measured the way STREAM measures it: a triad
 * a = b + s*c over three arrays far larger than any cache, split across threads, counting
 * three arrays per pass (two read, one written). The benchmarks (`k3 bench`, `k3
 * bench-scale`) pair each stretch of decoding with a triad measured just before it,
 * because this machine's bandwidth drifts by a third within seconds. */
#ifndef K3_MEMBW_H
#define K3_MEMBW_H

#include <stddef.h>

typedef struct membw {
    float *a, *b, *c; /* (n) each */
    size_t n;
} membw;

/* Allocates and fills three arrays of 128 MB. Returns 0, or -1 when memory is short. */
int membw_open(membw *t);
void membw_close(membw *t);

/* Bytes per second, best of 3 passes split across `threads` threads (1..64). */
double membw_triad(const membw *t, int threads);

#endif
