/* weights.c - binds a checkpoint's tensors to the model struct: the only file that knows
 * tensor names. Every tensor is looked up by name and checked for dtype, shape (derived
 * from config.json) and alignment before the model is usable. Small vectors are read (with
 * pread, never through the mapping) into f32 copies. Matrices stay in the mapped shards,
 * or, with an owned trunk, are registered with trunk.c by their place in model_layer; every
 * routed expert is registered with the expert cache's read table, and bound in place when
 * the experts are mapped. The same pass measures what a plan needs (plan_inputs); opening
 * the files, the memory check and starting the trunk and the cache are model.c's. Names carry the release's `language_model.` prefix; checkpoints without it
 * (plain Kimi-Linear layouts) are accepted too. The binding must use every tensor of the
 * text model and find every one it needs: a tensor the config does not use (an output gate
 * with mla_use_output_gate false, shared experts with num_shared_experts 0) is refused, as
 * is a missing one, naming the tensor, the config keys involved and any defaults config.c
 * filled in. Tensors outside the text model (the vision tower) and those of the
 * num_nextn_predict_layers layers after the last one are left alone. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "io.h"
#include "model.h"

typedef struct loader {
    model *m;
    const char *prefix;
    k3_error *err;
    char name[512];
    int dry;   /* measure vectors instead of reading them (model_survey) */
    int layer; /* the layer whose trunk matrices are being bound, -1 outside layers */
    uint8_t *used; /* (st_count) 1 for each tensor bound */
} loader;

/* Looks up a tensor the model binds, and marks it used. */
static k3_status require(loader *L, const char *name, const st_tensor **out) {
    const k3_status s = st_require(L->m->tensors, name, out, L->err);
    if (s == K3_OK)
        L->used[*out - st_tensor_at(L->m->tensors, 0)] = 1;
    return s;
}

static k3_status expect(loader *L, const char *name, st_dtype dtype, int ndim, const int64_t *shape, const st_tensor **out) {
    const k3_status s = st_expect(L->m->tensors, name, dtype, ndim, shape, out, L->err);
    if (s == K3_OK)
        L->used[*out - st_tensor_at(L->m->tensors, 0)] = 1;
    return s;
}

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
    k3_status s = require(L, name, &t);
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
    if (L->layer < 0)
        return K3_OK;
    /* A layer's trunk matrix: registered by its offset in model_layer; with an owned trunk
     * the template keeps no pointer into the mapping. */
    model *m = L->m;
    m->inputs.dense_file_bytes += t->nbytes;
    if (m->params.trunk_bytes >= 0)
        out->data = NULL;
    return trunk_add(m->trunk, L->layer, (size_t)((const char *)out - (const char *)&m->layers[L->layer]), t, L->err);
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
    k3_status s = require(L, name, &t);
    if (s != K3_OK)
        return s;
    if (t->dtype != ST_BF16 && t->dtype != ST_F32)
        return error_set(L->err, K3_ERR_TENSOR, "tensor '%s': dtype %s, expected F32 or BF16 (%s)", name,
                         st_dtype_name(t->dtype), st_shard_at(L->m->tensors, t->shard)->file);
    const int64_t flat[1] = {len};
    if ((s = st_check_shape(t, ndim ? ndim : 1, ndim ? shape : flat, L->err)) != K3_OK ||
        (s = check_aligned(L, t)) != K3_OK)
        return s;
    L->m->inputs.vector_bytes += sizeof(float) * t->numel;
    if (L->dry) {
        *out = NULL;
        return K3_OK;
    }
    float *v = owned_floats(L, (long)t->numel);
    if (!v)
        return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory copying %llu values", name,
                         (unsigned long long)t->numel);
    /* Read into the tail of the copy, then widened front to back (an f32 value c never
     * overlaps a bf16 value not yet widened); memcpy keeps the compiler's aliasing rules. */
    const st_shard *sh = st_shard_at(L->m->tensors, t->shard);
    uint8_t *raw = (uint8_t *)v + (t->dtype == ST_F32 ? 0 : 2 * t->numel);
    int error = 0;
    const size_t got = io_read_at(sh->fd, raw, t->nbytes, t->file_offset, &error);
    if (got != t->nbytes) {
        char why[768];
        io_read_describe(why, sizeof why, sh->path, t->nbytes, t->file_offset, got, error);
        return error_set(L->err, K3_ERR_IO, "tensor '%s': %s", name, why);
    }
    if (t->dtype != ST_F32)
        for (uint64_t i = 0; i < t->numel; i++) {
            uint16_t b;
            memcpy(&b, raw + 2 * i, sizeof b);
            v[i] = dtype_bf16_to_f32(b);
        }
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
    L->m->inputs.vector_bytes += sizeof(float) * (uint64_t)d;
    if (L->dry) {
        *out = NULL;
        return K3_OK;
    }
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

