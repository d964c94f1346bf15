/* model.c - a model's lifecycle and the public k3_model handle of k3.h: opening a
 * checkpoint under memory params (config, shards, binding by weights.c, plan inputs), the
 * refusal of a model part MemAvailable cannot hold, starting the owned trunk and the expert
 * cache, freeing; planning a checkpoint without opening it (model_survey, model_plan);
 * its dimensions and memory counters; and the model that stops being the one loaded when a
 * shard changes on disk under it (model_check_files, model_fault). It knows no tensor
 * names (weights.c) and no layer order (forward.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "k3.h"
#include "model.h"
#include "safetensors.h"

void k3_model_params_default(k3_model_params *p) {
    p->trunk_bytes = -1;
    p->expert_cache_bytes = -1;
    p->io_threads = 2;
    p->reads = K3_READS_AUTO;
    p->fault_expert_read = 0;
    p->expert_prefetch = 0;
    p->progress = NULL;
    p->progress_user = NULL;
}

static k3_status check_params(const k3_model_params *p, k3_error *err) {
    if (p && (p->io_threads < 1 || p->io_threads > 16 || p->fault_expert_read < 0 || p->reads < K3_READS_AUTO ||
              p->reads > K3_READS_BUFFERED || p->expert_prefetch < 0 || p->expert_prefetch > 1))
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "model parameters: io_threads %d (1..16), reads %d (0 auto, 1 direct, 2 buffered), "
                         "fault_expert_read %ld, expert_prefetch %d (0 or 1)",
                         p->io_threads, p->reads, p->fault_expert_read, p->expert_prefetch);
    return K3_OK;
}

/* Everything up to the budget-sized allocations: config, index, binding (weights.c), plan
 * inputs. */
static k3_status open_tables(const char *dir, const k3_model_params *params, int dry, model **out, k3_error *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "model: out of memory");
    k3_model_params_default(&m->params);
    if (params)
        m->params = *params;
    pthread_mutex_init(&m->stream_lock, NULL);
    pthread_mutex_init(&m->stats_lock, NULL);
    m->locks_ready = 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    k3_status s = config_load(path, &m->config, err);
    if (s == K3_OK) {
        weights_set_dims(m);
        /* forward.c mixes at most 62 residual candidates per site. */
        if (m->config.n_attn_res_blocks + 2 > 62)
            s = error_set(err, K3_ERR_CONFIG, "%s: %d attention-residual blocks (num_hidden_layers %d / "
                          "attn_res_block_size %d); this engine supports at most 60",
                          path, m->config.n_attn_res_blocks, m->n_layers, m->attn_res_block);
    }
    if (s == K3_OK)
        s = st_open(dir, &m->tensors, err);
    if (s == K3_OK) {
        m->layers = calloc((size_t)m->n_layers, sizeof *m->layers);
        if (m->params.expert_cache_bytes < 0)
            m->experts = calloc((size_t)m->config.n_moe_layers * (m->moe.n_experts ? m->moe.n_experts : 1) + 1,
                                sizeof *m->experts);
        if (!m->layers || (m->params.expert_cache_bytes < 0 && !m->experts))
            s = error_set(err, K3_ERR_OUT_OF_MEMORY, "model: out of memory for %d layers", m->n_layers);
    }
    if (s == K3_OK)
        s = trunk_new(m->tensors, m->n_layers, m->layers, sizeof(model_layer), &m->trunk, err);
    if (s == K3_OK)
        s = expert_cache_new(m->tensors, m->config.n_moe_layers, m->moe.n_experts, &m->cache, err);
    if (s == K3_OK)
        s = weights_bind(m, dry, err);
    if (s != K3_OK) {
        model_free(m);
        return s;
    }
    *out = m;
    return K3_OK;
}

k3_status model_survey(const char *dir, const k3_model_params *params, model **out, k3_error *err) {
    return open_tables(dir, params, 1, out, err);
}

/* Whether streamed reads go around the page cache (k3_reads in k3.h), and if so opens the
 * shards' O_DIRECT descriptors: 0 when none opens (the file system refuses). */
static int reads_direct(model *m, const k3_plan *plan) {
    int direct = m->params.reads == K3_READS_DIRECT;
    if (m->params.reads == K3_READS_AUTO) {
        uint64_t streams = m->params.expert_cache_bytes >= 0 ? m->inputs.expert_pool_bytes : 0;
        if (m->params.trunk_bytes >= 0)
            streams += plan->dense_weights - plan->trunk + (uint64_t)plan->ring_slots * plan->ring_slot_bytes;
        direct = plan->available > 0 && streams > 0 &&
                 (plan->model_total >= plan->available || streams > plan->available - plan->model_total);
    }
    const int streaming = m->params.expert_cache_bytes >= 0 || m->params.trunk_bytes >= 0;
    return direct && streaming && st_open_direct(m->tensors) > 0;
}

