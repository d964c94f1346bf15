/* presets.c - the named memory presets of k3.h and the "auto" preset: the table the CLI's
 * --list-presets and the editor's picker show, each preset's plan for the full-scale
 * release (computed from the release's config, since no full checkpoint is needed to
 * plan one), and budgets sized from MemAvailable, trunk first. It allocates no weights and
 * reads no weight bytes; the plans come from plan.c.
 *
 * Why trunk first: per token the engine reads every streamed trunk byte, but only the
 * selected experts (16 of 896 per layer), and K3's router is trained to use experts
 * evenly, which defeats an LRU until the cache holds a large share of the pool. A
 * gigabyte pinned in the trunk removes a gigabyte of reads from every forward pass; a
 * gigabyte of expert cache removes far less. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "k3.h"
#include "model.h"
#include "plan.h"
#include "presets.h"

#define GB 1000000000LL

/* full_scale_peak_rss: measured by the seed driver (shared/seed/k3_run.c, its K3_PRESETS
 * table) with the same budgets on the released checkpoint; this engine has not been run
 * at full scale yet, and its own forecast is full_scale_plan. */
static k3_preset presets[] = {
    {"laptop", 3 * GB, 1 * GB, 8200000000ULL, 0,
     "the floor: one ring slot, trunk reads do not overlap compute; runs, slowly"},
    {"desktop", 16 * GB, 10 * GB, 31900000000ULL, 0, "9 of 93 layers pinned, the rest streamed through two ring slots"},
    {"workstation", 60 * GB, 30 * GB, 95500000000ULL, 0, "44 of 93 layers pinned; the expert cache starts to matter"},
    {"server", 110 * GB, 13 * GB, 128000000000ULL, 0, "all 93 layers pinned: only experts are read. Fastest per GB"},
    {"max", 110 * GB, 109 * GB, 224000000000ULL, 0, "all 93 layers pinned and a large expert cache"},
};
enum { N_PRESETS = (int)(sizeof presets / sizeof presets[0]) };

/* The released text_config (k3-architecture §1.2): 93 layers, MLA at 1-based 4, 8, ..., 92
 * and 93, MXFP4 experts. Only the keys the engine reads. */
static void release_config_json(char *out, size_t size) {
    char kda[512] = "", full[256] = "";
    for (int l = 1; l <= 93; l++) {
        char *list = (l % 4 == 0 || l == 93) ? full : kda;
        const size_t len = strlen(list);
        snprintf(list + len, (list == kda ? sizeof kda : sizeof full) - len, "%s%d", len ? ", " : "", l);
    }
    snprintf(out, size,
             "{\"activation_situ_beta\": 4.0, \"activation_situ_linear_beta\": 25.0, \"attn_res_block_size\": 12,"
             " \"bos_token_id\": 163584, \"eos_token_id\": 163586, \"pad_token_id\": 163839,"
             " \"first_k_dense_replace\": 1, \"hidden_act\": \"situ\", \"hidden_size\": 7168,"
             " \"intermediate_size\": 33792, \"kv_lora_rank\": 512, \"latent_moe_use_norm\": true,"
             " \"linear_attn_config\": {\"full_attn_layers\": [%s], \"head_dim\": 128, \"kda_layers\": [%s],"
             " \"num_heads\": 96, \"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true, \"gate_lower_bound\": -5.0},"
             " \"mla_use_nope\": true, \"mla_use_output_gate\": true, \"moe_intermediate_size\": 3072,"
             " \"moe_layer_freq\": 1, \"moe_renormalize\": true, \"moe_router_activation_func\": \"sigmoid\","
             " \"num_attention_heads\": 96, \"num_expert_group\": 1, \"num_experts\": 896, \"num_experts_per_token\": 16,"
             " \"num_hidden_layers\": 93, \"num_key_value_heads\": 96, \"num_shared_experts\": 2, \"q_lora_rank\": 1536,"
             " \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05,"
             " \"routed_expert_hidden_size\": 3584, \"routed_scaling_factor\": 1.0, \"tie_word_embeddings\": false,"
             " \"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"v_head_dim\": 128, \"vocab_size\": 163840,"
             " \"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\","
             " \"config_groups\": {\"group_0\": {\"format\": \"mxfp4-pack-quantized\", \"targets\": [\"Linear\"],"
             " \"weights\": {\"num_bits\": 4, \"group_size\": 32, \"type\": \"float\", \"strategy\": \"group\","
             " \"symmetric\": true}, \"input_activations\": null}}}}",
             full, kda);
}