/* The checkpoint's conv taps, (channels, taps), rewritten in place as (taps, channels)
 * (kda.h): the conv then reads each tap's channels side by side, in vectors. */
static k3_status taps_by_position(loader *L, float *taps, int channels, int k) {
    float *copy = malloc(sizeof(float) * (size_t)channels * (size_t)k);
    if (!copy)
        return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory reordering its %d x %d taps", L->name,
                         channels, k);
    memcpy(copy, taps, sizeof(float) * (size_t)channels * (size_t)k);
    for (int c = 0; c < channels; c++)
        for (int j = 0; j < k; j++)
            taps[(long)j * channels + c] = copy[(long)c * k + j];
    free(copy);
    return K3_OK;
}

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
        if (!L->dry)
            TRY(taps_by_position(L, (float *)w->conv[c], P, K));
    }
    const st_tensor *alog = st_find(m->tensors, NAME("A_log"));
    const long alog_len = alog && alog->ndim == 1 && alog->shape[0] >= H ? (long)alog->shape[0] : H;
    TRY(bind_vector(L, NAME("A_log"), alog_len, &w->a_log));
    /* A_log is per head, zero-padded past the head count; non-zero padding would mean a
     * per-channel layout this engine would misread. */
    for (long j = H; !L->dry && j < alog_len; j++)
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

/* One routed expert projection (rows, cols): MXFP4 packed + scale, or a dense matrix. It is
 * always registered with the expert cache's read table; out is bound in place only when the
 * experts are mapped. */
