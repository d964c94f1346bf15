/* tokenizer.h - the checkpoint's tokenizer inside the engine: tiktoken byte-level BPE over
 * the ranks of `tiktoken.model`, the K3 split pattern (matched by hand, see tokenizer.c),
 * and the 256 special-token slots after the ranks, named by `tokenizer_config.json`.
 * Encoding reproduces the release's `TikTokenTokenizer.encode` id for id, including its
 * cuts of very long inputs; no BOS is added. It does not render chat turns.
 *
 * These are the engine-internal forms of the k3_tokenize* calls of k3.h: the same
 * contracts, with failures reported through a k3_error the caller chooses. */
#ifndef K3_TOKENIZER_H
#define K3_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "k3.h"

/* Special-token slots after the ranks; ids n_ranks .. n_ranks + 255. */
#define TOKENIZER_N_SPECIAL 256
/* The release encodes at most this many characters (code points) per call... */
#define TOKENIZER_MAX_ENCODE_CHARS 400000
/* ...and cuts runs of more than this many consecutive whitespace or non-whitespace
 * characters (Python str.isspace()) before encoding, so BPE never sees a longer piece. */
#define TOKENIZER_MAX_RUN_CHARS 25000

/* Loads dir/tiktoken.model and dir/tokenizer_config.json. K3_ERR_IO when a file cannot be
 * read; K3_ERR_TOKENIZER (detail "path:line: problem") when its contents are invalid;
 * K3_ERR_FORMAT when tokenizer_config.json is not JSON; K3_ERR_OUT_OF_MEMORY. */
k3_status tokenizer_open(const char *dir, k3_tokenizer **out, k3_error *err);

/* NULL is a no-op. */
void tokenizer_close(k3_tokenizer *tok);

/* Ranks plus special slots. */
int32_t tokenizer_vocab_size(const k3_tokenizer *tok);

/* The id of the special token spelled name[0..len), or -1. */
int32_t tokenizer_special_id(const k3_tokenizer *tok, const char *name, size_t len);

/* The bytes of token `id` (a special's are its name) with their count in *len; NULL when
 * id is outside the vocabulary. Valid until tokenizer_close(). */
const char *tokenizer_token(const k3_tokenizer *tok, int32_t id, size_t *len);

/* Encodes text[0..len) (any bytes; see k3_tokenize for invalid UTF-8). Writes the first
 * min(cap, count) ids to ids and the full count to *n_ids; a too-small cap is
 * K3_ERR_INVALID_ARGUMENT, except ids == NULL with cap == 0 (a size query, K3_OK).
 * cap >= len always suffices. */
k3_status tokenizer_encode(k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                           int32_t *ids, size_t cap, size_t *n_ids, k3_error *err);

/* The byte offset where the last piece of text[0..len) starts (see k3_tokenizer_last_piece);
 * 0 for an empty text. */
k3_status tokenizer_last_piece(k3_tokenizer *tok, const char *text, size_t len, size_t *start, k3_error *err);

/* Writes the bytes of ids[0..n_ids) to out and their count to *n_bytes; out may be NULL
 * when cap is 0 (a size query, K3_OK). K3_ERR_TOKEN for an id outside the vocabulary,
 * K3_ERR_INVALID_ARGUMENT when cap is too small (with *n_bytes the size needed). */
k3_status tokenizer_decode(const k3_tokenizer *tok, const int32_t *ids, size_t n_ids, char *out,
                           size_t cap, size_t *n_bytes, k3_error *err);

/* Streaming decode of one more id (see k3_detokenize_stream_next). */
k3_status tokenizer_decode_stream(const k3_tokenizer *tok, k3_detokenize_stream *stream,
                                  int32_t id, char *out, size_t cap, size_t *n_bytes,
                                  k3_error *err);

/* Tests only: pieces of at least n bytes are merged with the heap, shorter ones with the
 * tiktoken scan (both give the same ids; the heap keeps long pieces n log n). */
void tokenizer_set_heap_min(k3_tokenizer *tok, size_t n);

#endif
