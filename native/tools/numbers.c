/* numbers.c - see numbers.h. */
#include "numbers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double numbers_median(const double *v, int n) {
    double s[NUMBERS_MEDIAN_MAX];
    n = n < 1 ? 1 : n > NUMBERS_MEDIAN_MAX ? NUMBERS_MEDIAN_MAX : n;
    memcpy(s, v, sizeof *v * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, by_value);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
