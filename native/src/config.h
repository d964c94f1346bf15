/* config.h - config.json of a Kimi K3 checkpoint as a validated struct: the hyper-
 * parameters the engine reads, the per-layer plan derived from them, and a refusal, naming
 * the field and the numbers, of everything this engine does not implement. It knows
 * nothing about tensors (weights.c checks them against these numbers).
 *
 * Where values come from: `text_config` when the file has one (the released multimodal
 * wrapper), else the top level (flat tiny fixtures). eos/bos/pad ids, tie_word_embeddings
 * and quantization_config are looked up in text_config first and then at the top level,
 * because the wrapper carries them there. Field names below are the JSON keys unless a
 * comment says otherwise; messages name keys as "text_config.q_lora_rank" or
 * "linear_attn_config.kda_layers" so the user can find them.
 *
 * Defaults: a key that is absent takes the default of the reference config class,
 * KimiLinearConfig (configuration_kimi_k3.py of the release), exactly as Hugging Face would
 * read the file: vocab_size 163840, hidden_size 4096, intermediate_size 11008,
 * num_hidden_layers 32, num_attention_heads 32, num_key_value_heads = num_attention_heads,
 * hidden_act "silu", rms_norm_eps 1e-6, moe_renormalize true, moe_router_activation_func
 * "sigmoid", num_shared_experts 0, routed_scaling_factor 1.0, first_k_dense_replace 0,
 * moe_layer_freq 1, num_expert_group 1, topk_group 1, topk_method "noaux_tc",
 * mla_use_nope false, mla_use_output_gate false, latent_moe_use_norm false,
 * attn_res_block_size null, activation_situ_linear_beta null, num_nextn_predict_layers 0.
 * Each one taken is listed in k3_config.defaults, and weights.c then requires the
 * checkpoint's tensors to match the config exactly (none missing, none unused), naming the
 * tensor and those defaults when they do not: a default that switches a feature off while
 * the checkpoint carries its weights is refused, not run without them.
 * Required keys, whose class default is null (a feature this engine does not run without)
 * or absent: q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
 * num_experts, num_experts_per_token, moe_intermediate_size, routed_expert_hidden_size,
 * activation_situ_beta, linear_attn_config and its num_heads, head_dim,
 * short_conv_kernel_size, kda_layers, full_attn_layers; and eos_token_id, whose class
 * default (2) is an ordinary token of the release's vocabulary, so stopping there would be
 * wrong. bos_token_id and pad_token_id do not affect the engine: -1 when absent. Keys the
 * engine ignores: head_dim (unused by K3), max_position_embeddings, rope_*,
 * use_grouped_topk, dtype, vision_config, model_type and anything else not named here.
 *
 * Refused (K3_ERR_CONFIG, by name): hidden_act other than "situ"; q_lora_rank null
 * (plain q_proj); routed_expert_hidden_size null (no latent MoE); mla_use_nope false or
 * missing (RoPE is not implemented); tie_word_embeddings true; moe_router_activation_func
 * other than "sigmoid"; topk_method other than "noaux_tc"; num_expert_group > 1 with
 * num_expert_group > topk_group (group-limited routing); use_full_rank_gate false or
 * missing (the low-rank Kimi-Linear output gate); a quantization_config other than
 * compressed-tensors mxfp4-pack-quantized with 4-bit weights in groups of 32.
 *
 * The struct holds no pointers: it may be copied, and needs no freeing. */
#ifndef K3_CONFIG_H
#define K3_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Upper bounds that keep k3_config fixed-size; the released model has 93 layers. */
#define K3_CONFIG_MAX_LAYERS 512
#define K3_CONFIG_MAX_EOS 8
/* Every dimension must be in [1, K3_CONFIG_MAX_DIM], so a product of two fits in int64. */
#define K3_CONFIG_MAX_DIM (1 << 24)

/* KDA decay gate: g = -exp(A_log[h]) * softplus(z + dt_bias) (Kimi-Linear, no
 * gate_lower_bound key) or the lower-bounded form of §3.4 (gate_lower_bound present). */
typedef enum k3_kda_gate {
    K3_KDA_GATE_SOFTPLUS = 0,
    K3_KDA_GATE_LOWER_BOUND = 1
} k3_kda_gate;

/* How routed-expert weights are stored: as ordinary tensors in the checkpoint dtype (no
 * quantization_config), or MXFP4 (weight_packed U8 [rows, cols/2] + weight_scale U8
 * [rows, cols/32]). Everything else is never quantized. */
typedef enum k3_expert_format {
    K3_EXPERTS_DENSE = 0,
    K3_EXPERTS_MXFP4 = 1
} k3_expert_format;

