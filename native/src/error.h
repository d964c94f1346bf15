/* error.h - how engine modules report failure: a status plus a detail sentence naming
 * the file, tensor, field and numbers. Every module that can fail takes a k3_error *
 * and fills it through error_set(); nothing prints or exits. */
#ifndef K3_ERROR_H
#define K3_ERROR_H

#include "k3.h"

#define K3_ERROR_DETAIL_MAX 1024

typedef struct k3_error {
    k3_status status;
    char detail[K3_ERROR_DETAIL_MAX];
} k3_error;

/* Records status and a printf-formatted detail in err (which may be NULL) and returns
 * status, so a failure path reads `return error_set(err, K3_ERR_IO, "...", ...);`. */
k3_status error_set(k3_error *err, k3_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "context: " to an existing detail, for callers that add where it happened. */
k3_status error_wrap(k3_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void error_clear(k3_error *err);

/* Copies err's detail into a caller's buffer (k3.h's `char *detail, size_t detail_size`);
 * either may be NULL/0. */
void error_copy_detail(const k3_error *err, char *detail, size_t size);

#endif
