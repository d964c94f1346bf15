/* membw.c - the STREAM-like triad (see membw.h). */
#include "membw.h"

#include <pthread.h>
#include <stdlib.h>

#include "clock.h"

typedef struct {
    float *a;
    const float *b, *c;
    size_t begin, end;
} triad_part;

static void *triad_run(void *arg) {
    triad_part *p = arg;
    for (size_t i = p->begin; i < p->end; i++)
        p->a[i] = p->b[i] + 3.0f * p->c[i];
    return NULL;
}

int membw_open(membw *t) {
    t->n = (size_t)32 << 20; /* 32M floats = 128 MB per array */
    t->a = malloc(t->n * sizeof *t->a);
    t->b = malloc(t->n * sizeof *t->b);
    t->c = malloc(t->n * sizeof *t->c);
    if (!t->a || !t->b || !t->c)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        t->a[i] = 0.0f;
        t->b[i] = (float)(i & 1023);
        t->c[i] = 1.0f;
    }
    return 0;
}

void membw_close(membw *t) {
    free(t->a);
    free(t->b);
    free(t->c);
    t->a = t->b = t->c = NULL;
}

double membw_triad(const membw *tr, int threads) {
    pthread_t tid[64];
    triad_part part[64];
    if (threads > 64)
        threads = 64;
    if (threads < 1)
        threads = 1;
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = clock_now_s();
        for (int t = 0; t < threads; t++) {
            part[t] = (triad_part){tr->a, tr->b, tr->c, tr->n * t / threads, tr->n * (t + 1) / threads};
            pthread_create(&tid[t], NULL, triad_run, &part[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        const double bw = 3.0 * tr->n * sizeof(float) / (clock_now_s() - t0);
        if (bw > best)
            best = bw;
    }
    return best;
}
