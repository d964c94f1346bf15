/* model.c - the public k3_model handle of k3.h: opening a checkpoint under memory params
 * (model_load in weights.c does the binding), planning one without opening it, reading
 * its dimensions and its memory counters; and the model that stops being the one loaded
 * when a shard changes on disk under it (model_check_files, model_fault). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3.h"
#include "model.h"
#include "safetensors.h"

void k3_model_params_default(k3_model_params *p) {
    p->trunk_bytes = -1;
    p->expert_cache_bytes = -1;
    p->io_threads = 2;
    p->reads = K3_READS_AUTO;
    p->fault_expert_read = 0;
    p->progress = NULL;
    p->progress_user = NULL;
}

static k3_status check_params(const k3_model_params *p, k3_error *err) {
    if (p && (p->io_threads < 1 || p->io_threads > 16 || p->fault_expert_read < 0 || p->reads < K3_READS_AUTO ||
              p->reads > K3_READS_BUFFERED))
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "model parameters: io_threads %d (1..16), reads %d (0 auto, 1 direct, 2 buffered), "
                         "fault_expert_read %ld",
                         p->io_threads, p->reads, p->fault_expert_read);
    return K3_OK;
}

k3_status k3_model_open(const char *dir, const k3_model_params *params, k3_model **out, char *detail,
                        size_t detail_size) {
    k3_error err = {K3_OK, ""};
    *out = NULL;
    k3_model *km = NULL;
    k3_status s = check_params(params, &err);
    if (s == K3_OK && !(km = calloc(1, sizeof *km)))
        s = error_set(&err, K3_ERR_OUT_OF_MEMORY, "model handle: out of memory");
    if (s == K3_OK)
        s = model_load(dir, params, &km->m, &err);
    if (s == K3_OK) {
        const char *skip = getenv("K3_TEST_SKIP_FILE_CHECK");
        km->m->skip_file_check = skip && skip[0] == '1';
    }
    if (s != K3_OK) {
        free(km);
        error_copy_detail(&err, detail, detail_size);
        return s;
    }
    *out = km;
    return K3_OK;
}

void k3_model_close(k3_model *km) {
    if (km) {
        model_free(km->m);
        free(km);
    }
}

int k3_model_vocab_size(const k3_model *km) {
    return km->m->vocab;
}

int k3_model_hidden_size(const k3_model *km) {
    return km->m->hidden;
}

int k3_model_layer_count(const k3_model *km) {
    return km->m->n_layers;
}

k3_status k3_plan_model(const char *dir, const k3_model_params *params, const k3_context_params *cp, k3_plan *out,
                        char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    model *m = NULL;
    k3_status s = check_params(params, &err);
    if (s == K3_OK)
        s = model_survey(dir, params, &m, &err);
    if (s == K3_OK)
        s = plan_make(m, &m->inputs, params, cp, 0, out, &err);
    model_free(m);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    return s;
}

void k3_model_plan(const k3_model *km, const k3_context_params *cp, k3_plan *out) {
    const model *m = km->m;
    /* The budgets were accepted at open, so planning them again cannot fail. */
    plan_make(m, &m->inputs, &m->params, cp, 0, out, NULL);
}

k3_status model_check_context(const model *m, const k3_context_params *cp, k3_error *err) {
    k3_plan plan;
    const k3_status s = plan_make(m, &m->inputs, &m->params, cp, 0, &plan, err);
    if (s != K3_OK || !plan.available || plan.context_total <= plan.available)
        return s;
    char need[32], st[32], kv[32], buf[32], have[32], gap[32];
    return error_set(err, K3_ERR_BUDGET,
                     "a context of %d positions needs %s (recurrent state %s, KV cache %s, buffers %s) and this machine "
                     "has %s available: a shortfall of %s; ask for a shorter context",
                     plan.max_context, plan_human(plan.context_total, need, sizeof need),
                     plan_human(plan.recurrent_state, st, sizeof st), plan_human(plan.kv_cache, kv, sizeof kv),
                     plan_human(plan.buffers, buf, sizeof buf), plan_human(plan.available, have, sizeof have),
                     plan_human(plan.context_total - plan.available, gap, sizeof gap));
}

