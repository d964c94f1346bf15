/* test_files.h - what the loader tests (json, safetensors, config) share: a scratch
 * directory per test made with mkdtemp, writing fixture files into it, removing it, and
 * CHECK_ERROR, which asserts a failure's status and a substring of its detail. Fixtures
 * are written by the tests themselves; nothing is read from the repository. */
#ifndef K3_TEST_FILES_H
#define K3_TEST_FILES_H

#include "error.h"
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Asserts that `st` is `want` and that the detail contains `substr`. */
#define CHECK_ERROR(st, err, want, substr)                                                 \
    do {                                                                                   \
        k3_status s_ = (st);                                                               \
        if (s_ != (want) || !strstr((err).detail, (substr))) {                             \
            harness_fail(__FILE__, __LINE__, "status %s, detail \"%s\"; want %s with \"%s\"", \
                         k3_status_name(s_), (err).detail, k3_status_name(want), (substr)); \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* Asserts success, printing the detail otherwise. */
#define CHECK_OK(st, err)                                                                  \
    do {                                                                                   \
        k3_status s_ = (st);                                                               \
        if (s_ != K3_OK) {                                                                 \
            harness_fail(__FILE__, __LINE__, "status %s: %s", k3_status_name(s_),           \
                         (err).detail);                                                    \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define CHECK_STR(got, want)                                                               \
    do {                                                                                   \
        const char *g_ = (got), *w_ = (want);                                              \
        if (!g_ || strcmp(g_, w_) != 0) {                                                  \
            harness_fail(__FILE__, __LINE__, "%s = \"%s\", want \"%s\"", #got,             \
                         g_ ? g_ : "(null)", w_);                                          \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* A fresh empty directory; path is written into buf (at least 64 bytes). */
static inline const char *tf_mkdtemp(char *buf) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, 64, "%.40s/k3-test-XXXXXX", base && base[0] ? base : "/tmp");
    return mkdtemp(buf);
}

static inline void tf_path(char *buf, size_t size, const char *dir, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
}

/* Writes len bytes as dir/name; returns 0 on success. */
static inline int tf_write(const char *dir, const char *name, const void *data, size_t len) {
    char path[512];
    tf_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    return (fclose(f) == 0 && put == len) ? 0 : -1;
}

static inline int tf_write_str(const char *dir, const char *name, const char *text) {
    return tf_write(dir, name, text, strlen(text));
}

/* Removes every file in the (flat) directory, then the directory. */
static inline void tf_rmtree(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                tf_path(path, sizeof path, dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

#endif
