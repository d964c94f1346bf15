/* plan.c - memory plans and owned-trunk placement (see plan.h). */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "io.h"

const char *plan_human(uint64_t bytes, char *buf, size_t size) {
    const double b = (double)bytes;
    if (b >= 1e9)
        snprintf(buf, size, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, size, "%.1f MB", b / 1e6);
    else
        snprintf(buf, size, "%.1f kB", b / 1e3);
    return buf;
}

k3_status plan_trunk_layout(const plan_inputs *in, uint64_t budget, trunk_layout *out, k3_error *err) {
    const int n = in->n_layers;
    memset(out, 0, sizeof *out);
    uint64_t total = 0, largest = 0;
    int largest_layer = 0;
    for (int l = 0; l < n; l++) {
        total += in->layer_bytes[l];
        if (in->layer_bytes[l] > largest) {
            largest = in->layer_bytes[l];
            largest_layer = l;
        }
    }
    if (budget >= total) {
        for (int l = 0; l < n; l++)
            out->pinned[l] = 1;
        return K3_OK;
    }
    if (budget < largest) {
        char b1[32], b2[32], b3[32];
        return error_set(err, K3_ERR_BUDGET,
                         "trunk budget %s is below the floor of %s: layer %d, the largest, must fit in a ring slot "
                         "(the whole trunk is %s)",
                         plan_human(budget, b1, sizeof b1), plan_human(largest, b2, sizeof b2), largest_layer,
                         plan_human(total, b3, sizeof b3));
    }
    /* Layers by size, largest first (ties: lower index), so pinning the first k leaves the
     * smallest possible ring slot: the size of layer order[k]. */
    int order[K3_CONFIG_MAX_LAYERS];
    for (int l = 0; l < n; l++)
        order[l] = l;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && in->layer_bytes[order[j]] > in->layer_bytes[order[j - 1]]; j--) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int ring = 2; ring >= 1; ring--) {
        uint64_t pinned = 0;
        int best_k = -1;
        for (int k = 0; k < n; k++) {
            if (pinned + (uint64_t)ring * in->layer_bytes[order[k]] <= budget)
                best_k = k;
            pinned += in->layer_bytes[order[k]];
        }
        if (best_k < 0)
            continue;
        for (int k = 0; k < best_k; k++)
            out->pinned[order[k]] = 1;
        out->ring_slots = ring;
        out->slot_bytes = in->layer_bytes[order[best_k]];
        return K3_OK;
    }
    return error_set(err, K3_ERR_INTERNAL, "trunk placement: no layout for a budget of %llu bytes",
                     (unsigned long long)budget);
}

k3_status plan_expert_slots(const plan_inputs *in, uint64_t budget, int *slots, k3_error *err) {
    const uint64_t n = in->expert_slot_bytes ? budget / in->expert_slot_bytes : 0;
    if (n < (uint64_t)in->top_k) {
        char b1[32], b2[32], b3[32];
        return error_set(err, K3_ERR_BUDGET,
                         "expert cache budget %s is below the floor of %s: it holds %llu slots of %s, and one token's "
                         "top-%d routing needs %d",
                         plan_human(budget, b1, sizeof b1),
                         plan_human((uint64_t)in->top_k * in->expert_slot_bytes, b2, sizeof b2), (unsigned long long)n,
                         plan_human(in->expert_slot_bytes, b3, sizeof b3), in->top_k, in->top_k);
    }
    *slots = (int)(n < (uint64_t)in->experts ? n : (uint64_t)in->experts);
    return K3_OK;
}

k3_status plan_make(const plan_inputs *in, const k3_model_params *mp, const plan_context *ctx, uint64_t available,
                    k3_plan *out, k3_error *err) {
    const k3_model_params p = *mp;
    memset(out, 0, sizeof *out);
    out->layers = in->n_layers;
    out->max_context = ctx->max_context;
    out->batch = ctx->batch;
    for (int l = 0; l < in->n_layers; l++) {
        out->dense_weights += in->layer_bytes[l];
        if (in->layer_bytes[l] > out->trunk_floor)
            out->trunk_floor = in->layer_bytes[l];
    }
    out->expert_slot_bytes = in->expert_slot_bytes;
    out->expert_pool = in->expert_pool_bytes;
    out->experts = in->experts;
    out->cache_floor = (uint64_t)in->top_k * in->expert_slot_bytes;

    out->trunk_mapped = p.trunk_bytes < 0;
    if (out->trunk_mapped) {
        out->trunk = in->dense_file_bytes;
        out->layers_pinned = in->n_layers;
        out->embed_lm_head = in->embed_bytes + in->lm_head_bytes;
    } else {
        trunk_layout tl;
        const k3_status s = plan_trunk_layout(in, (uint64_t)p.trunk_bytes, &tl, err);
        if (s != K3_OK)
            return s;
        for (int l = 0; l < in->n_layers; l++)
            if (tl.pinned[l]) {
                out->layers_pinned++;
                out->trunk += in->layer_bytes[l];
            }
        out->ring_slots = tl.ring_slots;
        out->ring_slot_bytes = tl.slot_bytes;
        out->trunk += (uint64_t)tl.ring_slots * tl.slot_bytes;
        out->embed_lm_head = in->lm_head_bytes;
    }
    out->experts_mapped = p.expert_cache_bytes < 0 || in->experts == 0;
    if (out->experts_mapped) {
        out->expert_cache = in->expert_pool_bytes;
    } else {
        const k3_status s = plan_expert_slots(in, (uint64_t)p.expert_cache_bytes, &out->expert_slots, err);
        if (s != K3_OK)
            return s;
        out->expert_cache = (uint64_t)out->expert_slots * in->expert_slot_bytes;
    }
    out->vectors = in->vector_bytes;
    out->index = in->index_bytes;
    /* Readers that may go around the page cache each hold a bounce buffer (io.h): one per
     * expert reader, one for the ring's. Counted whenever they may be allocated. */
    if (p.reads != K3_READS_BUFFERED)
        out->index += IO_BOUNCE_BYTES * ((out->experts_mapped ? 0u : (uint64_t)p.io_threads) +
                                         (out->ring_slots > 0 ? 1u : 0u));

    out->recurrent_state = ctx->recurrent_state;
    out->kv_cache = ctx->kv_cache;
    out->buffers = ctx->buffers;

    out->model_total = out->trunk + out->embed_lm_head + out->vectors + out->index + out->expert_cache;
    out->context_total = out->recurrent_state + out->kv_cache + out->buffers;
    out->total = out->model_total + out->context_total;
    out->available = available ? available : io_mem_available();
    out->fits = out->available == 0 || out->total <= out->available;
    return K3_OK;
}