/* Refuses a model part that MemAvailable cannot hold, then starts (or drops) the trunk and
 * the expert cache. */
static k3_status start_streaming(model *m, k3_error *err) {
    k3_plan plan;
    k3_status s = model_plan(m, &m->inputs, &m->params, NULL, 0, &plan, err);
    if (s != K3_OK)
        return s;
    if (plan.available && plan.model_total > plan.available) {
        char need[32], have[32], gap[32], tr[32], el[32], ec[32];
        return error_set(err, K3_ERR_BUDGET,
                         "the model needs %s (trunk %s, embed + lm_head %s, expert cache %s, vectors and index %.1f MB) "
                         "and this machine has %s available: a shortfall of %s",
                         plan_human(plan.model_total, need, sizeof need), plan_human(plan.trunk, tr, sizeof tr),
                         plan_human(plan.embed_lm_head, el, sizeof el), plan_human(plan.expert_cache, ec, sizeof ec),
                         (double)(plan.vectors + plan.index) / 1e6, plan_human(plan.available, have, sizeof have),
                         plan_human(plan.model_total - plan.available, gap, sizeof gap));
    }
    const int direct = reads_direct(m, &plan);
    /* The cache first: the trunk copies the layer templates, which must name it. */
    if (m->params.expert_cache_bytes < 0 || m->inputs.experts == 0) {
        expert_cache_free(m->cache);
        m->cache = NULL;
    } else {
        int slots;
        if ((s = plan_expert_slots(&m->inputs, (uint64_t)m->params.expert_cache_bytes, &slots, err)) != K3_OK ||
            (s = expert_cache_start(m->cache, slots, m->params.io_threads, direct, m->params.fault_expert_read,
                                    err)) != K3_OK)
            return s;
        for (int i = 0; i < m->n_layers; i++)
            m->layers[i].moe.cache = m->cache;
    }
    if (m->params.trunk_bytes < 0) {
        trunk_free(m->trunk);
        m->trunk = NULL;
    } else {
        trunk_layout layout;
        if ((s = plan_trunk_layout(&m->inputs, (uint64_t)m->params.trunk_bytes, &layout, err)) != K3_OK ||
            (s = trunk_start(m->trunk, &layout, direct, m->params.progress, m->params.progress_user, err)) != K3_OK)
            return s;
    }
    return K3_OK;
}

k3_status model_load(const char *dir, const k3_model_params *params, model **out, k3_error *err) {
    model *m;
    k3_status s = open_tables(dir, params, 0, &m, err);
    if (s != K3_OK)
        return s;
    if ((s = start_streaming(m, err)) != K3_OK) {
        model_free(m);
        return s;
    }
    *out = m;
    return K3_OK;
}

void model_free(model *m) {
    if (!m)
        return;
    trunk_free(m->trunk);
    expert_cache_free(m->cache);
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->experts);
    st_close(m->tensors);
    if (m->locks_ready) {
        pthread_mutex_destroy(&m->stream_lock);
        pthread_mutex_destroy(&m->stats_lock);
    }
    free(m);
}

/* Bytes a context's buffers take for batches of `batch`: forward scratch, logits staging
 * (one row more for the last logits), the token list. */
static uint64_t context_buffers(const model *m, int batch, int max_context) {
    return 4u * (uint64_t)forward_scratch_floats(m, batch, max_context) +
           4u * (uint64_t)(forward_logit_rows(batch) + 1) * (uint64_t)m->vocab + 4u * (uint64_t)max_context;
}

/* k3_generate's longest verify pass: 16 drafts and the pending token (k3.h, spec_max). */
#define PLAN_VERIFY_POSITIONS 17

static k3_status plan_at_batch(const model *m, const plan_inputs *in, const k3_model_params *p,
                               const k3_context_params *c, int batch, uint64_t available, k3_plan *out, k3_error *err) {
    /* The buffers count what any context may allocate the first time it speculates
     * (verify.c): a copy of the state to roll back to and the journal of the longest verify
     * pass (at K3's width 434 MB and 17 x 20 MB). */
    const uint64_t verify = 4u * (uint64_t)(forward_kda_state_floats(m) + forward_journal_floats(m, PLAN_VERIFY_POSITIONS));
    const plan_context ctx = {
        c->max_context,
        batch,
        4u * (uint64_t)forward_kda_state_floats(m),
        4u * (uint64_t)forward_mla_cache_floats(m, c->max_context),
        context_buffers(m, batch, c->max_context) + verify,
    };
    return plan_make(in, p, &ctx, available, out, err);
}

