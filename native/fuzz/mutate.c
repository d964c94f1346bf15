/* mutate.c - the mutators the fuzz harnesses share (see fuzz.h): byte edits with
 * interesting values and dictionary tokens, JSON-aware edits of values and members,
 * line edits, and the archive that carries a checkpoint folder's files in one input. Built
 * without coverage instrumentation: the fuzzer's own branches are not the target's. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

uint64_t fuzz_next(fuzz_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

size_t fuzz_below(fuzz_rng *r, size_t n) { return n ? (size_t)(fuzz_next(r) % n) : 0; }

/* Replaces d[at..at+old) by rep[0..len) when it fits; returns the new length or n. */
static size_t splice(uint8_t *d, size_t n, size_t cap, size_t at, size_t old, const void *rep, size_t len) {
    if (at > n || old > n - at || n - old + len > cap)
        return n;
    memmove(d + at + len, d + at + old, n - at - old);
    memcpy(d + at, rep, len);
    return n - old + len;
}

static const uint8_t interesting8[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '\r', '"', '\\', '{', '[', ' ', 0xc0, 0xed, 0xf4};
static const int64_t interesting_ints[] = {0, -1, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 2147483647,
                                           -2147483648LL, 4294967295LL, 4294967296LL, 0x7fffffffffffffffLL};

size_t fuzz_mutate_bytes(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, const char *const *dict, const uint8_t *other,
                         size_t other_n) {
    size_t n_dict = 0;
    while (dict && dict[n_dict])
        n_dict++;
    switch (fuzz_below(r, n_dict ? 9 : 8)) {
    case 0: /* flip a bit */
        if (n)
            d[fuzz_below(r, n)] ^= (uint8_t)(1u << fuzz_below(r, 8));
        return n;
    case 1: /* an interesting byte */
        if (n)
            d[fuzz_below(r, n)] = interesting8[fuzz_below(r, sizeof interesting8)];
        return n;
    case 2: { /* an interesting 2, 4 or 8-byte integer, little-endian */
        const size_t w = (size_t)1 << (1 + fuzz_below(r, 3));
        if (n < w)
            return n;
        const int64_t v = interesting_ints[fuzz_below(r, sizeof interesting_ints / sizeof interesting_ints[0])];
        memcpy(d + fuzz_below(r, n - w + 1), &v, w);
        return n;
    }
    case 3: { /* insert random bytes */
        uint8_t buf[16];
        const size_t len = 1 + fuzz_below(r, sizeof buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)fuzz_next(r);
        return splice(d, n, cap, fuzz_below(r, n + 1), 0, buf, len);
    }
    case 4: { /* delete a range */
        if (!n)
            return n;
        const size_t at = fuzz_below(r, n), len = 1 + fuzz_below(r, n - at < 64 ? n - at : 64);
        return splice(d, n, cap, at, len, "", 0);
    }
    case 5: { /* duplicate a range */
        if (!n)
            return n;
        const size_t at = fuzz_below(r, n), len = 1 + fuzz_below(r, n - at < 256 ? n - at : 256);
        uint8_t *copy = malloc(len);
        if (!copy)
            return n;
        memcpy(copy, d + at, len);
        n = splice(d, n, cap, fuzz_below(r, n + 1), 0, copy, len);
        free(copy);
        return n;
    }
    case 6: /* cut the end */
        return n ? fuzz_below(r, n) : n;
    case 7: { /* splice a piece of another input in */
        if (!other || !other_n)
            return n;
        const size_t from = fuzz_below(r, other_n), len = 1 + fuzz_below(r, other_n - from);
        const size_t at = fuzz_below(r, n + 1);
        return splice(d, n, cap, at, fuzz_below(r, n - at + 1), other + from, len);
    }
    default: { /* a dictionary token, inserted or written over */
        const char *tok = dict[fuzz_below(r, n_dict)];
        const size_t at = fuzz_below(r, n + 1), len = strlen(tok);
        return splice(d, n, cap, at, fuzz_below(r, 2) ? 0 : (n - at < len ? n - at : len), tok, len);
    }
    }
}

/* ---- JSON --------------------------------------------------------------------------------- */