static k3_status bind_expert_matrix(loader *L, int i, int moe_index, int e, int which, int rows, int cols,
                                    kernels_matrix *out) {
    static const char *names[3] = {"w1", "w3", "w2"};
    model *m = L->m;
    const st_tensor *data, *scale = NULL;
    if (m->config.expert_format == K3_EXPERTS_DENSE) {
        const char *name =
            tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", i, e, names[which]);
        TRY(require(L, name, &data));
        if (data->dtype != ST_BF16 && data->dtype != ST_F32)
            return error_set(L->err, K3_ERR_TENSOR, "tensor '%s': dtype %s, expected BF16 or F32 (%s)", name,
                             st_dtype_name(data->dtype), st_shard_at(m->tensors, data->shard)->file);
        const int64_t shape[2] = {rows, cols};
        TRY(st_check_shape(data, 2, shape, L->err));
        TRY(check_aligned(L, data));
        *out = (kernels_matrix){data->dtype == ST_F32 ? KERNELS_F32 : KERNELS_BF16, rows, cols, data->data, NULL};
    } else {
        const int64_t pshape[2] = {rows, cols / 2}, sshape[2] = {rows, cols / DTYPE_MXFP4_BLOCK};
        TRY(expect(L, tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_packed", i, e, names[which]),
                   ST_U8, 2, pshape, &data));
        TRY(expect(L, tensor_name(L, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_scale", i, e, names[which]),
                   ST_U8, 2, sshape, &scale));
        *out = (kernels_matrix){KERNELS_MXFP4, rows, cols, data->data, scale->data};
    }
    expert_cache_add(m->cache, moe_index, i, e, which, out, data, scale);
    return K3_OK;
}

static k3_status bind_moe(loader *L, int i, int moe_index, moe_weights *w) {
    const model *m = L->m;
    const moe_dims *dm = &m->moe;
    const int d = m->hidden;
    TRY(bind_matrix(L, tensor_name(L, "model.layers.%d.block_sparse_moe.gate.weight", i), dm->n_experts, d, &w->router));
    const st_tensor *bias;
    const int64_t eshape[1] = {dm->n_experts};
    TRY(expect(L, tensor_name(L, "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias", i), ST_F32, 1, eshape,
               &bias));
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
    /* Experts are not trunk: they stay out of the layer's trunk registration. */
    const int layer = L->layer;
    L->layer = -1;
    moe_expert *experts = L->m->experts ? L->m->experts + (long)moe_index * dm->n_experts : NULL;
    for (int e = 0; e < dm->n_experts; e++) {
        moe_expert ex;
        TRY(bind_expert_matrix(L, i, moe_index, e, 0, dm->inter, dm->latent, &ex.w1));
        TRY(bind_expert_matrix(L, i, moe_index, e, 1, dm->inter, dm->latent, &ex.w3));
        TRY(bind_expert_matrix(L, i, moe_index, e, 2, dm->latent, dm->inter, &ex.w2));
        if (experts)
            experts[e] = ex;
    }
    L->layer = layer;
    w->experts = experts;
    w->cache_layer = moe_index;
    return K3_OK;
}

void weights_set_dims(model *m) {
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
    L->layer = -1;
    TRY(bind_matrix(L, tensor_name(L, "model.embed_tokens.weight"), m->vocab, d, &m->embed));
    const st_tensor *embed = st_find(m->tensors, L->name);
    trunk_set_embed(m->trunk, embed);
    m->inputs.embed_bytes = embed->nbytes;
    TRY(bind_matrix(L, tensor_name(L, "lm_head.weight"), m->vocab, d, &m->lm_head));
    m->inputs.lm_head_bytes = st_find(m->tensors, L->name)->nbytes;
    TRY(bind_vector(L, tensor_name(L, "model.norm.weight"), d, &m->final_norm));
    if (m->attn_res_block > 0) {
        const float *norm, *proj;
        const int64_t row[2] = {1, d};
        TRY(bind_vector(L, tensor_name(L, "model.output_attn_res_norm.weight"), d, &norm));
        TRY(bind_vector_shaped(L, tensor_name(L, "model.output_attn_res_proj.weight"), 2, row, d, &proj));
        m->inputs.vector_bytes += sizeof(float) * (uint64_t)d;
        if (!L->dry) {
            float *q = owned_floats(L, d);
            if (!q)
                return error_set(L->err, K3_ERR_OUT_OF_MEMORY, "output attention-residual query: out of memory");
            for (int j = 0; j < d; j++)
                q[j] = norm[j] * proj[j];
            m->out_res_query = q;
        }
    }
    int moe_index = 0;
    for (int i = 0; i < m->n_layers; i++) {
        model_layer *ly = &m->layers[i];
        L->layer = i;
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
            TRY(bind_moe(L, i, moe_index++, &ly->moe));
        else
            TRY(bind_mlp(L, "model.layers.%d.mlp", i, m->dense_inter, &ly->dense));
    }
    L->layer = -1;
    /* All KDA layers share one f_a rank in the engine's scratch sizing: take the largest. */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].is_kda && m->layers[i].kda.f_a.rows > m->kda.gate_rank)
            m->kda.gate_rank = m->layers[i].kda.f_a.rows;
    return K3_OK;
}

/* Why the config uses no tensor called `rel` (its name after the text prefix), in words
 * naming the config keys involved; NULL when it is allowed to go unused (the layers of
 * num_nextn_predict_layers, after the last one). */
