"""configs.py - the sizes of the embedded default model: `cpu` (what this project's 2-core
machines train in about an hour, and what the repository carries: about 20 MB exported) and
`cuda` (the same architecture wider and deeper, for when a GPU is at hand). Both use every K3
feature the engine supports: KDA with the release's lower-bound gate, gated NoPE MLA on every
fourth layer and the last, AttnRes blocks, a dense SiTU layer 0, latent MoE with MXFP4
experts and a shared expert.
"""
import copy

CPU = {
    "hidden_size": 192, "num_hidden_layers": 8, "attn_res_block_size": 4,
    "full_attn_layers": [4, 8], "kda_heads": 3, "kda_head_dim": 64,
    "num_attention_heads": 3, "q_lora_rank": 96, "kv_lora_rank": 64,
    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
    "intermediate_size": 576, "num_experts": 16, "num_experts_per_token": 2,
    "moe_intermediate_size": 192, "routed_expert_hidden_size": 96, "num_shared_experts": 1,
    "ranks": 8192, "seq_len": 256, "batch": 8, "steps": 2000, "lr": 3e-3, "warmup": 60,
}

CUDA = dict(CPU, **{
    "hidden_size": 768, "num_hidden_layers": 16, "full_attn_layers": [4, 8, 12, 15, 16],
    "kda_heads": 12, "kda_head_dim": 64, "num_attention_heads": 12, "q_lora_rank": 384, "kv_lora_rank": 192,
    "intermediate_size": 2304, "num_experts": 64, "num_experts_per_token": 4,
    "moe_intermediate_size": 512, "routed_expert_hidden_size": 384, "ranks": 16384,
    "seq_len": 512, "batch": 32, "steps": 20000, "lr": 1.5e-3, "warmup": 500,
})

# The smallest shape with every feature (two AttnRes blocks, MLA last), for the export test.
TEST = dict(CPU, **{
    "hidden_size": 64, "num_hidden_layers": 5, "attn_res_block_size": 2, "full_attn_layers": [3, 5],
    "kda_heads": 2, "kda_head_dim": 32, "num_attention_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "intermediate_size": 96,
    "num_experts": 4, "moe_intermediate_size": 64, "routed_expert_hidden_size": 32, "ranks": 512,
    "long_seq_len": 512, "long_batch": 4, "long_from": 0.5,
})



def shape(hidden, layers):
    """A shape of the same family at another width and depth: 64-wide KDA and MLA heads, MLA
    on every fourth layer and the last, ranks and widths in proportion to the width (MXFP4
    needs the expert widths in multiples of 32). For measure.py and choosing a size."""
    mla = sorted({i for i in range(4, layers + 1, 4)} | {layers})
    return dict(CPU, **{
        "hidden_size": hidden, "num_hidden_layers": layers, "full_attn_layers": mla,
        "kda_heads": hidden // 64, "num_attention_heads": hidden // 64, "q_lora_rank": hidden // 2,
        "kv_lora_rank": max(32, hidden // 3 // 32 * 32), "intermediate_size": 3 * hidden,
        "moe_intermediate_size": hidden, "routed_expert_hidden_size": hidden // 2,
    })


# k3-mini v2, sized to the tokens one shared CPU thread affords in about 4.5 hours (training/README.md,
# "Choosing v2's size", has the measured figures): 4096 tokens a step, 512-token rows, then 1024-token
# rows for the last 30 % so fill-in-the-middle examples carry longer prefixes.
V2 = dict(shape(128, 8), **{"seq_len": 512, "batch": 8, "long_seq_len": 1024, "long_batch": 4, "long_from": 0.7,
                            "steps": 2000, "lr": 3e-3, "warmup": 100})

SIZES = {"cpu": CPU, "v2": V2, "cuda": CUDA, "test": TEST}


def text_config(s, vocab_size, bos, eos, pad):
    """The released text_config keys for a size (one of SIZES; docs/k3-architecture.md §1.2)."""
    layers = s["num_hidden_layers"]
    return {
        "model_type": "kimi_linear",
        "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
        "attn_res_block_size": s["attn_res_block_size"],
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad, "dtype": "bfloat16",
        "first_k_dense_replace": 1, "head_dim": s["hidden_size"] // s["num_attention_heads"],
        "hidden_act": "situ", "hidden_size": s["hidden_size"], "intermediate_size": s["intermediate_size"],
        "kv_lora_rank": s["kv_lora_rank"], "latent_moe_use_norm": True,
        "linear_attn_config": {
            "full_attn_layers": list(s["full_attn_layers"]),
            "kda_layers": [i for i in range(1, layers + 1) if i not in s["full_attn_layers"]],
            "head_dim": s["kda_head_dim"], "num_heads": s["kda_heads"], "short_conv_kernel_size": 4,
            "use_full_rank_gate": True, "gate_lower_bound": -5.0,
        },
        "max_position_embeddings": 1048576, "mla_use_nope": True, "mla_use_output_gate": True,
        "moe_intermediate_size": s["moe_intermediate_size"], "moe_layer_freq": 1, "moe_renormalize": True,
        "moe_router_activation_func": "sigmoid", "num_attention_heads": s["num_attention_heads"],
        "num_expert_group": 1, "num_experts": s["num_experts"], "num_experts_per_token": s["num_experts_per_token"],
        "num_hidden_layers": layers, "num_key_value_heads": s["num_attention_heads"],
        "num_nextn_predict_layers": 0, "num_shared_experts": s["num_shared_experts"],
        "q_lora_rank": s["q_lora_rank"], "qk_nope_head_dim": s["qk_nope_head_dim"],
        "qk_rope_head_dim": s["qk_rope_head_dim"], "rms_norm_eps": 1e-5,
        "routed_expert_hidden_size": s["routed_expert_hidden_size"], "routed_scaling_factor": 1.0,
        "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "use_grouped_topk": True,
        "v_head_dim": s["v_head_dim"], "vocab_size": vocab_size,
    }


def checkpoint_config(text):
    """The released wrapper around text_config, with the MXFP4 quantization block."""
    text = copy.deepcopy(text)
    text["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "format": "mxfp4-pack-quantized", "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "group", "group_size": 32,
                        "dynamic": False, "actorder": None, "observer": "minmax"},
            "input_activations": None, "output_activations": None}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*mlp\\..*", "re:.*shared_experts.*",
                   "re:.*block_sparse_moe\\.gate$", "re:.*routed_expert_(down|up)_proj$"],
    }
    return {
        "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
        "bos_token_id": text["bos_token_id"], "eos_token_id": text["eos_token_id"],
        "pad_token_id": text["pad_token_id"], "ignore_index": -100, "tie_word_embeddings": False,
        "text_config": text,
    }