static const char *const json_values[] = {
    "0", "-1", "1", "2", "7", "63", "64", "65", "1024", "2147483647", "2147483648", "-2147483649", "4294967296",
    "16777217", "9007199254740993", "18446744073709551616", "1e308", "1e999", "-1e999", "1e-400", "0.5", "-0", "-0.0",
    "1.5", "1E+2", "null", "true", "false", "\"\"", "\"x\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"",
    "\"a\\\"b\"", "[]", "{}", "[1, 2, 3]", "{\"a\": 1}", "[0]", "[-1]", "[null]", "\"situ\"", "\"sigmoid\"",
    "\"BF16\"", "\"F32\"", "\"U8\"", "[4294967296]", "[1, 1]", "{\"0\": {}}", NULL};
enum { N_JSON_VALUES = sizeof json_values / sizeof json_values[0] - 1 };

typedef struct span {
    size_t start, end;   /* the value's bytes */
    size_t member_start; /* where its "key": begins, or SIZE_MAX for array elements and the root */
} span;

/* Scans roughly-JSON text for scalar values and members (depth-aware, strings skipped). */
static size_t scan_values(const uint8_t *d, size_t n, span *out, size_t max) {
    size_t count = 0, key_start = SIZE_MAX;
    for (size_t i = 0; i < n && count < max;) {
        const uint8_t c = d[i];
        if (c == '"') {
            size_t j = i + 1;
            while (j < n && d[j] != '"')
                j += d[j] == '\\' ? 2 : 1;
            const size_t end = j < n ? j + 1 : n;
            size_t k = end;
            while (k < n && (d[k] == ' ' || d[k] == '\n' || d[k] == '\t' || d[k] == '\r'))
                k++;
            if (k < n && d[k] == ':') {
                key_start = i;
                i = k + 1;
                continue;
            }
            out[count++] = (span){i, end, key_start};
            key_start = SIZE_MAX;
            i = end;
        } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
            size_t j = i;
            while (j < n && !strchr(",]} \n\r\t:", d[j]))
                j++;
            out[count++] = (span){i, j, key_start};
            key_start = SIZE_MAX;
            i = j;
        } else {
            if (c == '{' || c == '[' || c == ',')
                key_start = SIZE_MAX;
            i++;
        }
    }
    return count;
}

size_t fuzz_mutate_json(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) {
    enum { MAX_SPANS = 4096 };
    span *spans = malloc(sizeof *spans * MAX_SPANS);
    if (!spans)
        return n;
    const size_t count = scan_values(d, n, spans, MAX_SPANS);
    if (count == 0) {
        free(spans);
        return fuzz_mutate_bytes(d, n, cap, r, json_values, NULL, 0);
    }
    const span s = spans[fuzz_below(r, count)];
    free(spans);
    switch (fuzz_below(r, 6)) {
    case 0:
    case 1: { /* an interesting value */
        const char *v = json_values[fuzz_below(r, N_JSON_VALUES)];
        return splice(d, n, cap, s.start, s.end - s.start, v, strlen(v));
    }
    case 2: { /* a number nudged: +-1, doubled, negated */
        char buf[64];
        const long long v = strtoll((const char *)d + s.start, NULL, 10);
        static const long long deltas[] = {1, -1};
        const int op = (int)fuzz_below(r, 4);
        const unsigned long long u = (unsigned long long)v; /* wraps, as a mutation may */
        snprintf(buf, sizeof buf, "%lld", (long long)(op < 2 ? u + (unsigned long long)deltas[op] : op == 2 ? u * 2 : 0 - u));
        return splice(d, n, cap, s.start, s.end - s.start, buf, strlen(buf));
    }
    case 3: { /* the member deleted, with a comma next to it */
        if (s.member_start == SIZE_MAX)
            return n;
        size_t start = s.member_start, end = s.end;
        if (end < n && d[end] == ',')
            end++;
        else
            while (start > 0 && (d[start - 1] == ' ' || d[start - 1] == '\n' || d[start - 1] == ',')) {
                start--;
                if (d[start] == ',')
                    break;
            }
        return splice(d, n, cap, start, end - start, "", 0);
    }
    case 4: { /* the member (or element) duplicated */
        const size_t from = s.member_start == SIZE_MAX ? s.start : s.member_start, len = s.end - from;
        uint8_t *copy = malloc(len + 2);
        if (!copy)
            return n;
        copy[0] = ',';
        memcpy(copy + 1, d + from, len);
        n = splice(d, n, cap, s.end, 0, copy, len + 1);
        free(copy);
        return n;
    }
    default: { /* nested deep */
        const size_t depth = 1 + fuzz_below(r, 1200);
        char *deep = malloc(2 * depth + 1);
        if (!deep)
            return n;
        const int curly = (int)fuzz_below(r, 2);
        size_t k = 0;
        for (size_t i = 0; i < depth; i++) {
            if (curly && i + 1 < depth) {
                memcpy(deep + k, "{\"a\":", 5);
                k += 5;
            } else
                deep[k++] = '[';
            if (k + 8 > 2 * depth)
                break;
        }
        size_t opened = 0;
        for (size_t i = 0; i < k; i++)
            opened += deep[i] == '[' || deep[i] == '{';
        char *all = malloc(k + opened + 1);
        if (!all) {
            free(deep);
            return n;
        }
        memcpy(all, deep, k);
        size_t m = k;
        for (size_t i = k; i-- > 0;)
            if (deep[i] == '[' || deep[i] == '{')
                all[m++] = deep[i] == '[' ? ']' : '}';
        n = splice(d, n, cap, s.start, s.end - s.start, all, m);
        free(all);
        free(deep);
        return n;
    }
    }
}

