/* weights.c - binds a checkpoint's tensors to the model struct: the only file that knows
 * tensor names. Every tensor is looked up by name and checked for dtype, shape (derived
 * from config.json) and alignment before the model is usable; matrices stay in the
 * mapped shards, small vectors are copied to f32. Names carry the release's
 * `language_model.` prefix; checkpoints without it (plain Kimi-Linear layouts) are
 * accepted too. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "model.h"

typedef struct loader {
    model *m;
    const char *prefix;
    k3_error *err;
    char name[512];
} loader;

/* Formats the full tensor name into L->name. */
static const char *tensor_name(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *tensor_name(loader *L, const char *fmt, ...) {
    va_list ap;
    const int n = snprintf(L->name, sizeof L->name, "%s", L->prefix);
    va_start(ap, fmt);
    vsnprintf(L->name + n, sizeof L->name - (size_t)n, fmt, ap);
    va_end(ap);
    return L->name;
}

static k3_status check_aligned(loader *L, const st_tensor *t) {
    if (st_is_aligned(t))
        return K3_OK;
    return error_set(L->err, K3_ERR_TENSOR, "tensor '%s' in %s starts at file offset %llu, not a multiple of its %zu-byte element",
                     t->name, st_shard_at(L->m->tensors, t->shard)->file, (unsigned long long)t->file_offset,
                     st_dtype_size(t->dtype));
}

/* A trunk matrix (rows, cols) stored as BF16 or F32. rows or cols may be -1 (any). */
static k3_status bind_matrix(loader *L, const char *name, int rows, int cols, kernels_matrix *out) {
    const st_tensor *t;
    k3_status s = st_require(L->m->tensors, name, &t, L->err);
    if (s != K3_OK)
        return s;
    if (t->dtype != ST_BF16 && t->dtype != ST_F32)
        return error_set(L->err, K3_ERR_TENSOR, "tensor '%s': dtype %s, expected BF16 or F32 (%s)", name,
                         st_dtype_name(t->dtype), st_shard_at(L->m->tensors, t->shard)->file);
    const int64_t shape[2] = {rows, cols};
    if ((s = st_check_shape(t, 2, shape, L->err)) != K3_OK || (s = check_aligned(L, t)) != K3_OK)
        return s;
    *out = (kernels_matrix){t->dtype == ST_F32 ? KERNELS_F32 : KERNELS_BF16, (int)t->shape[0], (int)t->shape[1],
                            t->data, NULL};
    return K3_OK;
}

static float *owned_floats(loader *L, long n) {
    model *m = L->m;
    if (m->n_owned == m->cap_owned) {
        const int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        float **grown = realloc(m->owned, sizeof *grown * (size_t)cap);
        if (!grown)
            return NULL;
        m->owned = grown;
        m->cap_owned = cap;
    }
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (v)
        m->owned[m->n_owned++] = v;
    return v;
}

/* A vector of `len` values (len -1: any) as an f32 copy. `shape` gives the expected rank-1
 * or rank-2 shape when the checkpoint stores it that way ([1, d] for the residual queries,
 * [P, 1, K] for conv taps): ndim 0 means [len]. */
static k3_status bind_vector_shaped(loader *L, const char *name, int ndim, const int64_t *shape, long len,
                                    const float **out) {
    const st_tensor *t;
    k3_status s = st_require(L->m->tensors, name, &t, L->err);
    if (s != K3_OK)
        return s;
    if (t->dtype != ST_BF16 && t->dtype != ST_F32)
        return error_set(L->err, K3_ERR_TENSOR, "tensor '%s': dtype %s, expected F32 or BF16 (%s)", name,
                         st_dtype_name(t->dtype), st_shard_at(L->m->tensors, t->shard)->file);
    const int64_t flat[1] = {len};
    if ((s = st_check_shape(t, ndim ? ndim : 1, ndim ? shape : flat, L->err)) != K3_OK ||
        (s = check_aligned(L, t)) != K3_OK)
        return s;
    float *v = owned_floats(L, (long)t->numel);
    if (!v)
        return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory copying %llu values", name,
                         (unsigned long long)t->numel);
    for (uint64_t i = 0; i < t->numel; i++)
        v[i] = t->dtype == ST_F32 ? ((const float *)t->data)[i] : dtype_bf16_to_f32(((const uint16_t *)t->data)[i]);
    *out = v;
    return K3_OK;
}

static k3_status bind_vector(loader *L, const char *name, long len, const float **out) {
    return bind_vector_shaped(L, name, 0, NULL, len, out);
}

