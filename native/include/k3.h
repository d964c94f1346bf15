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
    K3_ERR_EXPERT_READ = 13,     /* a routed expert could not be read: the run is invalid (the
                                    context is reset to empty; no token came from that pass) */
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
 * pointer stays valid until k3_tokenizer_close(). This, k3_tokenizer_vocab_size and
 * k3_tokenizer_special_id only read tables fixed at open: unlike the other calls they may
 * run on several threads at once, and alongside one other call on the tokenizer. */
const char *k3_tokenizer_token(const k3_tokenizer *tok, int32_t id, size_t *len);

/* The byte offset in text[0..len) where its last piece starts, the pieces being what the
 * K3 split pattern cuts the text into (BPE never merges across them; special-token names
 * are ordinary text here). A prompt cut there ends where typing more text cannot move the
 * boundary, which is where token healing backs a prompt off to. 0 for an empty text. */
k3_status k3_tokenizer_last_piece(k3_tokenizer *tok, const char *text, size_t len, size_t *start);

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

/* Where the weights live and the budgets they get; see "memory: presets, plans, budgets". */
typedef struct k3_model_params k3_model_params;

/* Opens the checkpoint in `dir` (config.json, model.safetensors.index.json + shards or
 * model.safetensors). Every tensor is checked against the config before it succeeds.
 * params NULL: every weight mapped from the shards (k3_model_params_default). Before any
 * budget-sized allocation the model's part of the plan (k3_model_plan) is checked against
 * MemAvailable: K3_ERR_BUDGET names the shortfall, or the budget below its floor. */
k3_status k3_model_open(const char *dir, const k3_model_params *params, k3_model **out, char *detail,
                        size_t detail_size);
void k3_model_close(k3_model *model);

/* Whether the model is still the one loaded. A shard changed on disk while the model is
 * open (truncated, shrunk, overwritten in place, replaced or removed: its size, modification
 * time or identity differs from the load's) makes every forward pass from then on fail with
 * K3_ERR_IO naming the file and both sizes; so does a read of mapped weights that faults
 * (SIGBUS: a file shrunk during a pass), which fails that pass instead of killing the
 * process. Nothing recovers but closing and opening the model again. This call makes the
 * same check (one stat per shard) without a pass: K3_OK, or K3_ERR_IO with that detail.
 * The SIGBUS handler it relies on is installed process-wide when the first model is opened;
 * a SIGBUS anywhere else goes to the handler installed before it, or the default action.
 * Tests only: K3_TEST_SKIP_FILE_CHECK=1 in the environment at open skips the per-pass stat,
 * so a changed shard is met by the reads themselves. */
k3_status k3_model_check(k3_model *model, char *detail, size_t detail_size);

/* Vocabulary size (rows of lm_head), hidden size and layer count. */
int k3_model_vocab_size(const k3_model *model);
int k3_model_hidden_size(const k3_model *model);
int k3_model_layer_count(const k3_model *model);

typedef struct k3_context_params {
    int max_context; /* positions the sequence may reach; sizes the MLA cache (default 4096) */
    int n_threads;   /* worker threads, >= 1 (default 1) */
    int batch;       /* tokens per forward pass when decoding many (default 128); K3_BATCH_AUTO:
                        sized by the plan (k3_plan's batch and batch_token_bytes say how) */
} k3_context_params;

/* params.batch that lets the plan size prefill to memory: where passes read weights (a
 * streamed trunk, or an expert cache smaller than the pool) every pass reads the trunk once
 * and each chosen expert once for all its tokens, so the batch grows to what MemAvailable
 * leaves after the model, the rest of the context and a margin of 1 GiB + 5 %, up to
 * max_context and at most 4096; where nothing streams it stays 128. */
#define K3_BATCH_AUTO 0

void k3_context_params_default(k3_context_params *params);