typedef struct k3_config {
    /* ---- trunk ---- */
    int hidden_size;       /* d, the residual stream width */
    int num_hidden_layers; /* L */
    int vocab_size;        /* rows of embed_tokens and lm_head */
    float rms_norm_eps;    /* every RMSNorm except the MLA LoRA norms (whose 1e-6 is fixed by the model code) */
    /* SiTU-GLU act(g, u) = b1*tanh(g/b1)*sigmoid(g) * b2*tanh(u/b2); hidden_act must be "situ" */
    float situ_beta;        /* activation_situ_beta: b1 > 0 */
    float situ_linear_beta; /* activation_situ_linear_beta: b2 > 0, or 0 when null: no cap, the up branch is u */
    int attn_res_block_size; /* layers per AttnRes block; 0 when null or absent: plain residual */
    int num_nextn_predict_layers; /* multi-token-prediction layers after the L layers: their
                                     tensors (model.layers.L ...) are allowed and left unused */
    int eos_token_ids[K3_CONFIG_MAX_EOS]; /* eos_token_id, a number or a list; each < vocab_size */
    int n_eos_token_ids;                   /* >= 1 */
    int bos_token_id; /* -1 when absent or null */
    int pad_token_id; /* -1 when absent or null */

    /* ---- channel mixer: dense MLP and latent MoE ---- */
    int intermediate_size;     /* dense MLP width */
    int first_k_dense_replace; /* layers [0, this) are dense; 0..L */
    int moe_layer_freq;        /* >= 1; see layer_is_moe */
    int num_experts;           /* routed experts E */
    int num_experts_per_token; /* top-k, 1..E */
    int num_shared_experts;    /* >= 0; fused into one MLP of width moe_intermediate_size * this */
    int moe_intermediate_size; /* F, routed expert width */
    int routed_expert_hidden_size; /* the latent width experts run in (down-proj d -> this) */
    bool latent_moe_use_norm;      /* RMSNorm(routed_expert_hidden_size) on the summed expert output */
    bool moe_renormalize;          /* divide the top-k weights by their sum */
    float routed_scaling_factor;   /* > 0, multiplies the routed weights after renormalizing */
    int num_expert_group;          /* default 1; grouping is a no-op (see the refusals) */
    int topk_group;                /* default 1 */
    /* topk_method: only "noaux_tc" (default): select on sigmoid score + e_score_correction_bias,
     * weight by the score alone. moe_router_activation_func: only "sigmoid". */

    /* ---- MLA (gated, NoPE: no rotary embedding anywhere) ---- */
    int num_attention_heads;   /* H_mla */
    int num_key_value_heads;   /* divides num_attention_heads; irrelevant to MLA math */
    int q_lora_rank;
    int kv_lora_rank;
    int qk_nope_head_dim;
    int qk_rope_head_dim;      /* "rope" dims are ordinary extra q.k dims: never rotated */
    int v_head_dim;
    bool mla_use_output_gate;  /* default false: sigmoid(g_proj x) gate before o_proj */

    /* ---- KDA (linear_attn_config) ---- */
    int kda_num_heads;          /* num_heads */
    int kda_head_dim;           /* head_dim: D = D_k = D_v */
    int kda_short_conv_kernel_size; /* short_conv_kernel_size: causal depthwise taps, >= 1 */
    k3_kda_gate kda_gate;
    float kda_gate_lower_bound; /* gate_lower_bound (< 0) when kda_gate is LOWER_BOUND, else 0 */

    /* ---- quantization_config ---- */
    k3_expert_format expert_format;
    int expert_group_size; /* columns per E8M0 scale: 32 for MXFP4, 0 for dense */

    /* ---- derived: the per-layer plan, index = 0-based layer ---- */
    uint8_t layer_is_kda[K3_CONFIG_MAX_LAYERS]; /* (L) 1 = KDA, 0 = MLA; from the 1-BASED lists */
    uint8_t layer_is_moe[K3_CONFIG_MAX_LAYERS]; /* (L) 1 iff i >= first_k_dense_replace && i % moe_layer_freq == 0 */
    int layer_slot[K3_CONFIG_MAX_LAYERS];       /* (L) index among layers of the same mixer type:
                                                   the KDA state or MLA cache this layer owns */
    int n_kda_layers, n_mla_layers;
    int n_moe_layers, n_dense_layers;
    int mla_qk_head_dim;     /* qk_nope_head_dim + qk_rope_head_dim (score scale = this^-1/2) */
    int kda_dim;             /* kda_num_heads * kda_head_dim */
    int shared_expert_width; /* moe_intermediate_size * num_shared_experts (0: no shared MLP) */
    int n_attn_res_blocks;   /* ceil(L / attn_res_block_size); 0 when plain residual */

    /* Keys absent from config.json and the defaults they took, for messages:
     * "text_config.moe_layer_freq 1, text_config.mla_use_output_gate false"; "" when none. */
    char defaults[768];
} k3_config;

/* Reads and validates config.json at `path` into *out (fully overwritten). Errors:
 * K3_ERR_IO (unreadable), K3_ERR_FORMAT (not JSON: line and column), K3_ERR_CONFIG
 * (a missing, mistyped, inconsistent or unsupported field: the detail names it as
 * "text_config.num_experts_per_token" and gives the numbers), K3_ERR_OUT_OF_MEMORY.
 * On failure *out is zeroed. */
k3_status config_load(const char *path, k3_config *out, k3_error *err);

/* As config_load, from JSON text already in memory; `name` prefixes error details. */
k3_status config_parse(const char *text, size_t len, const char *name, k3_config *out,
                       k3_error *err);

#endif