k3_status presets_release_model(model **out, k3_error *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "presets: out of memory");
    char json[8192];
    release_config_json(json, sizeof json);
    const k3_status s = config_parse(json, strlen(json), "the release's config", &m->config, err);
    if (s != K3_OK) {
        model_free(m);
        return s;
    }
    weights_set_dims(m);
    m->kda.gate_rank = m->config.kda_head_dim; /* f_a_proj rows, as released */
    weights_inputs_from_config(&m->config, &m->inputs);
    *out = m;
    return K3_OK;
}

k3_status presets_release_plan(const k3_model_params *mp, const k3_context_params *cp, k3_plan *out, k3_error *err) {
    model *m;
    k3_status s = presets_release_model(&m, err);
    if (s == K3_OK) {
        s = model_plan(m, &m->inputs, mp, cp, 1, out, err);
        out->available = 0;
        out->fits = 1;
    }
    model_free(m);
    return s;
}

static pthread_once_t plans_once = PTHREAD_ONCE_INIT;

static void compute_full_scale_plans(void) {
    model *m;
    if (presets_release_model(&m, NULL) != K3_OK)
        return;
    for (int i = 0; i < N_PRESETS; i++) {
        k3_model_params p;
        k3_model_params_default(&p);
        p.trunk_bytes = presets[i].trunk_bytes;
        p.expert_cache_bytes = presets[i].expert_cache_bytes;
        k3_plan plan;
        if (model_plan(m, &m->inputs, &p, NULL, 1, &plan, NULL) == K3_OK)
            presets[i].full_scale_plan = plan.total;
    }
    model_free(m);
}

int k3_preset_count(void) {
    return N_PRESETS;
}

const k3_preset *k3_preset_at(int i) {
    if (i < 0 || i >= N_PRESETS)
        return NULL;
    pthread_once(&plans_once, compute_full_scale_plans);
    return &presets[i];
}

const k3_preset *k3_preset_find(const char *name) {
    for (int i = 0; name && i < N_PRESETS; i++)
        if (!strcmp(name, presets[i].name))
            return k3_preset_at(i);
    return NULL;
}

void k3_preset_apply(const k3_preset *p, k3_model_params *mp) {
    mp->trunk_bytes = p->trunk_bytes;
    mp->expert_cache_bytes = p->expert_cache_bytes;
}

