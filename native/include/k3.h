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

#ifdef __cplusplus
}
#endif

#endif /* K3_H */
