/* numbers.h - small numeric helpers the CLI's commands share: an integer option within a
 * range, and the median of a handful of measurements (rounds, repetitions). */
#ifndef K3_TOOLS_NUMBERS_H
#define K3_TOOLS_NUMBERS_H

/* The most values numbers_median takes. */
#define NUMBERS_MEDIAN_MAX 64

/* *out = s as a decimal integer in [lo, hi], the whole string; 0, or -1 (out untouched). */
int numbers_parse_int(const char *s, int lo, int hi, int *out);

/* The median of v[0..n), 1 <= n <= NUMBERS_MEDIAN_MAX (v is left as it is): the middle
 * value, or the mean of the two middle ones. */
double numbers_median(const double *v, int n);

#endif