/* K3_BATCH_AUTO: the largest batch whose buffers fit what MemAvailable leaves after the
 * plan at the default batch and a margin (the auto preset's: 1 GiB + 5 %), where passes
 * read weights; the default where they read none, or MemAvailable is unknown. The model's
 * budgets are subtracted even when it is open (and some of them already out of
 * MemAvailable): a conservative batch, never an over-committed one. */
static int sized_batch(const model *m, const k3_plan *base, int max_context) {
    const int streams = base->ring_slots > 0 || (!base->experts_mapped && base->expert_slots < base->experts);
    int hi = max_context < FORWARD_MAX_SIZED_BATCH ? max_context : FORWARD_MAX_SIZED_BATCH;
    if (!streams || !base->available || hi <= FORWARD_DEFAULT_BATCH)
        return FORWARD_DEFAULT_BATCH;
    const uint64_t margin = ((uint64_t)1 << 30) + base->available / 20;
    if (base->total + margin >= base->available)
        return FORWARD_DEFAULT_BATCH; /* the plan says whether even that fits */
    const uint64_t room = base->available - base->total - margin;
    const uint64_t at_default = context_buffers(m, FORWARD_DEFAULT_BATCH, max_context);
    int lo = FORWARD_DEFAULT_BATCH; /* fits; buffers grow with the batch */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (context_buffers(m, mid, max_context) - at_default <= room)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

k3_status model_plan(const model *m, const plan_inputs *in, const k3_model_params *mp, const k3_context_params *cp,
                     uint64_t available, k3_plan *out, k3_error *err) {
    k3_model_params p;
    k3_model_params_default(&p);
    if (mp)
        p = *mp;
    k3_context_params c;
    k3_context_params_default(&c);
    if (cp)
        c = *cp;
    const int sized = c.batch == K3_BATCH_AUTO;
    k3_status s = plan_at_batch(m, in, &p, &c, sized ? FORWARD_DEFAULT_BATCH : c.batch, available, out, err);
    if (s == K3_OK && sized) {
        const int batch = sized_batch(m, out, c.max_context);
        if (batch != FORWARD_DEFAULT_BATCH)
            s = plan_at_batch(m, in, &p, &c, batch, out->available, out, err);
    }
    if (s == K3_OK) {
        out->batch_sized = sized;
        /* The slope over a wide span: the MLA scores and logits rows stop growing early. */
        const int span = FORWARD_MAX_SIZED_BATCH;
        out->batch_token_bytes =
            (context_buffers(m, span + 1, c.max_context) - context_buffers(m, 1, c.max_context)) / (uint64_t)span;
    }
    return s;
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
        s = model_plan(m, &m->inputs, params, cp, 0, out, &err);
    model_free(m);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    return s;
}

void k3_model_plan(const k3_model *km, const k3_context_params *cp, k3_plan *out) {
    const model *m = km->m;
    /* The budgets were accepted at open, so planning them again cannot fail. */
    model_plan(m, &m->inputs, &m->params, cp, 0, out, NULL);
}

k3_status model_check_context(const model *m, const k3_context_params *cp, k3_error *err) {
    k3_plan plan;
    const k3_status s = model_plan(m, &m->inputs, &m->params, cp, 0, &plan, err);
    if (s != K3_OK || !plan.available || plan.context_total <= plan.available)
        return s;
    char need[32], st[32], kv[32], buf[32], have[32], gap[32], tok[32];
    return error_set(err, K3_ERR_BUDGET,
                     "a context of %d positions needs %s (recurrent state %s, KV cache %s, buffers %s for a prefill "
                     "batch of %d at %s per token) and this machine has %s available: a shortfall of %s; ask for a "
                     "shorter context or a smaller batch",
                     plan.max_context, plan_human(plan.context_total, need, sizeof need),
                     plan_human(plan.recurrent_state, st, sizeof st), plan_human(plan.kv_cache, kv, sizeof kv),
                     plan_human(plan.buffers, buf, sizeof buf), plan.batch,
                     plan_human(plan.batch_token_bytes, tok, sizeof tok), plan_human(plan.available, have, sizeof have),
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
        out->expert_guesses = c.guesses;
        out->expert_guesses_routed = c.guesses_routed;
        out->expert_early_reads = c.early_reads;
        out->expert_early_bytes = c.early_bytes;
        out->expert_early_used = c.early_used;
        out->expert_early_used_seconds = c.early_used_seconds;
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
