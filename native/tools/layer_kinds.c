/* layer_kinds.c - per-layer-kind time and counters from the observer's sites (layer_kinds.h).
 *
 * A layer's span runs from the previous layer's end (or the embedding site) to its own FFN
 * output site, so it holds its residual mixes, norms, mixer and FFN; the lm_head span runs
 * from the last layer's end to the logits site. The embedding, the residual add after the
 * last FFN output and anything after the logits (the argmax) belong to no kind. */
#include "layer_kinds.h"

#include <string.h>
#include <time.h>

const char *const layer_kind_names[LAYER_KINDS] = {"dense", "kda+moe", "mla+moe", "lm_head"};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

void layer_kinds_reset(layer_kinds *lk) {
    memset(lk, 0, sizeof *lk);
}

static void span_start(layer_kinds *lk) {
    k3_counters_get(&lk->c0);
    lk->t0 = now_s();
}

static void span_end(layer_kinds *lk, layer_kind k) {
    const double t = now_s();
    k3_counters c;
    k3_counters_get(&c);
    layer_kind_totals *tot = &lk->kind[k];
    tot->seconds += t - lk->t0;
    tot->multiply_adds += c.multiply_adds - lk->c0.multiply_adds;
    tot->weight_bytes += c.weight_bytes_read - lk->c0.weight_bytes_read;
    tot->spans++;
    lk->c0 = c;
    lk->t0 = now_s(); /* the next span starts after this bookkeeping */
}

void layer_kinds_observe(void *user, const k3_activation *a) {
    layer_kinds *lk = user;
    switch (a->site) {
    case K3_SITE_EMBED:
        lk->passes++;
        span_start(lk);
        break;
    case K3_SITE_ATTN_INPUT:
        lk->mixer_kda = a->kind && !strcmp(a->kind, "kda");
        break;
    case K3_SITE_FFN_OUTPUT:
        span_end(lk, a->kind && !strcmp(a->kind, "moe")
                         ? (lk->mixer_kda ? LAYER_KIND_KDA_MOE : LAYER_KIND_MLA_MOE)
                         : LAYER_KIND_DENSE);
        break;
    case K3_SITE_LOGITS:
        span_end(lk, LAYER_KIND_LM_HEAD);
        break;
    default:
        break;
    }
}

long layer_kinds_per_pass(const layer_kinds *lk, layer_kind k) {
    /* Rounded up: a prefill in several passes computes logits in its last one only. */
    return lk->passes > 0 ? (lk->kind[k].spans + lk->passes - 1) / lk->passes : 0;
}
