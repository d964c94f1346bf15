/* k3.h - the public C interface of the K3 engine, the only header a user of the engine
 * (the CLI, the Node addon, a test) may include.
 *
 * Contract:
 * - Status codes below are fixed forever: a number, once given a meaning, keeps it.
 *   New failures get new numbers at the end.
 * - Every call that can fail returns a k3_status. When it is not K3_OK, a detail string
 *   naming the file, tensor, field and numbers involved is available from the handle the
 *   call was made on (k3_*_error()); calls that create a handle, having none yet, write it
 *   into a caller-owned `char *detail, size_t detail_size` buffer instead.
 * - The library never exits the process, never prints unless asked, and never keeps a
 *   pointer to caller memory past the call that received it.
 * - Threading: a handle is used by one thread at a time. k3_cancel() is the exception:
 *   it may be called from any thread while another thread is inside a call on the same
 *   handle.
 */
#ifndef K3_H
#define K3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define K3_VERSION_MAJOR 0
#define K3_VERSION_MINOR 1
#define K3_VERSION_PATCH 0

typedef enum k3_status {
    K3_OK = 0,
    K3_ERR_INVALID_ARGUMENT = 1, /* a caller passed a value the call cannot accept */
    K3_ERR_IO = 2,               /* a file could not be opened, read or written */
    K3_ERR_FORMAT = 3,           /* a file's bytes break its format (safetensors, JSON) */
    K3_ERR_CONFIG = 4,           /* config.json is inconsistent or asks for an unsupported feature */
    K3_ERR_TENSOR = 5,           /* a tensor is missing or has the wrong shape or dtype */
    K3_ERR_OUT_OF_MEMORY = 6,    /* an allocation failed */
    K3_ERR_BUDGET = 7,           /* the memory plan exceeds the budget or the machine */
    K3_ERR_CONTEXT_FULL = 8,     /* the sequence would outgrow the context it was sized for */
    K3_ERR_TOKEN = 9,            /* a token id outside the vocabulary */
    K3_ERR_TOKENIZER = 10,       /* the tokenizer files are invalid */
    K3_ERR_STATE = 11,           /* a saved state is corrupt or from another architecture */
    K3_ERR_CANCELLED = 12,       /* k3_cancel() stopped the call; the handle stays usable */
    K3_ERR_EXPERT_READ = 13,     /* a routed expert could not be read: the run is invalid */
    K3_ERR_INTERNAL = 14         /* a broken invariant inside the engine (a bug) */
} k3_status;

/* "0.1.0": the engine version, which is also the CLI's and the addon's. */
const char *k3_version(void);

/* A stable lower-case name for a status ("ok", "io", "tensor", ...). */
const char *k3_status_name(k3_status status);

/* ---- Tokenizer ---------------------------------------------------------------------
 * The checkpoint's own tokenizer: tiktoken byte-level BPE over the ranks of
 * `tiktoken.model`, split by the K3 pattern, plus 256 special-token slots right after the
 * ranks (ids vocab_size-256 .. vocab_size-1) whose names come from
 * `tokenizer_config.json` (`added_tokens_decoder`; a slot it does not name is spelled
 * `<|reserved_token_{id}|>`). Encoding gives the ids the release's
 * `TikTokenTokenizer.encode` gives, including its cuts of inputs over 400,000 characters
 * and of runs over 25,000 whitespace or non-whitespace characters; no BOS is added.
 * The end-of-turn ids are the specials "[EOS]" and "<|end_of_msg|>".
 * A tokenizer is used by one thread at a time. */

typedef struct k3_tokenizer k3_tokenizer;

/* The longest token a tokenizer accepts, ranks and special names alike, in bytes. */
#define K3_TOKEN_MAX_BYTES 1024

/* Loads dir/tiktoken.model and dir/tokenizer_config.json into *out (NULL on failure).
 * K3_ERR_IO: a file cannot be read. K3_ERR_TOKENIZER: a file breaks its format; the detail
 * names the file, the line (tiktoken.model) or key (tokenizer_config.json) and the
 * problem. K3_ERR_FORMAT: tokenizer_config.json is not JSON. K3_ERR_OUT_OF_MEMORY. */
k3_status k3_tokenizer_open(const char *dir, k3_tokenizer **out, char *detail,
                            size_t detail_size);

/* Frees the tokenizer; NULL is a no-op. */
void k3_tokenizer_close(k3_tokenizer *tok);

/* The detail of the last failed call on tok ("" if none). Valid until the next call. */
const char *k3_tokenizer_error(const k3_tokenizer *tok);

/* Number of ids: ranks plus the 256 special slots (163,840 for K3). */
int32_t k3_tokenizer_vocab_size(const k3_tokenizer *tok);

/* The id of the special token spelled `name` (NUL-terminated, e.g. "<|end_of_msg|>"), or -1
 * when no special slot has that name. Ordinary ranks are never returned. */
