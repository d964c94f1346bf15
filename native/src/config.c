/* config.c - config.json into a validated k3_config (see config.h for the contract: where
 * each value comes from, the defaults, and what is refused). Reading and checking one
 * field is one call of a small typed reader, so every message has the same shape:
 * "FILE: text_config.KEY is VALUE, REASON". */
#include "config.h"

#include "json.h"
#include "kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a field is read from, and how messages spell its path. */
typedef struct reader {
    const json_value *obj;
    const char *prefix; /* "", "text_config.", "text_config.linear_attn_config.", ... */
    const char *file;
    k3_error *err;
    k3_config *cfg; /* where defaults taken are recorded; NULL where keys have none */
} reader;

/* The reference config class, named in messages about defaults. */
#define REFERENCE_CLASS "KimiLinearConfig"

static k3_status bad(const reader *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "FILE: PREFIXKEY <message>" with status K3_ERR_CONFIG. */
static k3_status bad(const reader *r, const char *key, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(r->err, K3_ERR_CONFIG, "%s: %s%s %s", r->file, r->prefix, key, msg);
}

/* The shortest of %.15g / %.17g that reads back as d. */
static const char *show_double(double d, char *buf, size_t size) {
    snprintf(buf, size, "%.15g", d);
    if (strtod(buf, NULL) != d)
        snprintf(buf, size, "%.17g", d);
    return buf;
}

/* A JSON value as a message shows it: numbers, strings and literals by value, others by
 * type ("an object"). */
static const char *show(const json_value *v, char *buf, size_t size) {
    double d;
    bool b;
    const char *s;
    if (json_number(v, &d))
        show_double(d, buf, size);
    else if ((s = json_string(v, NULL)))
        snprintf(buf, size, "'%.60s'", s);
    else if (json_bool(v, &b))
        snprintf(buf, size, "%s", b ? "true" : "false");
    else if (json_is_null(v))
        snprintf(buf, size, "null");
    else
        snprintf(buf, size, "%s %s",
                 json_type(v) == JSON_ARRAY || json_type(v) == JSON_OBJECT ? "an" : "a",
                 json_type_name(json_type(v)));
    return buf;
}

/* An integer in [lo, hi]. When `optional`, null and absence leave *out = dflt and
 * *present (if given) false. */
static k3_status read_int(const reader *r, const char *key, int64_t lo, int64_t hi, bool optional,
                          int dflt, int *out, bool *present) {
    const json_value *v = json_get(r->obj, key);
    char buf[96];
    if (present)
        *present = false;
    *out = dflt;
    if (!v || json_is_null(v)) {
        if (optional)
            return K3_OK;
        return bad(r, key, v ? "is null, expected an integer" : "is missing (" REFERENCE_CLASS " has no default for it)");
    }
    if (!json_is_integral(v))
        return bad(r, key, "is %s, expected an integer", show(v, buf, sizeof buf));
    int64_t x;
    json_int(v, INT64_MIN, INT64_MAX, &x);
    if (lo == hi && x != lo)
        return bad(r, key, "is %lld, expected %lld", (long long)x, (long long)lo);
    if (x < lo)
        return bad(r, key, "is %lld, must be at least %lld", (long long)x, (long long)lo);
    if (x > hi)
        return bad(r, key, "is %lld, must be at most %lld", (long long)x, (long long)hi);
    *out = (int)x;
    if (present)
        *present = true;
    return K3_OK;
}

static k3_status req_int(const reader *r, const char *key, int64_t lo, int64_t hi, int *out) {
    return read_int(r, key, lo, hi, false, 0, out, NULL);
}

/* A dimension: an integer in [1, K3_CONFIG_MAX_DIM]. */
static k3_status req_dim(const reader *r, const char *key, int *out) {
    return read_int(r, key, 1, K3_CONFIG_MAX_DIM, false, 0, out, NULL);
}

/* A finite number; *is_null set (and *out = 0) for null when null_ok. */
static k3_status read_number(const reader *r, const char *key, bool null_ok, double *out,
                             bool *is_null) {
    const json_value *v = json_get(r->obj, key);
    char buf[96];
    *out = 0;
    if (is_null)
        *is_null = false;
    if (!v)
        return bad(r, key, "is missing (" REFERENCE_CLASS " has no default for it)");
    if (json_is_null(v) && null_ok) {
        *is_null = true;
        return K3_OK;
    }
    if (!json_number(v, out))
        return bad(r, key, "is %s, expected a number", show(v, buf, sizeof buf));
    return K3_OK;
}

static k3_status read_positive(const reader *r, const char *key, bool null_ok, float *out) {
    double d;
    bool is_null;
    k3_status st = read_number(r, key, null_ok, &d, &is_null);
    if (st != K3_OK)
        return st;
    char buf[64];
    /* the float must stay positive too: 1e-50 would become 0 */
    if (!is_null && !(d > 0 && d <= 1e30 && (float)d > 0))
        return bad(r, key, "is %s, must be a positive number that a float holds",
                   show_double(d, buf, sizeof buf));
    *out = (float)d;
    return K3_OK;
}

/* A boolean; when optional, absence gives dflt (null is still an error: say what you mean). */
static k3_status read_bool(const reader *r, const char *key, bool optional, bool dflt, bool *out) {
    const json_value *v = json_get(r->obj, key);
    char buf[96];
    *out = dflt;
    if (!v)
        return optional ? K3_OK : bad(r, key, "is missing");
    if (!json_bool(v, out))
        return bad(r, key, "is %s, expected true or false", show(v, buf, sizeof buf));
    return K3_OK;
}

/* A string that must equal `only` (the one supported value); absence gives `only` when
 * optional. */
static k3_status read_only_string(const reader *r, const char *key, bool optional, const char *only) {
    const json_value *v = json_get(r->obj, key);
    char buf[96];
    if (!v)
        return optional ? K3_OK : bad(r, key, "is missing");
    if (json_type(v) != JSON_STRING)
        return bad(r, key, "is %s, expected a string", show(v, buf, sizeof buf));
    if (!json_string_is(v, only))
        return bad(r, key, "is %s, which this engine does not support (only '%s')",
                   show(v, buf, sizeof buf), only);
    return K3_OK;
}

/* ---- defaults of the reference class -------------------------------------------------------- */

/* Records that `key` was absent and took the reference class's default `value`. */
static void took_default(const reader *r, const char *key, const char *value) {
    if (!r->cfg)
        return;
    char *d = r->cfg->defaults;
    const size_t n = strlen(d);
    snprintf(d + n, sizeof r->cfg->defaults - n, "%s%s%s %s", n ? ", " : "", r->prefix, key, value);
}

static bool absent(const reader *r, const char *key) { return json_get(r->obj, key) == NULL; }

/* An integer in [lo, hi], the reference default when absent (or null). */
static k3_status opt_int(const reader *r, const char *key, int64_t lo, int64_t hi, int dflt, int *out) {
    const bool missing = absent(r, key);
    const k3_status st = read_int(r, key, lo, hi, true, dflt, out, NULL);
    if (st == K3_OK && missing) {
        char v[24];
        snprintf(v, sizeof v, "%d", dflt);
        took_default(r, key, v);
    }
    return st;
}

static k3_status opt_bool(const reader *r, const char *key, bool dflt, bool *out) {
    if (absent(r, key))
        took_default(r, key, dflt ? "true" : "false");
    return read_bool(r, key, true, dflt, out);
}

/* A positive number, the reference default (spelled `shown`) when absent. */
static k3_status opt_positive(const reader *r, const char *key, float dflt, const char *shown, float *out) {
    if (absent(r, key)) {
        *out = dflt;
        took_default(r, key, shown);
        return K3_OK;
    }
    return read_positive(r, key, false, out);
}

/* ---- layer lists ---------------------------------------------------------------------- */

enum { OWNER_NONE = 0, OWNER_KDA = 1, OWNER_MLA = 2 };

/* Marks owner[i] for every 1-based layer i+1 listed under `key`. */
static k3_status read_layer_list(const reader *r, const char *key, const char *other_key, int n_layers,
                                 uint8_t which, uint8_t *owner) {
    const json_value *list = json_get(r->obj, key);
    char buf[96];
    if (!list)
        return bad(r, key, "is missing");
    if (json_type(list) != JSON_ARRAY)
        return bad(r, key, "is %s, expected an array of 1-based layer numbers", show(list, buf, sizeof buf));
    for (size_t i = 0; i < json_len(list); i++) {
        const json_value *v = json_at(list, i);
        char at[64];
        snprintf(at, sizeof at, "%s[%zu]", key, i);
        int64_t layer;
        if (!json_int(v, INT32_MIN, INT32_MAX, &layer))
            return bad(r, at, "is %s, expected a 1-based layer number", show(v, buf, sizeof buf));
        if (layer == 0)
            return bad(r, at, "is 0, but layer numbers are 1-based (1..%d): is the list 0-based?",
                       n_layers);
        if (layer < 1 || layer > n_layers)
            return bad(r, at, "is %lld, outside 1..%d (1-based; num_hidden_layers is %d)",
                       (long long)layer, n_layers, n_layers);
        uint8_t *o = &owner[layer - 1];
        if (*o == which)
            return bad(r, key, "lists layer %lld twice", (long long)layer);
        if (*o != OWNER_NONE)
            return bad(r, key, "and %s%s both list layer %lld", r->prefix, other_key, (long long)layer);
        *o = which;
    }
    return K3_OK;
}

/* ---- sections ------------------------------------------------------------------------------ */

static k3_status read_trunk(const reader *t, k3_config *c) {
    k3_status st;
    bool present;
    if ((st = opt_int(t, "hidden_size", 1, K3_CONFIG_MAX_DIM, 4096, &c->hidden_size)) ||
        (st = opt_int(t, "num_hidden_layers", 1, K3_CONFIG_MAX_LAYERS, 32, &c->num_hidden_layers)) ||
        (st = opt_int(t, "vocab_size", 1, K3_CONFIG_MAX_DIM, 163840, &c->vocab_size)) ||
        (st = opt_positive(t, "rms_norm_eps", 1e-6f, "1e-06", &c->rms_norm_eps)))
        return st;
    if (!(c->rms_norm_eps < 1))
        return bad(t, "rms_norm_eps", "is %g, expected a small positive number", c->rms_norm_eps);
    if (absent(t, "hidden_act"))
        return bad(t, "hidden_act", "is missing, so 'silu' (the " REFERENCE_CLASS " default), which this engine does not "
                   "support (only 'situ')");
    if ((st = read_only_string(t, "hidden_act", false, "situ")) ||
        (st = read_positive(t, "activation_situ_beta", false, &c->situ_beta)))
        return st;
    if (absent(t, "activation_situ_linear_beta"))
        took_default(t, "activation_situ_linear_beta", "null");
    else if ((st = read_positive(t, "activation_situ_linear_beta", true, &c->situ_linear_beta)))
        return st;
    if (absent(t, "attn_res_block_size"))
        took_default(t, "attn_res_block_size", "null");
    st = read_int(t, "attn_res_block_size", 1, c->num_hidden_layers, true, 0,
                  &c->attn_res_block_size, &present);
    if (st || (st = opt_int(t, "num_nextn_predict_layers", 0, K3_CONFIG_MAX_LAYERS, 0, &c->num_nextn_predict_layers)))
        return st;
    c->n_attn_res_blocks = present ? (c->num_hidden_layers + c->attn_res_block_size - 1) /
                                         c->attn_res_block_size
                                   : 0;
    return K3_OK;
}

static k3_status read_moe(const reader *t, k3_config *c) {
    k3_status st;
    const int L = c->num_hidden_layers;
    if ((st = opt_int(t, "intermediate_size", 1, K3_CONFIG_MAX_DIM, 11008, &c->intermediate_size)) ||
        (st = opt_int(t, "first_k_dense_replace", 0, L, 0, &c->first_k_dense_replace)) ||
        (st = opt_int(t, "moe_layer_freq", 1, L, 1, &c->moe_layer_freq)) ||
        (st = req_dim(t, "num_experts", &c->num_experts)) ||
        (st = req_dim(t, "num_experts_per_token", &c->num_experts_per_token)))
        return st;
    if (c->num_experts_per_token > c->num_experts)
        return bad(t, "num_experts_per_token", "is %d, more than num_experts (%d)",
                   c->num_experts_per_token, c->num_experts);
    if ((st = opt_int(t, "num_shared_experts", 0, 1024, 0, &c->num_shared_experts)) ||
        (st = req_dim(t, "moe_intermediate_size", &c->moe_intermediate_size)))
        return st;
    const json_value *latent = json_get(t->obj, "routed_expert_hidden_size");
    if (json_is_null(latent))
        return bad(t, "routed_expert_hidden_size",
                   "is null (routed experts at full width, no latent projection), which this "
                   "engine does not support");
    if ((st = req_dim(t, "routed_expert_hidden_size", &c->routed_expert_hidden_size)) ||
        (st = opt_bool(t, "latent_moe_use_norm", false, &c->latent_moe_use_norm)) ||
        (st = read_only_string(t, "moe_router_activation_func", true, "sigmoid")) ||
        (st = opt_bool(t, "moe_renormalize", true, &c->moe_renormalize)) ||
        (st = opt_positive(t, "routed_scaling_factor", 1.0f, "1.0", &c->routed_scaling_factor)) ||
        (st = read_only_string(t, "topk_method", true, "noaux_tc")) ||
        (st = opt_int(t, "num_expert_group", 1, K3_CONFIG_MAX_DIM, 1, &c->num_expert_group)) ||
        (st = opt_int(t, "topk_group", 1, K3_CONFIG_MAX_DIM, 1, &c->topk_group)))
        return st;
    if (c->num_expert_group > 1 && c->num_expert_group > c->topk_group)
        return bad(t, "num_expert_group",
                   "is %d with topk_group %d: group-limited routing is not supported (only "
                   "num_expert_group 1, or topk_group >= num_expert_group)",
                   c->num_expert_group, c->topk_group);
    if ((int64_t)c->moe_intermediate_size * c->num_shared_experts > K3_CONFIG_MAX_DIM)
        return bad(t, "num_shared_experts", "is %d: the shared MLP width %lld exceeds %d",
                   c->num_shared_experts,
                   (long long)c->moe_intermediate_size * c->num_shared_experts, K3_CONFIG_MAX_DIM);
    c->shared_expert_width = c->moe_intermediate_size * c->num_shared_experts;
    return K3_OK;
}

static k3_status read_mla(const reader *t, k3_config *c) {
    k3_status st;
    bool nope;
    if ((st = opt_int(t, "num_attention_heads", 1, K3_CONFIG_MAX_DIM, 32, &c->num_attention_heads)))
        return st;
    if (absent(t, "num_key_value_heads"))
        took_default(t, "num_key_value_heads", "= num_attention_heads");
    if ((st = read_int(t, "num_key_value_heads", 1, c->num_attention_heads, true, c->num_attention_heads,
                       &c->num_key_value_heads, NULL)))
        return st;
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return bad(t, "num_key_value_heads", "is %d, which does not divide num_attention_heads (%d)",
                   c->num_key_value_heads, c->num_attention_heads);
    if (json_is_null(json_get(t->obj, "q_lora_rank")))
        return bad(t, "q_lora_rank",
                   "is null (a plain q_proj without the query LoRA), which this engine does not "
                   "support");
    if ((st = req_dim(t, "q_lora_rank", &c->q_lora_rank)) ||
        (st = req_dim(t, "kv_lora_rank", &c->kv_lora_rank)) ||
        (st = req_dim(t, "qk_nope_head_dim", &c->qk_nope_head_dim)) ||
        (st = req_int(t, "qk_rope_head_dim", 0, K3_CONFIG_MAX_DIM, &c->qk_rope_head_dim)) ||
        (st = req_dim(t, "v_head_dim", &c->v_head_dim)))
        return st;
    if (!json_get(t->obj, "mla_use_nope"))
        return bad(t, "mla_use_nope",
                   "is missing, so false (the " REFERENCE_CLASS " default): this engine implements only NoPE MLA (no "
                   "RoPE) and needs it true");
    if ((st = read_bool(t, "mla_use_nope", false, false, &nope)))
        return st;
    if (!nope)
        return bad(t, "mla_use_nope", "is false (RoPE attention), which this engine does not support");
    if ((st = opt_bool(t, "mla_use_output_gate", false, &c->mla_use_output_gate)))
        return st;
    c->mla_qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    int64_t q_width = (int64_t)c->num_attention_heads * (c->mla_qk_head_dim + c->v_head_dim);
    if (q_width > K3_CONFIG_MAX_DIM)
        return bad(t, "num_attention_heads",
                   "is %d: heads * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) = %lld "
                   "exceeds %d", c->num_attention_heads, (long long)q_width, K3_CONFIG_MAX_DIM);
    return K3_OK;
}

static k3_status read_kda(const reader *t, k3_config *c, char *prefix_buf, size_t prefix_size) {
    const json_value *lin = json_get(t->obj, "linear_attn_config");
    char buf[96];
    if (!lin)
        return bad(t, "linear_attn_config", "is missing (it lists which layers are KDA and which MLA)");
    if (json_type(lin) != JSON_OBJECT)
        return bad(t, "linear_attn_config", "is %s, expected an object", show(lin, buf, sizeof buf));
    snprintf(prefix_buf, prefix_size, "%slinear_attn_config.", t->prefix);
    const reader r = {lin, prefix_buf, t->file, t->err, NULL};
    k3_status st;
    bool full_rank;
    if ((st = req_dim(&r, "num_heads", &c->kda_num_heads)) ||
        (st = req_dim(&r, "head_dim", &c->kda_head_dim)) ||
        (st = req_int(&r, "short_conv_kernel_size", 1, 64, &c->kda_short_conv_kernel_size)) ||
        (st = read_bool(&r, "use_full_rank_gate", true, false, &full_rank)))
        return st;
    if (!full_rank)
        return bad(&r, "use_full_rank_gate",
                   "is %s: the low-rank output gate (g_a_proj/g_b_proj) is not supported yet, "
                   "only the full-rank g_proj",
                   json_get(lin, "use_full_rank_gate") ? "false" : "missing (so false)");
    if ((int64_t)c->kda_num_heads * c->kda_head_dim > K3_CONFIG_MAX_DIM)
        return bad(&r, "num_heads", "is %d: num_heads * head_dim = %lld exceeds %d",
                   c->kda_num_heads, (long long)c->kda_num_heads * c->kda_head_dim,
                   K3_CONFIG_MAX_DIM);
    c->kda_dim = c->kda_num_heads * c->kda_head_dim;
    const json_value *lb = json_get(lin, "gate_lower_bound");
    if (!lb || json_is_null(lb)) {
        c->kda_gate = K3_KDA_GATE_SOFTPLUS;
        c->kda_gate_lower_bound = 0;
    } else {
        double d;
        if (!json_number(lb, &d))
            return bad(&r, "gate_lower_bound", "is %s, expected a number", show(lb, buf, sizeof buf));
        if (!(d < 0 && d > -1e30))
            return bad(&r, "gate_lower_bound", "is %s, must be negative (a log-space decay bound)",
                       show_double(d, buf, sizeof buf));
        c->kda_gate = K3_KDA_GATE_LOWER_BOUND;
        c->kda_gate_lower_bound = (float)d;
    }

    const int L = c->num_hidden_layers;
    uint8_t owner[K3_CONFIG_MAX_LAYERS] = {0};
    if ((st = read_layer_list(&r, "kda_layers", "full_attn_layers", L, OWNER_KDA, owner)) ||
        (st = read_layer_list(&r, "full_attn_layers", "kda_layers", L, OWNER_MLA, owner)))
        return st;
    int missing = 0, first_missing = -1;
    for (int i = 0; i < L; i++)
        if (owner[i] == OWNER_NONE && missing++ == 0)
            first_missing = i;
    if (missing)
        return error_set(t->err, K3_ERR_CONFIG,
                         "%s: layer %d (1-based) is in neither %skda_layers nor %sfull_attn_layers "
                         "(%d of the %d layers are in neither)", t->file, first_missing + 1, r.prefix,
                         r.prefix, missing, L);
    for (int i = 0; i < L; i++) {
        c->layer_is_kda[i] = owner[i] == OWNER_KDA;
        c->layer_slot[i] = c->layer_is_kda[i] ? c->n_kda_layers++ : c->n_mla_layers++;
    }
    return K3_OK;
}

/* quantization_config: absent or null = dense experts; else compressed-tensors MXFP4. */
static k3_status read_quant(const reader *t, const reader *top, k3_config *c, char *prefix_buf,
                            size_t prefix_size) {
    const reader *where = json_get(t->obj, "quantization_config") ? t : top;
    const json_value *q = json_get(where->obj, "quantization_config");
    char buf[96], gbuf[320];
    c->expert_format = K3_EXPERTS_DENSE;
    c->expert_group_size = 0;
    if (!q || json_is_null(q))
        return K3_OK;
    if (json_type(q) != JSON_OBJECT)
        return bad(where, "quantization_config", "is %s, expected an object", show(q, buf, sizeof buf));
    snprintf(prefix_buf, prefix_size, "%squantization_config.", where->prefix);
    const reader r = {q, prefix_buf, t->file, t->err, NULL};
    k3_status st;
    if ((st = read_only_string(&r, "quant_method", false, "compressed-tensors")) ||
        (st = read_only_string(&r, "format", true, "mxfp4-pack-quantized")))
        return st;
    bool said_mxfp4 = json_get(q, "format") != NULL;
    const json_value *groups = json_get(q, "config_groups");
    if (groups && json_type(groups) != JSON_OBJECT)
        return bad(&r, "config_groups", "is %s, expected an object", show(groups, buf, sizeof buf));
    for (size_t i = 0; i < json_len(groups); i++) {
        const json_value *g = json_at(groups, i);
        snprintf(gbuf, sizeof gbuf, "%sconfig_groups.%.60s.", r.prefix, json_key(g, NULL));
        if (json_type(g) != JSON_OBJECT)
            return error_set(t->err, K3_ERR_CONFIG, "%s: %.*s is %s, expected an object", t->file,
                             (int)strlen(gbuf) - 1, gbuf, show(g, buf, sizeof buf));
        const reader gr = {g, gbuf, t->file, t->err, NULL};
        if ((st = read_only_string(&gr, "format", true, "mxfp4-pack-quantized")))
            return st;
        said_mxfp4 |= json_get(g, "format") != NULL;
        const json_value *w = json_get(g, "weights");
        if (!w || json_is_null(w))
            continue;
        if (json_type(w) != JSON_OBJECT)
            return bad(&gr, "weights", "is %s, expected an object", show(w, buf, sizeof buf));
        char wbuf[352];
        snprintf(wbuf, sizeof wbuf, "%sweights.", gbuf);
        const reader wr = {w, wbuf, t->file, t->err, NULL};
        int bits, group;
        if ((st = read_int(&wr, "num_bits", 4, 4, true, 4, &bits, NULL)) ||
            (st = read_int(&wr, "group_size", 32, 32, true, 32, &group, NULL)) ||
            (st = read_only_string(&wr, "type", true, "float")))
            return st;
    }
    if (!said_mxfp4)
        return error_set(t->err, K3_ERR_CONFIG,
                         "%s: %squantization_config names no format (expected "
                         "mxfp4-pack-quantized)", t->file, where->prefix);
    c->expert_format = K3_EXPERTS_MXFP4;
    c->expert_group_size = 32;
    if (c->routed_expert_hidden_size % 32 != 0)
        return bad(t, "routed_expert_hidden_size",
                   "is %d, not a multiple of 32: the MXFP4 experts' w1/w3 columns come in groups "
                   "of 32", c->routed_expert_hidden_size);
    if (c->moe_intermediate_size % 32 != 0)
        return bad(t, "moe_intermediate_size",
                   "is %d, not a multiple of 32: the MXFP4 experts' w2 columns come in groups of 32",
                   c->moe_intermediate_size);
    if (c->routed_expert_hidden_size > KERNELS_MXFP4_MAX_COLS)
        return bad(t, "routed_expert_hidden_size", "is %d: the MXFP4 kernels take at most %d columns",
                   c->routed_expert_hidden_size, KERNELS_MXFP4_MAX_COLS);
    if (c->moe_intermediate_size > KERNELS_MXFP4_MAX_COLS)
        return bad(t, "moe_intermediate_size", "is %d: the MXFP4 kernels take at most %d columns",
                   c->moe_intermediate_size, KERNELS_MXFP4_MAX_COLS);
    return K3_OK;
}

/* A token id from text_config, else the top level: -1 when absent or null (if optional). */
static k3_status read_token_id(const reader *t, const reader *top, const char *key, int vocab,
                               int *out) {
    const reader *r = json_get(t->obj, key) ? t : top;
    return read_int(r, key, 0, vocab - 1, true, -1, out, NULL);
}

static k3_status read_tokens(const reader *t, const reader *top, k3_config *c) {
    const reader *r = json_get(t->obj, "eos_token_id") ? t : top;
    const json_value *eos = json_get(r->obj, "eos_token_id");
    char buf[96];
    k3_status st;
    if (!eos)
        return error_set(t->err, K3_ERR_CONFIG, "%s: eos_token_id is missing%s: the engine cannot stop",
                         t->file, t->prefix[0] ? " (from text_config and the top level)" : "");
    if (json_type(eos) == JSON_ARRAY) {
        size_t n = json_len(eos);
        if (n < 1 || n > K3_CONFIG_MAX_EOS)
            return bad(r, "eos_token_id", "lists %zu ids, expected 1..%d", n, K3_CONFIG_MAX_EOS);
        for (size_t i = 0; i < n; i++) {
            int64_t id;
            char at[32];
            snprintf(at, sizeof at, "eos_token_id[%zu]", i);
            if (!json_int(json_at(eos, i), 0, c->vocab_size - 1, &id))
                return bad(r, at, "is %s, expected a token id in 0..%d",
                           show(json_at(eos, i), buf, sizeof buf), c->vocab_size - 1);
            c->eos_token_ids[i] = (int)id;
        }
        c->n_eos_token_ids = (int)n;
    } else {
        if ((st = read_int(r, "eos_token_id", 0, c->vocab_size - 1, false, 0, &c->eos_token_ids[0], NULL)))
            return st;
        c->n_eos_token_ids = 1;
    }
    if ((st = read_token_id(t, top, "bos_token_id", c->vocab_size, &c->bos_token_id)) ||
        (st = read_token_id(t, top, "pad_token_id", c->vocab_size, &c->pad_token_id)))
        return st;
    const reader *both[2] = {t, top};
    for (int i = 0; i < 2; i++) {
        bool tie;
        if ((st = read_bool(both[i], "tie_word_embeddings", true, false, &tie)))
            return st;
        if (tie)
            return bad(both[i], "tie_word_embeddings",
                       "is true: this engine needs a separate lm_head (tied embeddings are not "
                       "supported)");
    }
    return K3_OK;
}

static void derive_layers(k3_config *c) {
    for (int i = 0; i < c->num_hidden_layers; i++) {
        c->layer_is_moe[i] = i >= c->first_k_dense_replace && i % c->moe_layer_freq == 0;
        if (c->layer_is_moe[i])
            c->n_moe_layers++;
        else
            c->n_dense_layers++;
    }
}

/* Everything after the JSON syntax: the shared tail of config_parse and config_load. */
static k3_status config_from_doc(const json_doc *doc, const char *name, k3_config *out,
                                 k3_error *err) {
    const json_value *root = json_root(doc);
    const reader top = {root, "", name, err, out};
    const json_value *text_config = json_get(root, "text_config");
    reader t = top;
    char lin_prefix[96], quant_prefix[96], buf[96];
    k3_status st;
    if (json_type(root) != JSON_OBJECT)
        return error_set(err, K3_ERR_CONFIG, "%s: the top level is JSON %s, expected an object", name,
                         json_type_name(json_type(root)));
    if (text_config && json_type(text_config) != JSON_OBJECT)
        return bad(&top, "text_config", "is %s, expected an object",
                   show(text_config, buf, sizeof buf));
    if (text_config) {
        t.obj = text_config;
        t.prefix = "text_config.";
    }
    if ((st = read_trunk(&t, out)) || (st = read_tokens(&t, &top, out)) ||
        (st = read_moe(&t, out)) || (st = read_mla(&t, out)) ||
        (st = read_kda(&t, out, lin_prefix, sizeof lin_prefix)) ||
        (st = read_quant(&t, &top, out, quant_prefix, sizeof quant_prefix)))
        return st;
    derive_layers(out);
    return K3_OK;
}

k3_status config_parse(const char *text, size_t len, const char *name, k3_config *out,
                       k3_error *err) {
    memset(out, 0, sizeof *out);
    if (!name)
        name = "config.json";
    json_doc *doc;
    k3_status st = json_parse(text, len, name, &doc, err);
    if (st == K3_OK)
        st = config_from_doc(doc, name, out, err);
    json_free(doc);
    if (st != K3_OK)
        memset(out, 0, sizeof *out);
    return st;
}

k3_status config_load(const char *path, k3_config *out, k3_error *err) {
    memset(out, 0, sizeof *out);
    json_doc *doc;
    k3_status st = json_parse_file(path, &doc, err);
    if (st == K3_OK)
        st = config_from_doc(doc, path, out, err);
    json_free(doc);
    if (st != K3_OK)
        memset(out, 0, sizeof *out);
    return st;
}
