/* error.c - filling k3_error details (see error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

k3_status error_set(k3_error *err, k3_status status, const char *fmt, ...) {
    if (!err)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    err->status = status;
    return status;
}

k3_status error_wrap(k3_error *err, const char *fmt, ...) {
    if (!err)
        return K3_ERR_INTERNAL;
    char old[K3_ERROR_DETAIL_MAX];
    memcpy(old, err->detail, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->detail) {
        size_t used = (size_t)n;
        size_t room = sizeof err->detail - used;
        size_t len = strlen(old);
        if (room > 2) {
            memcpy(err->detail + used, ": ", 2);
            used += 2;
            room -= 2;
            if (len >= room)
                len = room - 1;
            memcpy(err->detail + used, old, len);
            err->detail[used + len] = '\0';
        }
    }
    return err->status;
}

void error_clear(k3_error *err) {
    if (err) {
        err->status = K3_OK;
        err->detail[0] = '\0';
    }
}

void error_copy_detail(const k3_error *err, char *detail, size_t size) {
    if (detail && size > 0)
        snprintf(detail, size, "%s", err->detail);
}