int32_t k3_tokenizer_special_id(const k3_tokenizer *tok, const char *name);

/* The bytes of token `id` (a special's are its name), *len set to their count; NULL when
 * id is outside the vocabulary. A rank's bytes need not be valid UTF-8 on their own. The
 * pointer stays valid until k3_tokenizer_close(). */
const char *k3_tokenizer_token(const k3_tokenizer *tok, int32_t id, size_t *len);

/* Encodes text[0..len) into ids. allow_special non-zero: the name of a special token in
 * the text becomes its id; zero: it is ordinary text. Bytes that are not valid UTF-8 are
 * encoded one by one as their byte tokens (classed as punctuation by the split pattern), so
 * k3_detokenize() gives back exactly the input for any bytes.
 * *n_ids gets the number of ids the text needs; the first min(cap, *n_ids) are written.
 * When cap is too small that is K3_ERR_INVALID_ARGUMENT, except that ids == NULL with
 * cap == 0 is a size query (K3_OK). A text never needs more ids than len. */
k3_status k3_tokenize(k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                      int32_t *ids, size_t cap, size_t *n_ids);

/* Writes the bytes of ids[0..n_ids) to out, *n_bytes set to their count (the needed size
 * when cap is too small: K3_ERR_INVALID_ARGUMENT; out == NULL with cap == 0 is a size
 * query, K3_OK). K3_ERR_TOKEN: an id outside the vocabulary, named with its index. No
 * terminating NUL is written. */
k3_status k3_detokenize(k3_tokenizer *tok, const int32_t *ids, size_t n_ids, char *out,
                        size_t cap, size_t *n_bytes);

/* State of a streaming decode: the tail of a UTF-8 sequence split across tokens. Zero it
 * to start (k3_detokenize_stream s = {0}); its fields are private. */
typedef struct k3_detokenize_stream {
    unsigned char held[4];
    unsigned n_held;
} k3_detokenize_stream;

/* Decodes one more id of a stream: writes to out the bytes that are ready, *n_bytes set to
 * their count. Output never ends inside a UTF-8 sequence that the next token could still
 * complete; those bytes (at most 3) wait in the stream. Bytes that can never complete are
 * written as they are. The outputs of every call plus k3_detokenize_stream_end() are
 * exactly k3_detokenize() of the same ids. A cap of K3_TOKEN_MAX_BYTES + 3 always suffices;
 * a smaller one that does not is K3_ERR_INVALID_ARGUMENT and leaves the stream unchanged.
 * K3_ERR_TOKEN: id outside the vocabulary (stream unchanged). */
k3_status k3_detokenize_stream_next(k3_tokenizer *tok, k3_detokenize_stream *stream, int32_t id,
                                    char *out, size_t cap, size_t *n_bytes);

/* Ends a stream: writes the bytes still waiting (at most 3, an incomplete sequence) to out,
 * which must hold 4 bytes, returns their count and resets the stream. */
size_t k3_detokenize_stream_end(k3_detokenize_stream *stream, char *out);

/* ---- end of Tokenizer ---------------------------------------------------------------- */

/* ---------------------------------------------------------------- models and decoding --
 * A k3_model is a loaded checkpoint: read-only after k3_model_open, shareable by any
 * number of contexts (each used by one thread at a time). A k3_context is one sequence:
 * the tokens decoded so far and the state they left (KDA recurrent state and conv
 * history, the MLA latent cache). Decoding n tokens at once, or one at a time, or with any
 * thread count, gives bit-identical logits for every position. */

typedef struct k3_model k3_model;
typedef struct k3_context k3_context;

/* Opens the checkpoint in `dir` (config.json, model.safetensors.index.json + shards or
 * model.safetensors). Every tensor is checked against the config before it succeeds. */
k3_status k3_model_open(const char *dir, k3_model **out, char *detail, size_t detail_size);
void k3_model_close(k3_model *model);

/* Vocabulary size (rows of lm_head), hidden size and layer count. */
int k3_model_vocab_size(const k3_model *model);
int k3_model_hidden_size(const k3_model *model);
int k3_model_layer_count(const k3_model *model);

typedef struct k3_context_params {
    int max_context; /* positions the sequence may reach; sizes the MLA cache (default 4096) */
    int n_threads;   /* worker threads, >= 1 (default 1) */
    int batch;       /* tokens per forward pass when decoding many (default 32) */
} k3_context_params;

void k3_context_params_default(k3_context_params *params);

/* params may be NULL (defaults). */
k3_status k3_context_open(k3_model *model, const k3_context_params *params, k3_context **out, char *detail,
                          size_t detail_size);
void k3_context_close(k3_context *ctx);

/* The detail of the last failed call on ctx ("" after a success). */
const char *k3_context_error(const k3_context *ctx);

