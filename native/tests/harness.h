/* harness.h - the C test harness: tests register themselves with TEST(name) and report
 * failures with CHECK*(); tests/main.c runs them all (or those whose name contains
 * argv[1]) and ends with the line "N passed, N failed". */
#ifndef K3_TEST_HARNESS_H
#define K3_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

typedef void (*harness_fn)(void);
void harness_register(const char *name, harness_fn fn);
void harness_fail(const char *file, int line, const char *fmt, ...);

/* Registration at load time keeps the list of tests in the test files themselves. */
#define TEST(name)                                                                         \
    static void name(void);                                                                \
    __attribute__((constructor)) static void harness_reg_##name(void) {                    \
        harness_register(#name, name);                                                     \
    }                                                                                      \
    static void name(void)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            harness_fail(__FILE__, __LINE__, "%s", #cond);                                 \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define CHECK_INT(got, want)                                                               \
    do {                                                                                   \
        long long g_ = (long long)(got), w_ = (long long)(want);                           \
        if (g_ != w_) {                                                                    \
            harness_fail(__FILE__, __LINE__, "%s = %lld, want %lld", #got, g_, w_);        \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define CHECK_NEAR(got, want, tol)                                                         \
    do {                                                                                   \
        double g_ = (double)(got), w_ = (double)(want);                                    \
        if (!(fabs(g_ - w_) <= (tol))) {                                                   \
            harness_fail(__FILE__, __LINE__, "%s = %.9g, want %.9g (tol %g)", #got, g_,    \
                         w_, (double)(tol));                                               \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#endif
