/* version.c - the engine version and the names of status codes. Nothing else. */
#include "k3.h"

#define K3_STR2(x) #x
#define K3_STR(x) K3_STR2(x)

const char *k3_version(void) {
    return K3_STR(K3_VERSION_MAJOR) "." K3_STR(K3_VERSION_MINOR) "." K3_STR(K3_VERSION_PATCH);
}

const char *k3_status_name(k3_status status) {
    switch (status) {
    case K3_OK: return "ok";
    case K3_ERR_INVALID_ARGUMENT: return "invalid-argument";
    case K3_ERR_IO: return "io";
    case K3_ERR_FORMAT: return "format";
    case K3_ERR_CONFIG: return "config";
    case K3_ERR_TENSOR: return "tensor";
    case K3_ERR_OUT_OF_MEMORY: return "out-of-memory";
    case K3_ERR_BUDGET: return "budget";
    case K3_ERR_CONTEXT_FULL: return "context-full";
    case K3_ERR_TOKEN: return "token";
    case K3_ERR_TOKENIZER: return "tokenizer";
    case K3_ERR_STATE: return "state";
    case K3_ERR_CANCELLED: return "cancelled";
    case K3_ERR_EXPERT_READ: return "expert-read";
    case K3_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}