/* Tokens in the sequence so far, and a pointer to them (valid until the next call). */
int k3_context_length(const k3_context *ctx);
const int32_t *k3_context_tokens(const k3_context *ctx);

/* Forgets the sequence: back to the empty state. */
void k3_context_reset(k3_context *ctx);

/* Appends ids[0..n) to the sequence and runs them through the model, in batches of
 * params.batch. logits: NULL, or room for the logits of the last `n_logits` positions of
 * this call ((n_logits, vocab) floats, n_logits <= n). argmax: NULL, or (n) receiving the
 * greedy next token after every position (this computes logits at every position).
 * K3_ERR_TOKEN for an id outside the vocabulary and K3_ERR_CONTEXT_FULL past max_context
 * (both before any work, leaving ctx unchanged). K3_ERR_CANCELLED when k3_cancel() was
 * called: checked between batches, so the tokens of completed batches stay in the
 * sequence (k3_context_length says how many) and ctx stays usable. */
k3_status k3_decode(k3_context *ctx, const int32_t *ids, int n, float *logits, int n_logits, int32_t *argmax);

/* --------------------------------------------- generation, checkpoints and saved state --
 * Everything here leaves the output exactly what one-token greedy decode would produce:
 * speculation only decides how many positions one forward pass verifies, checkpoints and
 * saved states only decide how much of a sequence is recomputed. */

/* Called for each generated token, in order; return nonzero to stop after it. */
typedef int (*k3_token_fn)(void *user, int32_t id);

typedef struct k3_generate_params {
    int max_tokens;             /* stop after this many new tokens (default 256) */
    int spec_max;               /* 0: plain greedy; N (1..16): draft up to N tokens per pass (default 0) */
    const int32_t *stop_ids;    /* generation ends after emitting one of these (default none) */
    int n_stop_ids;
    const int32_t *context_ids; /* extra drafting material, already tokenized: the text after the
                                   cursor, other open files, earlier completions (default none) */
    int n_context_ids;
    k3_token_fn on_token;       /* may be NULL */
    void *user;
} k3_generate_params;

/* Why k3_generate returned K3_OK. */
typedef enum k3_stop_reason { K3_STOP_LENGTH = 0, K3_STOP_TOKEN = 1, K3_STOP_CALLBACK = 2 } k3_stop_reason;

typedef struct k3_generate_stats {
    int emitted;        /* tokens generated */
    int forward_passes; /* forwards run (one per token without speculation) */
    int rounds;         /* passes that verified at least one draft token */
    int drafted;        /* draft tokens proposed */
    int accepted;       /* draft tokens verification accepted */
    k3_stop_reason stop_reason;
} k3_generate_stats;

void k3_generate_params_default(k3_generate_params *params);

/* Greedy continuation of the sequence (which must hold at least one token): each new
 * token is the argmax after the previous one. New tokens are appended to the sequence.
 * K3_ERR_CONTEXT_FULL before the first token that would not fit (tokens emitted so far
 * stay); K3_ERR_CANCELLED after k3_cancel(), checked between forward passes. stats may be
 * NULL. */
k3_status k3_generate(k3_context *ctx, const k3_generate_params *params, k3_generate_stats *stats);

/* Remembers the carried state at the current length, so a later k3_sync() to a sequence
 * with this prefix resumes here. Checkpoints share a memory budget (k3_checkpoint_limit,
 * default 256 MB); the least recently used are dropped first. */
k3_status k3_checkpoint(k3_context *ctx);
void k3_checkpoint_limit(k3_context *ctx, size_t max_bytes);
void k3_checkpoint_usage(const k3_context *ctx, int *count, size_t *bytes);

/* Makes the sequence exactly ids[0..n): resumes from the longest prefix it holds (the
 * current sequence or a checkpoint) and decodes only the rest. *reused (may be NULL)
 * receives the number of tokens not recomputed. The result is bit-identical to decoding
 * ids from an empty context. */
k3_status k3_sync(k3_context *ctx, const int32_t *ids, int n, int *reused);

/* Writes the sequence and its carried state (tokens, KDA state and conv history, the
 * occupied MLA cache rows) to path atomically, in the versioned format specified at the
 * top of native/src/state.c. */
k3_status k3_state_save(k3_context *ctx, const char *path);

/* Replaces the sequence by the one saved in path. K3_ERR_STATE for a file from another
 * architecture or format version, a truncated or corrupted file, or one holding more
 * tokens than this context's max_context; the context is unchanged then. */
k3_status k3_state_load(k3_context *ctx, const char *path);

/* Process-wide counters since the process started, for benchmarks. */
typedef struct k3_counters {
    uint64_t weight_bytes_read; /* weight bytes the matrix kernels streamed */
} k3_counters;

void k3_counters_get(k3_counters *out);

/* Asks the call running on ctx (in another thread) to stop at its next check. The request
 * is consumed by the next call that observes it. */
void k3_cancel(k3_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* K3_H */