void k3_model_memory_counters(const k3_model *km, k3_memory_counters *out) {
    model *m = km->m;
    *out = (k3_memory_counters){0};
    if (m->cache) {
        expert_cache_counters c;
        expert_cache_get_counters(m->cache, &c);
        out->expert_requests = c.requests;
        out->expert_retained = c.retained;
        out->expert_evictions = c.evictions;
        out->expert_reads = c.reads;
        out->expert_bytes_read = c.bytes_read;
        out->direct_bytes_read += c.direct_bytes;
        out->expert_read_seconds = c.read_seconds;
        out->expert_wait_seconds = c.wait_seconds;
    }
    if (m->trunk) {
        trunk_counters c;
        trunk_get_counters(m->trunk, &c);
        out->trunk_layer_reads = c.layer_reads;
        out->trunk_bytes_read = c.bytes_read;
        out->direct_bytes_read += c.direct_bytes;
        out->trunk_read_seconds = c.read_seconds;
        out->trunk_wait_seconds = c.wait_seconds;
        out->trunk_pinned_bytes = c.pinned_bytes;
        out->trunk_pinned_seconds = c.pinned_seconds;
    }
    pthread_mutex_lock(&m->stats_lock);
    out->forward_passes = m->forward_passes;
    out->forward_seconds = m->forward_seconds;
    pthread_mutex_unlock(&m->stats_lock);
}

/* Keeps the first change found (under stats_lock) and returns the kept one. */
static k3_status keep_change(model *m, const k3_error *found, k3_error *err) {
    pthread_mutex_lock(&m->stats_lock);
    if (!atomic_load(&m->changed)) {
        m->changed_err = *found;
        atomic_store(&m->changed, 1);
    }
    const k3_error kept = m->changed_err;
    pthread_mutex_unlock(&m->stats_lock);
    if (err)
        *err = kept;
    return kept.status;
}

static k3_status repeat_change(model *m, k3_error *err) {
    pthread_mutex_lock(&m->stats_lock);
    const k3_error kept = m->changed_err;
    pthread_mutex_unlock(&m->stats_lock);
    if (err)
        *err = kept;
    return kept.status;
}

k3_status model_check_files(model *m, k3_error *err) {
    if (atomic_load(&m->changed))
        return repeat_change(m, err);
    if (m->skip_file_check)
        return K3_OK;
    k3_error found = {K3_OK, ""};
    if (st_check_unchanged(m->tensors, &found) == K3_OK)
        return K3_OK;
    return keep_change(m, &found, err);
}

k3_status model_fault(model *m, const void *addr, k3_error *err) {
    uint64_t offset = 0;
    const int k = st_shard_of(m->tensors, addr, &offset);
    const st_shard *sh = st_shard_at(m->tensors, k);
    k3_error found = {K3_OK, ""};
    if (!sh) /* fault.c jumps only for the engine's mappings: another model's, never this one's */
        error_set(&found, K3_ERR_IO, "reading mapped weights failed (SIGBUS at an address outside this model's shards)");
    else if (st_check_unchanged(m->tensors, &found) != K3_OK)
        error_wrap(&found, "reading the mapped weights of %s at offset %llu failed (SIGBUS)", sh->file,
                   (unsigned long long)offset);
    else
        error_set(&found, K3_ERR_IO,
                  "reading the mapped weights of %s at offset %llu failed (SIGBUS: the file system could not supply "
                  "the page; the file is still %llu bytes, as when loaded): load the model again",
                  sh->path, (unsigned long long)offset, (unsigned long long)sh->size);
    return keep_change(m, &found, err);
}

k3_status k3_model_check(k3_model *km, char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    const k3_status s = model_check_files(km->m, &err);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    else if (detail && detail_size)
        detail[0] = '\0';
    return s;
}