/* The attention-residual query of one site: res_norm.weight (d) * res_proj.weight[0] (1, d). */
static k3_status bind_res_query(loader *L, const char *site_fmt, int layer, const float **out) {
    const int d = L->m->hidden;
    const float *norm, *proj;
    char site[256];
    snprintf(site, sizeof site, site_fmt, layer);
    const int64_t row[2] = {1, d};
    k3_status s = bind_vector(L, tensor_name(L, "%s_norm.weight", site), d, &norm);
    if (s == K3_OK)
        s = bind_vector_shaped(L, tensor_name(L, "%s_proj.weight", site), 2, row, d, &proj);
    if (s != K3_OK)
        return s;
    float *q = owned_floats(L, d);
    if (!q)
        return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "attention-residual query: out of memory");
    for (int j = 0; j < d; j++)
        q[j] = norm[j] * proj[j];
    *out = q;
    return K3_OK;
}

#define TRY(expr)                                                                                                     \
    do {                                                                                                              \
        const k3_status s_ = (expr);                                                                                  \
        if (s_ != K3_OK)                                                                                              \
            return s_;                                                                                                \
    } while (0)

static k3_status bind_kda(loader *L, int i, kda_weights *w) {
    const model *m = L->m;
    const int d = m->hidden, H = m->kda.heads, D = m->kda.head_dim, P = H * D, K = m->kda.conv_k;
    const char *base = "model.layers.%d.self_attn.";
    char f[128];
#define NAME(suffix) (snprintf(f, sizeof f, "%s%s", base, suffix), tensor_name(L, f, i))
    TRY(bind_matrix(L, NAME("q_proj.weight"), P, d, &w->q));
    TRY(bind_matrix(L, NAME("k_proj.weight"), P, d, &w->k));
    TRY(bind_matrix(L, NAME("v_proj.weight"), P, d, &w->v));
    TRY(bind_matrix(L, NAME("f_a_proj.weight"), -1, d, &w->f_a));
    TRY(bind_matrix(L, NAME("f_b_proj.weight"), P, w->f_a.rows, &w->f_b));
    TRY(bind_matrix(L, NAME("b_proj.weight"), H, d, &w->b));
    TRY(bind_matrix(L, NAME("g_proj.weight"), P, d, &w->g));
    TRY(bind_matrix(L, NAME("o_proj.weight"), d, P, &w->o));
    static const char *conv[3] = {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"};
    const int64_t taps3[3] = {P, 1, K}, taps2[2] = {P, K};
    for (int c = 0; c < 3; c++) {
        const st_tensor *t = st_find(m->tensors, NAME(conv[c]));
        const int two_d = t && t->ndim == 2; /* some re-quantized checkpoints drop the 1 */
        TRY(bind_vector_shaped(L, NAME(conv[c]), two_d ? 2 : 3, two_d ? taps2 : taps3, (long)P * K, &w->conv[c]));
    }
    const st_tensor *alog = st_find(m->tensors, NAME("A_log"));
    const long alog_len = alog && alog->ndim == 1 && alog->shape[0] >= H ? (long)alog->shape[0] : H;
    TRY(bind_vector(L, NAME("A_log"), alog_len, &w->a_log));
    /* A_log is per head, zero-padded past the head count; non-zero padding would mean a
     * per-channel layout this engine would misread. */
    for (long j = H; j < alog_len; j++)
        if (w->a_log[j] != 0.0f)
            return error_set(L->err, K3_ERR_TENSOR,
                             "tensor '%s': entry %ld of %ld is %g; A_log holds one value per head (%d heads) and "
                             "its padding must be zero",
                             L->name, j, alog_len, (double)w->a_log[j], H);
    TRY(bind_vector(L, NAME("dt_bias"), P, &w->dt_bias));
    TRY(bind_vector(L, NAME("o_norm.weight"), D, &w->o_norm));
#undef NAME
    return K3_OK;
}

static k3_status bind_mla(loader *L, int i, mla_weights *w) {
    const model *m = L->m;
    const mla_dims *dm = &m->mla;
    const int d = m->hidden, H = dm->heads;
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.q_a_proj.weight", i), dm->q_lora, d, &w->q_a));
    TRY(bind_vector(L, tensor_name(L, "model.layers.%d.self_attn.q_a_layernorm.weight", i), dm->q_lora, &w->q_a_norm));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.q_b_proj.weight", i), H * (dm->nope + dm->rope),
                    dm->q_lora, &w->q_b));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", i), dm->kv_lora + dm->rope,
                    d, &w->kv_a));
    TRY(bind_vector(L, tensor_name(L, "model.layers.%d.self_attn.kv_a_layernorm.weight", i), dm->kv_lora,
                    &w->kv_a_norm));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.kv_b_proj.weight", i), H * (dm->nope + dm->v_head),
                    dm->kv_lora, &w->kv_b));
    if (dm->out_gate)
        TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.g_proj.weight", i), H * dm->v_head, d, &w->g));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.self_attn.o_proj.weight", i), d, H * dm->v_head, &w->o));
    return K3_OK;
}