k3_status k3_preset_auto(const char *dir, const k3_context_params *cp, uint64_t mem_available, k3_model_params *out,
                         k3_plan *plan_out, char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    model *m = NULL;
    k3_status s = dir ? model_survey(dir, NULL, &m, &err) : presets_release_model(&m, &err);
    const uint64_t avail = mem_available ? mem_available : io_mem_available();
    k3_plan floor_plan;
    if (s == K3_OK && !avail)
        s = error_set(&err, K3_ERR_BUDGET, "auto preset: MemAvailable cannot be read on this system; give the trunk "
                                           "and expert cache budgets explicitly");
    if (s == K3_OK) {
        /* The plan with the trunk all pinned and the cache at its floor: what every owned
         * layout needs besides its two budgets is its total minus those two. */
        const plan_inputs *in = &m->inputs;
        k3_model_params p;
        k3_model_params_default(&p);
        p.trunk_bytes = 0;
        for (int l = 0; l < in->n_layers; l++)
            p.trunk_bytes += (int64_t)in->layer_bytes[l];
        p.expert_cache_bytes = (int64_t)((uint64_t)in->top_k * in->expert_slot_bytes);
        s = model_plan(m, in, &p, cp, avail, &floor_plan, &err);
    }
    if (s == K3_OK) {
        const uint64_t reserve = floor_plan.total - floor_plan.trunk - floor_plan.expert_cache;
        const uint64_t margin = ((uint64_t)1 << 30) + avail / 20;
        const uint64_t floor = floor_plan.trunk_floor + floor_plan.cache_floor;
        const int64_t usable = (int64_t)avail - (int64_t)reserve - (int64_t)margin;
        if (usable < (int64_t)floor) {
            char a[32], r[32], g[32], v[32], u[48], f[32], t[32], c[32];
            if (usable > 0)
                snprintf(u, sizeof u, "%s remain", plan_human((uint64_t)usable, v, sizeof v));
            else
                snprintf(u, sizeof u, "nothing remains");
            s = error_set(&err, K3_ERR_BUDGET,
                          "auto preset: %s available; after %s for lm_head, vectors, index and a context of %d "
                          "positions, and a margin of %s, %s, below the floor of %s (trunk %s + expert cache %s)",
                          plan_human(avail, a, sizeof a), plan_human(reserve, r, sizeof r), floor_plan.max_context,
                          plan_human(margin, g, sizeof g), u, plan_human(floor, f, sizeof f),
                          plan_human(floor_plan.trunk_floor, t, sizeof t), plan_human(floor_plan.cache_floor, c, sizeof c));
        } else {
            /* Trunk first, up to every layer pinned; the expert cache gets the rest, up to the pool. */
            const uint64_t room = (uint64_t)usable;
            uint64_t trunk_budget = room - floor_plan.cache_floor;
            if (trunk_budget > floor_plan.dense_weights)
                trunk_budget = floor_plan.dense_weights;
            uint64_t cache = room - trunk_budget;
            const uint64_t all_experts = (uint64_t)floor_plan.experts * floor_plan.expert_slot_bytes;
            if (cache > all_experts && all_experts >= floor_plan.cache_floor)
                cache = all_experts;
            k3_model_params_default(out);
            out->trunk_bytes = (int64_t)trunk_budget;
            out->expert_cache_bytes = (int64_t)cache;
            if (plan_out)
                s = model_plan(m, &m->inputs, out, cp, avail, plan_out, &err);
        }
    }
    model_free(m);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    return s;
}

k3_status k3_preset_resolve(const char *name, const char *dir, const k3_context_params *cp, k3_model_params *mp,
                            char *detail, size_t detail_size) {
    if (name && !strcmp(name, "auto")) {
        k3_model_params sized;
        const k3_status s = k3_preset_auto(dir, cp, 0, &sized, NULL, detail, detail_size);
        if (s == K3_OK) {
            mp->trunk_bytes = sized.trunk_bytes;
            mp->expert_cache_bytes = sized.expert_cache_bytes;
        }
        return s;
    }
    if (name && !strcmp(name, "mapped")) {
        mp->trunk_bytes = -1;
        mp->expert_cache_bytes = -1;
        return K3_OK;
    }
    const k3_preset *p = k3_preset_find(name);
    if (p) {
        k3_preset_apply(p, mp);
        return K3_OK;
    }
    char names[256] = "auto";
    for (int i = 0; i < N_PRESETS; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), ", %s", presets[i].name);
    k3_error err;
    if (name)
        error_set(&err, K3_ERR_INVALID_ARGUMENT, "unknown preset \"%s\": the presets are %s and mapped", name, names);
    else
        error_set(&err, K3_ERR_INVALID_ARGUMENT, "no preset named: the presets are %s and mapped", names);
    error_copy_detail(&err, detail, detail_size);
    return K3_ERR_INVALID_ARGUMENT;
}
