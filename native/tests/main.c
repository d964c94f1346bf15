/* main.c - runs the registered C tests and prints "N passed, N failed" last. A test
 * fails when it calls harness_fail(); the exit status is non-zero if any failed. */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define HARNESS_MAX 1024

typedef struct {
    const char *name;
    harness_fn fn;
} harness_test;

static harness_test tests[HARNESS_MAX];
static int n_tests;
static int current_failed;

void harness_register(const char *name, harness_fn fn) {
    if (n_tests == HARNESS_MAX) {
        fprintf(stderr, "harness: more than %d tests\n", HARNESS_MAX);
        abort();
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void harness_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    current_failed = 1;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const harness_test *)a)->name, ((const harness_test *)b)->name);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    qsort(tests, (size_t)n_tests, sizeof tests[0], by_name);
    for (int i = 0; i < n_tests; i++) {
        if (filter && !strstr(tests[i].name, filter))
            continue;
        current_failed = 0;
        tests[i].fn();
        printf("%s %s\n", current_failed ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        if (current_failed)
            failed++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