static k3_status bind_mlp(loader *L, const char *base, int i, int inter, moe_mlp *w) {
    char f[192];
    const int d = L->m->hidden;
    snprintf(f, sizeof f, "%s.gate_proj.weight", base);
    TRY(bind_matrix(L, tensor_name(L, f, i), inter, d, &w->gate));
    snprintf(f, sizeof f, "%s.up_proj.weight", base);
    TRY(bind_matrix(L, tensor_name(L, f, i), inter, d, &w->up));
    snprintf(f, sizeof f, "%s.down_proj.weight", base);
    TRY(bind_matrix(L, tensor_name(L, f, i), d, inter, &w->down));
    return K3_OK;
}

/* One routed expert projection (rows, cols): MXFP4 packed + scale, or a dense matrix. */
static k3_status bind_expert_matrix(loader *L, int i, int e, const char *which, int rows, int cols,
                                    kernels_matrix *out) {
    if (L->m->config.expert_format == K3_EXPERTS_DENSE)
        return bind_matrix(L, tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", i, e, which), rows,
                           cols, out);
    const st_tensor *packed, *scale;
    const int64_t pshape[2] = {rows, cols / 2}, sshape[2] = {rows, cols / DTYPE_MXFP4_BLOCK};
    TRY(st_expect(L->m->tensors, tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_packed", i, e, which),
                  ST_U8, 2, pshape, &packed, L->err));
    TRY(st_expect(L->m->tensors, tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_scale", i, e, which),
                  ST_U8, 2, sshape, &scale, L->err));
    *out = (kernels_matrix){KERNELS_MXFP4, rows, cols, packed->data, scale->data};
    return K3_OK;
}

static k3_status bind_moe(loader *L, int i, moe_expert *experts, moe_weights *w) {
    const model *m = L->m;
    const moe_dims *dm = &m->moe;
    const int d = m->hidden;
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.block_sparse_moe.gate.weight", i), dm->n_experts, d, &w->router));
    const st_tensor *bias;
    const int64_t eshape[1] = {dm->n_experts};
    TRY(st_expect(m->tensors, tensor_name(L, "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias", i), ST_F32,
                  1, eshape, &bias, L->err));
    TRY(bind_vector(L, L->name, dm->n_experts, &w->router_bias));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.block_sparse_moe.routed_expert_down_proj.weight", i), dm->latent,
                    d, &w->down_proj));
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.block_sparse_moe.routed_expert_up_proj.weight", i), d, dm->latent,
                    &w->up_proj));
    if (dm->latent_norm)
        TRY(bind_vector(L, tensor_name(L, "model.layers.%d.block_sparse_moe.routed_expert_norm.weight", i), dm->latent,
                        &w->latent_norm));
    if (dm->shared_inter > 0)
        TRY(bind_mlp(L, "model.layers.%d.block_sparse_moe.shared_experts", i, dm->shared_inter, &w->shared));
    for (int e = 0; e < dm->n_experts; e++) {
        TRY(bind_expert_matrix(L, i, e, "w1", dm->inter, dm->latent, &experts[e].w1));
        TRY(bind_expert_matrix(L, i, e, "w3", dm->inter, dm->latent, &experts[e].w3));
        TRY(bind_expert_matrix(L, i, e, "w2", dm->latent, dm->inter, &experts[e].w2));
    }
    w->experts = experts;
    return K3_OK;
}