/* params may be NULL (defaults). K3_ERR_BUDGET, before allocating, when the context's part
 * of the plan (recurrent state, KV cache for max_context positions, buffers) exceeds
 * MemAvailable; the detail gives both numbers. */
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
 * params.batch (the plan's for K3_BATCH_AUTO). logits: NULL, or room for the logits of the last `n_logits` positions of
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
    int spec_always;            /* 0 (default): draft only as long as measured costs say verifying
                                   pays (on a model whose weights fit the CPU's cache a verified
                                   position costs about a whole step); 1: draft whenever the
                                   drafter proposes, for testing the drafter and the verifier */
    /* Token healing (docs/PROMPTS.md): the caller has backed the prompt off to the start of
     * its last piece (k3_tokenizer_last_piece) and passes the removed bytes here. The first
     * generated tokens then spell them: a token is allowed while its bytes are a prefix of
     * what remains to be spelled, or when they spell all of it and go on; special tokens
     * are not; among the allowed, the greedy choice. Drafts that break the constraint are
     * never proposed and verification applies it, so speculation stays exact. The emitted
     * tokens include the healed bytes (the caller strips them). Needs the logits of the
     * sequence's last position, which every decode in this process keeps (and checkpoints
     * carry), but a loaded saved state does not: K3_ERR_INVALID_ARGUMENT then. A call that
     * stops before all is spelled leaves the rest to the caller's next call. */
    const char *heal;           /* the bytes to spell (default NULL: no constraint) */
    size_t heal_len;
    const k3_tokenizer *tokenizer; /* the model's tokenizer, needed with heal (read only: it
                                      may be used by another thread meanwhile) */
    /* May be NULL; told after each verify pass how many draft tokens it checked and how
     * many it accepted (before the accepted ones reach on_token), with `user`. */
    void (*on_verify)(void *user, int drafted, int accepted);
    /* For benchmarks (default 0: off). With a in (0, 1), each drafted token is offered as the
     * drafter proposed it while a seeded coin lands with probability a, and the first that
     * does not is replaced by another id (the rest of the draft stays): drafting material
     * that is the model's own continuation is then accepted as a drafter whose tokens land
     * with probability a in turn would be, so a measured acceptance can be replayed on any
     * model. The same seed every call; the output is unchanged (only which drafts are
     * offered), and pacing sees the replayed acceptance. */
    double replay_acceptance;
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
    int healed;         /* tokens emitted while the heal constraint was still active */
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

/* Reads only the header of a saved state: *n_tokens receives how many tokens it holds, so
 * a caller can size a context (max_context) before loading it. K3_ERR_IO for a file that
 * cannot be read, K3_ERR_STATE for one that is not a state file of this format version. */
k3_status k3_state_length(const char *path, int *n_tokens, char *detail, size_t detail_size);

/* Replaces the sequence by the one saved in path. K3_ERR_STATE for a file from another
 * architecture or format version, a truncated or corrupted file, or one holding more
 * tokens than this context's max_context; the context is unchanged then. */
k3_status k3_state_load(k3_context *ctx, const char *path);

/* ------------------------------------------------------------------------ activations --
 * What each layer computed, for localising a disagreement with another implementation
 * (`k3 ... --dump-activations DIR`) and for per-layer timing in benchmarks. Sites are named
 * after the Hugging Face reference's modules (prefix language_model. omitted), in the
 * order a forward pass reaches them:
 *   model.embed_tokens                        out, (n, hidden)
 *   model.layers.L.input_layernorm            in: the attention residuals' mix, (n, hidden)
 *   model.layers.L.self_attn                  out: the KDA or MLA output, (n, hidden)
 *   model.layers.L.post_attention_layernorm   in: the mix before the FFN, (n, hidden)
 *   model.layers.L.block_sparse_moe.gate      the chosen experts, (n, top_k) ascending
 *   model.layers.L.mlp / .block_sparse_moe    out: the dense MLP or MoE output, (n, hidden)
 *   model.norm                                out, for the positions whose logits are computed
 *   lm_head                                   out: the logits of those positions, (n, vocab)
 * The routing site comes after the MoE output (the values are final by then). */

typedef enum k3_site {
    K3_SITE_EMBED = 0,
    K3_SITE_ATTN_INPUT = 1,
    K3_SITE_ATTN_OUTPUT = 2,
    K3_SITE_FFN_INPUT = 3,
    K3_SITE_FFN_OUTPUT = 4,
    K3_SITE_ROUTING = 5,
    K3_SITE_FINAL_NORM = 6,
    K3_SITE_LOGITS = 7
} k3_site;

typedef struct k3_activation {
    k3_site site;
    int layer;              /* 0-based; -1 for the embedding, the final norm and the logits */
    const char *name;       /* the module, as listed above */
    const char *kind;       /* the layer's mixer ("kda", "mla") at the attention sites, its FFN
                               ("mlp", "moe") at the FFN and routing sites; NULL elsewhere */
    int start;              /* sequence position of the first row */
    int n_tokens;           /* rows */
    int width;              /* values per row */
    const float *values;    /* (n_tokens, width); NULL at the routing site */
    const int32_t *experts; /* routing site only: (n_tokens, width) expert ids, ascending */
} k3_activation;

/* Called on the decoding thread during the pass; the pointers are valid only during the
 * call. It must not call into the context. */
typedef void (*k3_activation_fn)(void *user, const k3_activation *a);

/* Every later forward pass of ctx reports each site to fn (NULL: stop). Observing never
 * changes a computed bit. */
void k3_context_observe(k3_context *ctx, k3_activation_fn fn, void *user);

/* Process-wide counters since the process started, for benchmarks. */
typedef struct k3_counters {
    uint64_t weight_bytes_read; /* weight bytes the matrix kernels streamed */
    uint64_t multiply_adds;     /* multiply-adds of the products: matrices, MLA attention scores
                                   and sums, KDA state updates (2 FLOPs each) */
} k3_counters;

void k3_counters_get(k3_counters *out);

/* This machine's f32 multiply-add peak in FLOP/s for the kernels the engine runs (a
 * register-resident loop of their instruction set) on n_threads threads at once, best of
 * three runs of about `seconds`; *kernels (may be NULL) receives their name: "avx512",
 * "avx2" or "scalar". For benchmarks: achieved FLOP/s over this is a share of peak. */
double k3_fma_peak(int n_threads, double seconds, const char **kernels);

/* Asks the call running on ctx (in another thread) to stop at its next check. It is aimed
 * at that call only: when no cancellable call (k3_decode, k3_sync, k3_generate) is running
 * it does nothing, and a request the call ends before observing never reaches a later one. */
void k3_cancel(k3_context *ctx);

/* ------------------------------------------------------ memory: presets, plans, budgets --
 * Memory is a dial: the same model runs from a few GB or fully resident and produces
 * bit-identical output; more memory only makes it faster.
 *
 * The trunk (each layer's dense weights: attention projections, dense MLP, router, latent
 * projections, shared experts) is either mapped from the shards (trunk_bytes -1, the
 * default) or held in memory the engine owns within trunk_bytes: as many layers as fit
 * are pinned, read once at open; the rest stream through a ring of layer slots, read
 * just ahead of use. An owned trunk reads embedding rows on demand; lm_head stays mapped.
 * The routed experts are either mapped (expert_cache_bytes -1, the default) or read into
 * an LRU cache of expert_cache_bytes: as soon as a layer's router has chosen, reader
 * threads fetch the missing experts while the shared experts and the latent projection
 * run. A failed expert read fails the pass with K3_ERR_EXPERT_READ (a failed trunk or
 * embedding read with K3_ERR_IO); nothing is skipped, no token comes from that pass, and
 * the context is reset to empty, its carried state having been partly advanced.
 * A model that owns its trunk or caches experts runs one forward pass at a time: contexts
 * on other threads wait for it.
 *
 * Floors: an owned trunk needs one ring slot of its largest layer (two for reads to
 * overlap compute); the cache needs top_k slots. A plan names every component before
 * anything budget-sized is allocated; k3_model_open and k3_context_open refuse
 * (K3_ERR_BUDGET) what MemAvailable cannot hold (the environment variable K3_MEM_AVAILABLE,
 * a byte count, overrides /proc/meminfo: for tests, or to plan for a smaller machine).
 * The plan is a forecast: the measured peak RSS (getrusage) is the figure to quote; it
 * sits within a few MB of the plan (docs/PERFORMANCE.md gives the measured slack). */

/* How the bytes that stream every pass (routed experts the cache misses, ring layers) are
 * read. Around the page cache (O_DIRECT) they cost the machine far less CPU and memory
 * traffic, but nothing stays cached for the next pass or the next open. */
typedef enum k3_reads {
    K3_READS_AUTO = 0,     /* direct when what streams (the expert pool, the unpinned trunk)
                              exceeds what MemAvailable leaves beside the model: the page
                              cache could not keep it anyway; else through the page cache */
    K3_READS_DIRECT = 1,   /* always around the page cache, where the file system allows */
    K3_READS_BUFFERED = 2  /* always through the page cache */
} k3_reads;

struct k3_model_params {
    int64_t trunk_bytes;        /* -1: mapped (default); >= 0: owned, pinned layers + ring slots */
    int64_t expert_cache_bytes; /* -1: mapped (default); >= 0: the expert cache's budget */
    int io_threads;             /* expert reader threads, 1..16 (default 2) */
    int reads;                  /* k3_reads (default K3_READS_AUTO) */
    long fault_expert_read;     /* tests only: the n-th expert read fails as if the shard ended
                                   there (0: never, default) */
    int expert_prefetch;        /* 1: with an expert cache, each MoE layer's router pass also
                                   applies the next MoE layer's router (when that layer is
                                   mapped or pinned) to the current residual mix and reads the
                                   experts it picks early, once this layer's reads are under
                                   way, into cold slots only; never changes which experts
                                   compute or a bit of output. 0: off (default) */
    /* May be NULL (default). Called on the opening thread while k3_model_open reads the
     * pinned trunk layers (phase "trunk", bytes done of total, after each layer); a nonzero
     * return cancels the open: K3_ERR_CANCELLED, nothing kept. */
    int (*progress)(void *user, const char *phase, uint64_t done, uint64_t total);
    void *progress_user;
};

void k3_model_params_default(k3_model_params *params);

/* What a model needs at given budgets and context, component by component, in bytes. The
 * model's part (trunk .. index) is allocated once per model; the context's part
 * (recurrent_state, kv_cache, buffers) per context. Checkpoints (k3_checkpoint_limit) come
 * on top. */
typedef struct k3_plan {
    uint64_t trunk;           /* mapped: the dense weights; owned: pinned layers + ring slots */
    uint64_t embed_lm_head;   /* lm_head, plus the embedding table when the trunk is mapped */
    uint64_t vectors;         /* norms, biases, conv taps, residual queries as f32 copies */
    uint64_t index;           /* tensor metadata, the trunk and expert read tables, and the
                                 streaming readers' bounce buffers (8 MiB each, unless
                                 reads are K3_READS_BUFFERED) */
    uint64_t expert_cache;    /* mapped: the whole routed-expert pool; else slots x slot bytes */
    uint64_t recurrent_state; /* KDA state and conv history */
    uint64_t kv_cache;        /* MLA latent cache for max_context positions */
    uint64_t buffers;         /* forward scratch, logits staging, the token list, and what a
                                 verify pass keeps: a copy of the recurrent state to roll back
                                 to and the journal of up to 17 positions */
    uint64_t model_total;     /* trunk + embed_lm_head + vectors + index + expert_cache */
    uint64_t context_total;   /* recurrent_state + kv_cache + buffers */
    uint64_t total;
    uint64_t available;       /* MemAvailable when planned; 0: unknown */
    int fits;                 /* total <= available, or available unknown */
    /* what the budgets buy */
    int trunk_mapped, experts_mapped;
    int layers, layers_pinned, ring_slots;
    uint64_t ring_slot_bytes;
    uint64_t dense_weights;   /* every layer's trunk, as an owned trunk lays it out */
    uint64_t trunk_floor;     /* the smallest owned-trunk budget (one ring slot of the largest layer) */
    int expert_slots;
    uint64_t expert_slot_bytes;
    uint64_t expert_pool;     /* all routed experts, as stored */
    int64_t experts;          /* routed experts in the pool (MoE layers x experts per layer) */
    uint64_t cache_floor;     /* the smallest expert cache (top_k slots) */
    int max_context, batch;   /* batch: tokens per forward pass of a prefill */
    int batch_sized;          /* 1: the batch was sized by the plan (K3_BATCH_AUTO) */
    uint64_t batch_token_bytes; /* buffers each token of a batch adds (activations, MLA scores,
                                   MoE scratch): what limits a sized batch */
} k3_plan;

/* Plans the checkpoint in dir under params (NULL: mapped) for a context as cp (NULL:
 * defaults), reading config.json and the shard headers but no weights. K3_OK with fits 0
 * when it does not fit this machine; K3_ERR_BUDGET when a budget is below its floor (both
 * numbers in the detail); the errors of k3_model_open for a bad checkpoint. */
k3_status k3_plan_model(const char *dir, const k3_model_params *params, const k3_context_params *cp, k3_plan *out,
                        char *detail, size_t detail_size);

/* The plan of an open model for a context as cp (NULL: defaults), available re-read now. */
void k3_model_plan(const k3_model *model, const k3_context_params *cp, k3_plan *out);

/* Named budgets for the full-scale release, trunk first: per token the engine reads every
 * streamed trunk byte but only the selected experts, and K3's router spreads its choices
 * evenly, which defeats an LRU until the cache is tens of GB. The same table feeds the
 * CLI's --list-presets and the editor's preset picker. */
typedef struct k3_preset {
    const char *name;             /* "laptop", "desktop", "workstation", "server", "max" */
    int64_t trunk_bytes;          /* the budgets it passes to k3_model_open */
    int64_t expert_cache_bytes;
    uint64_t full_scale_peak_rss; /* peak RSS measured with these budgets on the full release
                                     (4096-token context; see docs/PERFORMANCE.md for source) */
    uint64_t full_scale_plan;     /* this engine's plan total for the full release, same context */
    const char *note;             /* one line for a picker */
} k3_preset;

int k3_preset_count(void);
const k3_preset *k3_preset_at(int i); /* NULL outside 0..count-1 */
const k3_preset *k3_preset_find(const char *name); /* NULL for an unknown name (and "auto") */
/* Sets mp's trunk and expert-cache budgets to the preset's; the rest of mp stays. */
void k3_preset_apply(const k3_preset *p, k3_model_params *mp);

/* The "auto" preset: budgets sized from mem_available (0: this machine's MemAvailable) for
 * the checkpoint in dir (NULL: the full-scale release) and a context as cp (NULL:
 * defaults). The per-context part, the mapped lm_head, vectors and index are reserved
 * first, plus a safety margin of 1 GiB + 5% of what is available; the trunk gets the rest
 * up to all of its layers, then the expert cache gets what remains (at least its floor).
 * K3_ERR_BUDGET below the floor (the detail gives the numbers). plan (may be NULL)
 * receives the plan of the result. */
k3_status k3_preset_auto(const char *dir, const k3_context_params *cp, uint64_t mem_available,
                         k3_model_params *out, k3_plan *plan, char *detail, size_t detail_size);

/* The one way a preset name becomes budgets (the CLI's --preset, the editor's k3.preset):
 * sets mp's trunk and expert-cache budgets from `name` and leaves the rest of mp as it is.
 * A name of the table above takes its budgets (k3_preset_apply); "auto" sizes them as
 * k3_preset_auto does for the checkpoint in dir (NULL: the full-scale release), a context as
 * cp (NULL: defaults) and this machine's MemAvailable; "mapped" maps both, as
 * k3_model_params_default leaves them. K3_ERR_INVALID_ARGUMENT for any other name (NULL
 * included), the detail naming it and every name there is; for "auto", the errors of
 * k3_preset_auto (K3_ERR_BUDGET below the floor, with the numbers). On failure mp is
 * unchanged and detail (caller-owned, may be NULL) says why. */
k3_status k3_preset_resolve(const char *name, const char *dir, const k3_context_params *cp, k3_model_params *mp,
                            char *detail, size_t detail_size);

/* Seconds per forward pass forecast for a checkpoint under given budgets on this machine,
 * from a machine profile written by `npm run bench -- scale`: the memory bandwidth and disk
 * read speed measured here, and per-layer-kind seconds measured at the release's width.
 * The model behind it is at the top of native/src/forecast.h; docs/SCALE.md checks it
 * against measured passes. */
typedef struct k3_forecast {
    double seconds;                /* the forecast for one pass */
    int positions;                 /* positions the pass verifies (1: a serial step) */
    double compute_seconds;        /* the pass with every byte it needs in memory */
    double disk_seconds;           /* reading its streamed trunk and missed experts */
    double exposed_expert_seconds; /* expert reads no compute hides */
    double trunk_read_bytes;       /* streamed trunk bytes per pass */
    double expert_read_bytes;      /* expert bytes read per pass */
    double expert_hit_rate;        /* assumed: what an LRU cache keeps with routing spread evenly */
    int bound;                     /* 0: compute / memory bandwidth, 1: the disk */
    /* How the model did where the profile was measured (0, 0, 0 when the profile records
     * no check): forecast against measured on check_configurations configurations of the
     * slice, check_within of them within 15 %, the largest |forecast / measured - 1|
     * check_worst. Said beside a forecast so a person can tell how far to trust it. */
    int check_configurations, check_within;
    double check_worst;
} k3_forecast;

/* Where a profile is looked for when none is named: $K3_MACHINE_PROFILE, else
 * $XDG_CACHE_HOME/k3/machine-profile.json, else $HOME/.cache/k3/machine-profile.json.
 * K3_ERR_INVALID_ARGUMENT when none applies or it does not fit out. */
k3_status k3_forecast_profile_path(char *out, size_t size);

/* The forecast for the checkpoint in dir (NULL: the full-scale release) under mp (owned
 * budgets; a mapped trunk or mapped experts have none: K3_ERR_INVALID_ARGUMENT) for a pass
 * of `positions` positions, from the profile at `profile` (NULL: the default path).
 * K3_ERR_IO when the profile is missing (the detail says how to make one), K3_ERR_FORMAT
 * when it is malformed (naming the field), K3_ERR_BUDGET below a floor. */
k3_status k3_forecast_make(const char *profile, const char *dir, const k3_model_params *mp, int positions,
                           k3_forecast *out, char *detail, size_t detail_size);

/* The same with the share of expert requests the cache serves given rather than assumed
 * (0..1; negative: assumed, as k3_forecast_make does): for checking the forecast against a
 * measured run, whose router need not spread its choices evenly. */
k3_status k3_forecast_make_at_hit_rate(const char *profile, const char *dir, const k3_model_params *mp,
                                       int positions, double expert_hit_rate, k3_forecast *out, char *detail,
                                       size_t detail_size);

/* Time to first token: the prefill of a prompt of `tokens` tokens forecast as passes of
 * the batch a context would get (see K3_BATCH_AUTO), each reading the streamed trunk once
 * and each chosen expert once for all its tokens (the model: native/src/forecast.h). */
typedef struct k3_prefill_forecast {
    int tokens, batch, passes;  /* passes = ceil(tokens / batch) */
    double seconds;             /* the whole prefill */
    double compute_seconds;     /* summed over passes, with every byte in memory */
    double disk_seconds;        /* summed over passes: streamed trunk and missed experts */
    double trunk_read_bytes;    /* passes x the streamed trunk */
    double expert_read_bytes;
    int bound;                  /* 1: some pass waits on the disk */
    int check_configurations, check_within; /* the profile's check, as in k3_forecast */
    double check_worst;
} k3_prefill_forecast;

/* The prefill forecast for the checkpoint in dir (NULL: the full-scale release) under mp,
 * in passes of `batch` (K3_BATCH_AUTO: the plan's for a context of max(4096, tokens + 1)
 * positions on this machine). expert_hit_rate as for k3_forecast_make_at_hit_rate.
 * Errors as k3_forecast_make's. */
k3_status k3_forecast_prefill(const char *profile, const char *dir, const k3_model_params *mp, int tokens, int batch,
                              double expert_hit_rate, k3_prefill_forecast *out, char *detail, size_t detail_size);

/* Memory counters of a model since it was opened; every context's passes add to them. */
typedef struct k3_memory_counters {
    uint64_t expert_requests;    /* experts asked for: distinct experts per layer pass */
    uint64_t expert_retained;    /* served by a slot filled in an earlier layer pass */
    uint64_t expert_evictions;   /* cached experts replaced */
    uint64_t expert_reads;       /* experts read from disk */
    uint64_t expert_bytes_read;
    double expert_read_seconds;  /* summed over reader threads: time inside pread */
    double expert_wait_seconds;  /* time forward passes waited for expert reads */
    uint64_t expert_guesses;     /* experts guessed early for the next MoE layer (expert_prefetch) */
    uint64_t expert_guesses_routed; /* of those, routed to by that layer: the guess's hit rate */
    uint64_t expert_early_reads; /* reads started from a guess (also in expert_reads) */
    uint64_t expert_early_bytes; /* (also in expert_bytes_read) */
    uint64_t expert_early_used;  /* early reads a pass then used before they were evicted */
    double expert_early_used_seconds; /* reader time of those reads: taken off the passes'
                                         path, an upper bound on the wait they saved */
    uint64_t trunk_layer_reads;  /* streamed layers read into the ring */
    uint64_t trunk_bytes_read;   /* their bytes, plus embedding rows */
    double trunk_read_seconds;   /* reader time inside pread */
    double trunk_wait_seconds;   /* time forward passes waited for trunk reads */
    uint64_t direct_bytes_read;  /* expert and ring bytes read around the page cache (O_DIRECT) */
    uint64_t trunk_pinned_bytes; /* read at open for the pinned layers */
    double trunk_pinned_seconds;
    uint64_t forward_passes;
    double forward_seconds;      /* wall-clock time inside forward passes */
} k3_memory_counters;

void k3_model_memory_counters(const k3_model *model, k3_memory_counters *out);

/* ---- end of memory: presets, plans, budgets ----------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif /* K3_H */