static const char *unused_reason(const k3_config *c, const char *rel, char *buf, size_t size) {
    int layer = -1, at = 0;
    if (!strncmp(rel, "model.output_attn_res", 21)) {
        snprintf(buf, size, "attention residuals, which attn_res_block_size null switches off");
        return buf;
    }
    if (sscanf(rel, "model.layers.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0) {
        snprintf(buf, size, "no part of the model config.json describes has such a tensor");
        return buf;
    }
    const char *rest = rel + at;
    const int L = c->num_hidden_layers, expert = strstr(rest, "experts.") ? atoi(strstr(rest, "experts.") + 8) : -1;
    if (layer >= L && layer < L + c->num_nextn_predict_layers)
        return NULL;
    if (layer >= L)
        snprintf(buf, size, "layer %d, but num_hidden_layers is %d", layer, L);
    else if (strstr(rest, "_res_"))
        snprintf(buf, size, "attention residuals, which attn_res_block_size null switches off");
    else if (!strncmp(rest, "self_attn.g_proj.", 17) && !c->layer_is_kda[layer])
        snprintf(buf, size, "the output gate of MLA layer %d, which mla_use_output_gate false switches off", layer);
    else if (!strncmp(rest, "block_sparse_moe.shared_experts.", 32))
        snprintf(buf, size, "shared experts, which num_shared_experts 0 switches off");
    else if (!strncmp(rest, "block_sparse_moe.routed_expert_norm.", 36))
        snprintf(buf, size, "the latent MoE norm, which latent_moe_use_norm false switches off");
    else if (!strncmp(rest, "block_sparse_moe.", 17) && !c->layer_is_moe[layer])
        snprintf(buf, size, "a MoE block, but first_k_dense_replace %d and moe_layer_freq %d make layer %d dense",
                 c->first_k_dense_replace, c->moe_layer_freq, layer);
    else if (!strncmp(rest, "mlp.", 4) && c->layer_is_moe[layer])
        snprintf(buf, size, "a dense MLP, but first_k_dense_replace %d and moe_layer_freq %d make layer %d MoE",
                 c->first_k_dense_replace, c->moe_layer_freq, layer);
    else if (!strncmp(rest, "block_sparse_moe.experts.", 25) && expert >= c->num_experts)
        snprintf(buf, size, "expert %d, but num_experts is %d", expert, c->num_experts);
    else if (!strncmp(rest, "self_attn.", 10))
        snprintf(buf, size, "layer %d's attention, which linear_attn_config makes %s and which has no such tensor", layer,
                 c->layer_is_kda[layer] ? "KDA" : "MLA");
    else
        snprintf(buf, size, "no part of layer %d in the model config.json describes has such a tensor", layer);
    return buf;
}

/* Refuses a tensor of the text model that the binding did not use: running without it
 * would compute another model than the checkpoint holds. */
static k3_status check_unused(loader *L) {
    const st_set *set = L->m->tensors;
    const size_t plen = strlen(L->prefix);
    for (size_t i = 0; i < st_count(set); i++) {
        const st_tensor *t = st_tensor_at(set, i);
        const char *rel = t->name + plen;
        if (L->used[i] || strncmp(t->name, L->prefix, plen) || (strncmp(rel, "model.", 6) && strncmp(rel, "lm_head.", 8)))
            continue;
        char why[256];
        if (!unused_reason(&L->m->config, rel, why, sizeof why))
            continue;
        return error_set(L->err, K3_ERR_TENSOR,
                         "tensor '%s' (%s) is not used by the model config.json describes: %s. The engine refuses "
                         "rather than run without it",
                         t->name, st_shard_at(set, t->shard)->file, why);
    }
    return K3_OK;
}

/* Adds the defaults config.c filled in to a tensor error: they may be why. */
static void note_defaults(const model *m, k3_error *err) {
    const size_t n = strlen(err->detail);
    snprintf(err->detail + n, sizeof err->detail - n,
             " (config.json leaves out %s: the KimiLinearConfig defaults were taken for them)", m->config.defaults);
}

/* Fills the plan inputs the binding pass did not: layer slots, the expert table, index. */
static k3_status finish_inputs(model *m, k3_error *err) {
    plan_inputs *in = &m->inputs;
    in->n_layers = m->n_layers;
    for (int l = 0; l < m->n_layers; l++)
        in->layer_bytes[l] = trunk_layer_bytes(m->trunk, l);
    in->top_k = m->moe.top_k;
    in->experts = (int64_t)m->config.n_moe_layers * m->moe.n_experts;
    if (in->experts > 0) {
        const k3_status s = expert_cache_layout(m->cache, err);
        if (s != K3_OK)
            return s;
        in->expert_slot_bytes = expert_cache_slot_bytes(m->cache);
        in->expert_pool_bytes = expert_cache_pool_bytes(m->cache);
    }
    /* st_set metadata is about 160 bytes a tensor (record, name, shape, hash slot). */
    in->index_bytes = 160u * (uint64_t)st_count(m->tensors) +
                      expert_cache_table_bytes(m->config.n_moe_layers, m->moe.n_experts) +
                      sizeof(model_layer) * 2u * (uint64_t)m->n_layers;
    return K3_OK;
}

k3_status weights_bind(model *m, int dry, k3_error *err) {
    loader L = {m, "", err, "", dry, -1, calloc(st_count(m->tensors) + 1, 1)};
    k3_status s = L.used ? K3_OK
                         : error_set(err, K3_ERR_OUT_OF_MEMORY, "model: out of memory for %zu tensor flags",
                                     st_count(m->tensors));
    if (s == K3_OK && (s = bind_all(&L)) == K3_OK)
        s = check_unused(&L);
    free(L.used);
    if (s == K3_ERR_TENSOR && m->config.defaults[0])
        note_defaults(m, err);
    return s == K3_OK ? finish_inputs(m, err) : s;
}

void weights_inputs_from_config(const k3_config *c, plan_inputs *in) {
    memset(in, 0, sizeof *in);
    const uint64_t d = (uint64_t)c->hidden_size, V = (uint64_t)c->vocab_size;
    const uint64_t H = (uint64_t)c->kda_num_heads, D = (uint64_t)c->kda_head_dim, P = H * D;
    const uint64_t Hm = (uint64_t)c->num_attention_heads, E = (uint64_t)c->num_experts;
    const uint64_t lat = (uint64_t)c->routed_expert_hidden_size, F = (uint64_t)c->moe_intermediate_size;
    const uint64_t sh = (uint64_t)c->shared_expert_width;
    uint64_t tensors = 5, vec = d + (c->attn_res_block_size > 0 ? 3 * d : 0);
    in->n_layers = c->num_hidden_layers;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        uint64_t elems; /* trunk matrix elements of layer i, bf16 */
        vec += 2 * d + (c->attn_res_block_size > 0 ? 6 * d : 0);
        tensors += 6;
        if (c->layer_is_kda[i]) {
            elems = 3 * P * d + D * d + P * D + H * d + P * d + d * P;
            vec += 3 * P * (uint64_t)c->kda_short_conv_kernel_size + D + P + D;
            tensors += 14;
        } else {
            const uint64_t q = (uint64_t)c->q_lora_rank, kv = (uint64_t)c->kv_lora_rank;
            const uint64_t nope = (uint64_t)c->qk_nope_head_dim, rope = (uint64_t)c->qk_rope_head_dim;
            const uint64_t v = (uint64_t)c->v_head_dim;
            elems = q * d + Hm * (nope + rope) * q + (kv + rope) * d + Hm * (nope + v) * kv +
                    (c->mla_use_output_gate ? Hm * v * d : 0) + d * Hm * v;
            vec += q + kv;
            tensors += 8;
        }
        if (c->layer_is_moe[i]) {
            elems += E * d + 2 * lat * d + 3 * sh * d;
            vec += E + (c->latent_moe_use_norm ? lat : 0);
            tensors += 8 + 6 * E;
        } else {
            elems += 3 * (uint64_t)c->intermediate_size * d;
            tensors += 3;
        }
        in->layer_bytes[i] = (2 * elems + 63) / 64 * 64;
        in->dense_file_bytes += 2 * elems;
    }
    in->embed_bytes = in->lm_head_bytes = 2 * V * d;
    in->vector_bytes = 4 * vec;
    const uint64_t expert = c->expert_format == K3_EXPERTS_MXFP4
                                ? 2 * (F * lat / 2 + F * lat / 32) + lat * F / 2 + lat * F / 32
                                : 2 * 3 * F * lat;
    in->expert_slot_bytes = (expert + 63) / 64 * 64;
    in->experts = (int64_t)c->n_moe_layers * (int64_t)E;
    in->expert_pool_bytes = expert * (uint64_t)in->experts;
    in->top_k = c->num_experts_per_token;
    in->index_bytes = 160 * tensors + expert_cache_table_bytes(c->n_moe_layers, (int)E) +
                      sizeof(model_layer) * 2u * (uint64_t)c->num_hidden_layers;
}