static void set_dims(model *m) {
    const k3_config *c = &m->config;
    m->hidden = c->hidden_size;
    m->vocab = c->vocab_size;
    m->n_layers = c->num_hidden_layers;
    m->attn_res_block = c->attn_res_block_size;
    m->n_kda = c->n_kda_layers;
    m->n_mla = c->n_mla_layers;
    m->norm_eps = c->rms_norm_eps;
    m->dense_inter = c->intermediate_size;
    m->kda = (kda_dims){c->hidden_size, c->kda_num_heads, c->kda_head_dim, c->kda_short_conv_kernel_size, 0,
                        c->kda_gate == K3_KDA_GATE_LOWER_BOUND, c->kda_gate_lower_bound, c->rms_norm_eps};
    m->mla = (mla_dims){c->hidden_size, c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim,
                        c->qk_rope_head_dim, c->v_head_dim, 1e-6f, c->mla_use_output_gate};
    m->moe = (moe_dims){c->hidden_size,
                        c->n_moe_layers ? c->num_experts : 0,
                        c->num_experts_per_token,
                        c->routed_expert_hidden_size,
                        c->moe_intermediate_size,
                        c->shared_expert_width,
                        c->moe_renormalize,
                        c->routed_scaling_factor,
                        c->latent_moe_use_norm,
                        c->rms_norm_eps,
                        c->situ_beta,
                        c->situ_linear_beta};
}

static k3_status bind_all(loader *L) {
    model *m = L->m;
    const int d = m->hidden;
    /* The release prefixes text tensors with `language_model.`; plain layouts do not. */
    L->prefix = "language_model.";
    if (!st_find(m->tensors, tensor_name(L, "model.embed_tokens.weight")))
        L->prefix = "";
    TRY(bind_matrix(L, tensor_name(L, "model.embed_tokens.weight"), m->vocab, d, &m->embed));
    TRY(bind_matrix(L, tensor_name(L, "lm_head.weight"), m->vocab, d, &m->lm_head));
    TRY(bind_vector(L, tensor_name(L, "model.norm.weight"), d, &m->final_norm));
    if (m->attn_res_block > 0) {
        const float *norm, *proj;
        const int64_t row[2] = {1, d};
        TRY(bind_vector(L, tensor_name(L, "model.output_attn_res_norm.weight"), d, &norm));
        TRY(bind_vector_shaped(L, tensor_name(L, "model.output_attn_res_proj.weight"), 2, row, d, &proj));
        float *q = owned_floats(L, d);
        if (!q)
            return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "output attention-residual query: out of memory");
        for (int j = 0; j < d; j++)
            q[j] = norm[j] * proj[j];
        m->out_res_query = q;
    }
    int moe_index = 0;
    for (int i = 0; i < m->n_layers; i++) {
        model_layer *ly = &m->layers[i];
        ly->is_kda = m->config.layer_is_kda[i];
        ly->is_moe = m->config.layer_is_moe[i];
        ly->state_index = m->config.layer_slot[i];
        TRY(bind_vector(L, tensor_name(L, "model.layers.%d.input_layernorm.weight", i), d, &ly->input_norm));
        TRY(bind_vector(L, tensor_name(L, "model.layers.%d.post_attention_layernorm.weight", i), d, &ly->post_norm));
        if (m->attn_res_block > 0) {
            TRY(bind_res_query(L, "model.layers.%d.self_attention_res", i, &ly->attn_res_query));
            TRY(bind_res_query(L, "model.layers.%d.mlp_res", i, &ly->mlp_res_query));
        }
        TRY(ly->is_kda ? bind_kda(L, i, &ly->kda) : bind_mla(L, i, &ly->mla));
        if (ly->is_moe)
            TRY(bind_moe(L, i, m->experts + (long)moe_index++ * m->moe.n_experts, &ly->moe));
        else
            TRY(bind_mlp(L, "model.layers.%d.mlp", i, m->dense_inter, &ly->dense));
    }
    /* All KDA layers share one f_a rank in the engine's scratch sizing: take the largest. */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].is_kda && m->layers[i].kda.f_a.rows > m->kda.gate_rank)
            m->kda.gate_rank = m->layers[i].kda.f_a.rows;
    return K3_OK;
}

k3_status model_load(const char *dir, model **out, k3_error *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m)
        return error_set(err, K3_ERR_OUT_OF_MEMORY, "model: out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    k3_status s = config_load(path, &m->config, err);
    if (s == K3_OK) {
        set_dims(m);
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
        m->experts = calloc((size_t)m->config.n_moe_layers * (m->moe.n_experts ? m->moe.n_experts : 1) + 1,
                            sizeof *m->experts);
        if (!m->layers || !m->experts)
            s = error_set(err, K3_ERR_OUT_OF_MEMORY, "model: out of memory for %d layers", m->n_layers);
    }
    if (s == K3_OK) {
        loader L = {m, "", err, ""};
        s = bind_all(&L);
    }
    if (s != K3_OK) {
        model_free(m);
        return s;
    }
    *out = m;
    return K3_OK;
}

void model_free(model *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->experts);
    st_close(m->tensors);
    free(m);
}