/* ---- lines --------------------------------------------------------------------------------- */

size_t fuzz_mutate_lines(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, const char *const *dict) {
    enum { MAX_LINES = 8192 };
    size_t *starts = malloc(sizeof *starts * (MAX_LINES + 1)), lines = 0;
    if (!starts)
        return n;
    for (size_t i = 0; i < n && lines < MAX_LINES; i++)
        if (i == 0 || d[i - 1] == '\n')
            starts[lines++] = i;
    starts[lines] = n;
    size_t n_dict = 0;
    while (dict && dict[n_dict])
        n_dict++;
    const size_t a = fuzz_below(r, lines), b = fuzz_below(r, lines);
    const size_t a0 = lines ? starts[a] : 0, a1 = lines ? starts[a + 1] : 0;
    const size_t b0 = lines ? starts[b] : 0, b1 = lines ? starts[b + 1] : 0;
    free(starts);
    switch (fuzz_below(r, n_dict ? 5 : 4)) {
    case 0: /* delete a line */
        return splice(d, n, cap, a0, a1 - a0, "", 0);
    case 1: { /* duplicate a line */
        uint8_t *copy = malloc(a1 - a0 + 1);
        if (!copy)
            return n;
        memcpy(copy, d + a0, a1 - a0);
        n = splice(d, n, cap, b0, 0, copy, a1 - a0);
        free(copy);
        return n;
    }
    case 2: { /* swap two lines (by moving the later one before the earlier) */
        if (a == b)
            return n;
        const size_t s0 = a0 < b0 ? a0 : b0, t0 = a0 < b0 ? b0 : a0, t1 = a0 < b0 ? b1 : a1;
        uint8_t *copy = malloc(t1 - t0 + 1);
        if (!copy)
            return n;
        memcpy(copy, d + t0, t1 - t0);
        n = splice(d, n, cap, t0, t1 - t0, "", 0);
        n = splice(d, n, cap, s0, 0, copy, t1 - t0);
        free(copy);
        return n;
    }
    case 3: { /* a few bytes cut out of a line (its newline stays) */
        if (a1 - a0 < 2)
            return n;
        const size_t at = a0 + fuzz_below(r, a1 - a0 - 1), room = a1 - 1 - at, cut = 1 + fuzz_below(r, 4);
        return splice(d, n, cap, at, cut < room ? cut : room, "", 0);
    }
    default: { /* a dictionary line */
        const char *line = dict[fuzz_below(r, n_dict)];
        const size_t len = strlen(line);
        char *copy = malloc(len + 2);
        if (!copy)
            return n;
        memcpy(copy, line, len);
        copy[len] = '\n';
        n = splice(d, n, cap, b0, fuzz_below(r, 3) ? 0 : b1 - b0, copy, len + 1);
        free(copy);
        return n;
    }
    }
}

/* ---- the archive --------------------------------------------------------------------------- */

int fuzz_archive_parse(const uint8_t *d, size_t n, fuzz_file *files, int max) {
    int count = 0;
    size_t i = 0;
    while (i < n && count < max) {
        const uint8_t id = d[i++];
        uint32_t len = 0;
        for (int k = 0; k < 4; k++)
            len |= (uint32_t)(i < n ? d[i++] : 0) << (8 * k);
        if (len > n - i)
            len = (uint32_t)(n - i);
        files[count++] = (fuzz_file){id, d + i, len};
        i += len;
    }
    return count;
}

