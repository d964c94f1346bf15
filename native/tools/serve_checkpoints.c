/* serve_checkpoints.c - prefill with checkpoints for `k3 serve`: the mirror of the
 * prefixes the context holds checkpointed (server.mirror), where a prompt can resume from
 * it, and the prefill that syncs the context to the prompt and checkpoints its boundaries.
 * Separate from cmd_serve.c because it is the one part of serving that decides what the
 * engine recomputes; it runs only while its request holds the engine, so it takes no lock.
 *
 * The same idea as the language server's EngineSession.prefill (server/engine/runner.ts):
 * a mirror of the checkpointed prefixes says where a prompt can resume, the engine decides
 * what it actually reuses (k3_sync), and the named boundaries are checkpointed on the way.
 * Here it runs in one piece under the queue; there in scheduler slices. */
#include <stdlib.h>
#include <string.h>

#include "serve_checkpoints.h"

static uint64_t prefix_hash(const int32_t *ids, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) {
        const uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xFF;
            h *= 1099511628211ULL;
        }
    }
    return h;
}

static void mirror_add(server *s, const int32_t *ids, int n) {
    const uint64_t h = prefix_hash(ids, n);
    for (int i = 0; i < s->n_mirror; i++)
        if (s->mirror[i].len == n && s->mirror[i].hash == h)
            return;
    s->mirror[s->mirror_next].len = n;
    s->mirror[s->mirror_next].hash = h;
    s->mirror_next = (s->mirror_next + 1) % MIRRORED_CHECKPOINTS;
    if (s->n_mirror < MIRRORED_CHECKPOINTS)
        s->n_mirror++;
}

/* The longest prefix of ids the context can resume from, as far as we know: the live
 * sequence when it is a prefix of ids, or a checkpointed prefix. The engine decides what
 * it actually reuses. */
static int resume_point(server *s, const int32_t *ids, int n) {
    int best = 0;
    const int live = k3_context_length(s->ctx);
    if (live <= n && !memcmp(k3_context_tokens(s->ctx), ids, sizeof *ids * (size_t)live))
        best = live;
    for (int i = 0; i < s->n_mirror; i++) {
        const int len = s->mirror[i].len;
        if (len > best && len <= n && prefix_hash(ids, len) == s->mirror[i].hash)
            best = len;
    }
    return best;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

k3_status serve_prefill(server *s, const int32_t *ids, int n, int *bounds, int n_bounds, int *reused) {
    if (n_bounds > 0)
        qsort(bounds, (size_t)n_bounds, sizeof *bounds, cmp_int);
    const int start = resume_point(s, ids, n);
    int first = -1, r = 0, at = start;
    k3_status st;
    if (start > 0) {
        if ((st = k3_sync(s->ctx, ids, start, &r)) != K3_OK)
            return st;
        first = r;
    }
    for (int i = 0; i <= n_bounds; i++) {
        const int b = i < n_bounds ? bounds[i] : n;
        if (b <= at || b > n)
            continue;
        if ((st = k3_sync(s->ctx, ids, b, &r)) != K3_OK)
            return st;
        if (first < 0)
            first = r;
        if ((st = k3_checkpoint(s->ctx)) != K3_OK)
            return st;
        mirror_add(s, ids, b);
        at = b;
    }
    if (at == start) { /* the whole prompt was held already: keep its end checkpointed */
        if ((st = k3_checkpoint(s->ctx)) != K3_OK)
            return st;
        mirror_add(s, ids, n);
    }
    *reused = first < 0 ? 0 : first;
    return K3_OK;
}
