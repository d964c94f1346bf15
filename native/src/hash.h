/* hash.h - the engine's two byte hashes: a fast one for in-memory hash tables (names of
 * tensors, JSON keys, tokens), whose values are never stored, and FNV-1a 64, whose values
 * are written into files (state.c) and so must never change. */
#ifndef K3_HASH_H
#define K3_HASH_H

#include <stddef.h>
#include <stdint.h>

/* For hash tables only: may change between versions. */
uint64_t hash_bytes(const void *data, size_t len);

#define HASH_FNV1A_START 14695981039346656037ull

/* FNV-1a 64 of data, continuing from h (start with HASH_FNV1A_START). Stable forever. */
uint64_t hash_fnv1a(uint64_t h, const void *data, size_t len);

#endif