size_t fuzz_archive_build(uint8_t *out, size_t cap, const fuzz_file *files, int n) {
    size_t k = 0;
    for (int f = 0; f < n; f++) {
        if (cap - k < 5 + files[f].len)
            return 0;
        out[k++] = files[f].id;
        for (int b = 0; b < 4; b++)
            out[k++] = (uint8_t)(files[f].len >> (8 * b));
        memmove(out + k, files[f].data, files[f].len);
        k += files[f].len;
    }
    return k;
}

static char tmp_dir[256];

static void remove_tmp(void) {
    fuzz_clear_tmp();
    if (tmp_dir[0])
        rmdir(tmp_dir);
}

const char *fuzz_tmp(void) {
    if (!tmp_dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(tmp_dir, sizeof tmp_dir, "%s/k3-fuzz-XXXXXX", base);
        if (!mkdtemp(tmp_dir)) {
            perror("k3-fuzz: mkdtemp");
            exit(2);
        }
        atexit(remove_tmp);
    }
    return tmp_dir;
}

void fuzz_clear_tmp(void) {
    if (!tmp_dir[0])
        return;
    DIR *dir = opendir(tmp_dir);
    if (!dir)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
        unlink(path);
    }
    closedir(dir);
}

int fuzz_write_tmp(const char *name, const uint8_t *data, size_t n, char *path, size_t path_size) {
    snprintf(path, path_size, "%s/%s", fuzz_tmp(), name);
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(fd, data + done, n - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    close(fd);
    return 0;
}

int fuzz_archive_unpack(const uint8_t *d, size_t size, const char *const *names, int n_names) {
    fuzz_file files[FUZZ_MAX_FILES];
    const int n = fuzz_archive_parse(d, size, files, FUZZ_MAX_FILES);
    fuzz_clear_tmp();
    char path[512];
    for (int f = 0; f < n; f++)
        if (fuzz_write_tmp(names[files[f].id % n_names], files[f].data, files[f].len, path, sizeof path))
            return -1;
    return 0;
}

size_t fuzz_mutate_archive(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, int n_names,
                           size_t (*edit)(uint8_t *file, size_t len, size_t cap, uint8_t id, fuzz_rng *r)) {
    fuzz_file files[FUZZ_MAX_FILES];
    int count = fuzz_archive_parse(d, n, files, FUZZ_MAX_FILES);
    /* Copies first: the rebuilt archive overwrites d. */
    uint8_t *copies[FUZZ_MAX_FILES] = {0};
    size_t caps[FUZZ_MAX_FILES] = {0};
    if (count < FUZZ_MAX_FILES && (count == 0 || fuzz_below(r, 16) == 0))
        files[count++] = (fuzz_file){(uint8_t)fuzz_below(r, (size_t)n_names), NULL, 0};
    const int pick = (int)fuzz_below(r, (size_t)count);
    size_t out = n;
    for (int f = 0; f < count; f++) {
        caps[f] = files[f].len + (f == pick ? 4096 + files[f].len : 0) + 1;
        copies[f] = malloc(caps[f]);
        if (!copies[f])
            goto done;
        if (files[f].len)
            memcpy(copies[f], files[f].data, files[f].len);
    }
    if (fuzz_below(r, 24) == 0) { /* sometimes another file number */
        files[pick].id = (uint8_t)fuzz_below(r, (size_t)n_names);
    } else if (fuzz_below(r, 32) == 0 && count > 1) { /* or a file dropped */
        free(copies[pick]);
        for (int f = pick; f + 1 < count; f++) {
            files[f] = files[f + 1];
            copies[f] = copies[f + 1];
            caps[f] = caps[f + 1];
        }
        copies[--count] = NULL;
    } else
        files[pick].len = edit(copies[pick], files[pick].len, caps[pick] - 1, files[pick].id, r);
    for (int f = 0; f < count; f++)
        files[f].data = copies[f];
    {
        uint8_t *built = malloc(cap);
        const size_t len = built ? fuzz_archive_build(built, cap, files, count) : 0;
        if (len) {
            memcpy(d, built, len);
            out = len;
        }
        free(built);
    }
done:
    for (int f = 0; f < FUZZ_MAX_FILES; f++)
        free(copies[f]);
    return out;
}
