/* fuzz.h - the fuzz harnesses' interface (docs/FUZZING.md). Each fuzz_<name>.c feeds
 * untrusted bytes to one parser of the engine or the CLI and defines a harness; driver.c
 * runs them (coverage from gcc's -fsanitize-coverage=trace-pc, under ASan + UBSan) and
 * mutate.c holds the mutators they share: bytes, JSON values and members, lines, and the
 * small archive that carries several files (a checkpoint folder) in one input. Nothing here
 * is part of the engine or the CLI. */
#ifndef K3_FUZZ_H
#define K3_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* A small fast generator (splitmix64); every run prints its seed. */
typedef struct fuzz_rng {
    uint64_t s;
} fuzz_rng;

uint64_t fuzz_next(fuzz_rng *r);
/* Uniform in [0, n); 0 when n is 0. */
size_t fuzz_below(fuzz_rng *r, size_t n);

typedef struct fuzz_harness {
    const char *name;
    const char *what; /* one line: what it feeds and to what */
    /* Once per process before any input (load a model, open a tokenizer); repo is the
     * repository root. Returns 0, or nonzero with a message printed. May be NULL. */
    int (*init)(const char *repo);
    /* Runs one input. Must not crash, hang or leak on any bytes; an invariant that does not
     * hold is reported with fuzz_fail(). */
    void (*run)(const uint8_t *data, size_t n);
    /* A structure-aware mutation of data[0..n) in place (capacity cap): returns the new
     * length. May be NULL (byte mutations only). */
    size_t (*mutate)(uint8_t *data, size_t n, size_t cap, fuzz_rng *r);
    const char *const *dictionary; /* NULL-terminated tokens for byte mutations, or NULL */
    size_t max_len;                /* longest input tried (0: 64 KiB) */
} fuzz_harness;

/* The harnesses, in fuzz_all.c order. */
extern const fuzz_harness fuzz_json, fuzz_config, fuzz_safetensors, fuzz_tokenizer, fuzz_state, fuzz_http,
    fuzz_chat;

/* Adds an input to the pool as a seed (from a harness's init: e.g. a state file made with
 * the model just loaded). */
void fuzz_add_seed(const uint8_t *data, size_t n);

/* Reports a broken invariant: prints it, saves the input as a finding, aborts. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A directory of this process's own, emptied by fuzz_clear_tmp() and removed at exit. */
const char *fuzz_tmp(void);
void fuzz_clear_tmp(void);

/* ---- mutators (mutate.c) ----------------------------------------------------------------- */

/* One random byte-level edit (bit flip, interesting value, insert, delete, duplicate,
 * dictionary token, splice with `other`). Returns the new length (<= cap). */
size_t fuzz_mutate_bytes(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, const char *const *dict, const uint8_t *other,
                         size_t other_n);

/* One JSON-aware edit of text that is roughly JSON: a scalar replaced by an interesting
 * value (huge, negative, fractional, NaN-ish, null, the wrong type, deep nesting), a
 * number nudged, a member deleted or duplicated. Falls back to bytes when it finds no value. */
size_t fuzz_mutate_json(uint8_t *d, size_t n, size_t cap, fuzz_rng *r);

/* One line-level edit: delete, duplicate, swap, truncate a line, or insert a dictionary
 * line (each dictionary entry is a line without its newline). */
size_t fuzz_mutate_lines(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, const char *const *dict);

/* The archive: several files in one input, as records of [1 byte file number][4 bytes
 * little-endian length][bytes]. A record that runs past the end is cut there. */
enum { FUZZ_MAX_FILES = 8 };
typedef struct fuzz_file {
    uint8_t id; /* index into the harness's file-name table (taken modulo its size) */
    const uint8_t *data;
    size_t len;
} fuzz_file;

int fuzz_archive_parse(const uint8_t *d, size_t n, fuzz_file *files, int max);
/* Returns the bytes written (0 when cap is too small). */
size_t fuzz_archive_build(uint8_t *out, size_t cap, const fuzz_file *files, int n);
/* Empties fuzz_tmp() and writes the archive's files there under names[id % n_names]. 0 or -1. */
int fuzz_archive_unpack(const uint8_t *d, size_t n, const char *const *names, int n_names);
/* Applies `edit` to one file of the archive in d (chosen at random, or a new empty one
 * added), rebuilding the archive in place. Returns the new length. */
size_t fuzz_mutate_archive(uint8_t *d, size_t n, size_t cap, fuzz_rng *r, int n_names,
                           size_t (*edit)(uint8_t *file, size_t len, size_t cap, uint8_t id, fuzz_rng *r));

/* Writes n bytes to fuzz_tmp()/name; 0 or -1. */
int fuzz_write_tmp(const char *name, const uint8_t *data, size_t n, char *path, size_t path_size);

#endif
