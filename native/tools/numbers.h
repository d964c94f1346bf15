/* numbers.h - the median of a handful of measurements (rounds, repetitions), shared by the
 * CLI's benchmarks. Options are read by options.h. */
#ifndef K3_TOOLS_NUMBERS_H
#define K3_TOOLS_NUMBERS_H

/* The most values numbers_median takes. */
#define NUMBERS_MEDIAN_MAX 64

/* The median of v[0..n), 1 <= n <= NUMBERS_MEDIAN_MAX (v is left as it is): the middle
 * value, or the mean of the two middle ones. */
double numbers_median(const double *v, int n);

#endif
