/* test_config.c - config.json into k3_config: the published 0.40B text_config and the
 * full-size layer plan read back with their derived values, both layouts (text_config and
 * flat), both KDA gate forms, null-means-off fields, and every refusal (malformed JSON,
 * missing or mistyped fields, bad layer lists, inconsistent dimensions, unsupported
 * features) asserted by status and by the field and numbers its detail names. */
#include "config.h"
#include "json.h"
#include "test_files.h"

/* ---- building config.json variants ---------------------------------------------------- */

typedef struct kv {
    const char *key;
    const char *value; /* JSON text; NULL in an override removes the key */
} kv;

/* The text_config of inference-optimization/Kimi-K3-0.40B (architecture doc §6.1), minus
 * keys this engine ignores. */
static const kv base[] = {
    {"activation_situ_beta", "4.0"},
    {"activation_situ_linear_beta", "25.0"},
    {"attn_res_block_size", "4"},
    {"bos_token_id", "1"},
    {"eos_token_id", "2"},
    {"pad_token_id", "0"},
    {"first_k_dense_replace", "1"},
    {"head_dim", "74"},
    {"hidden_act", "\"situ\""},
    {"hidden_size", "1024"},
    {"intermediate_size", "2048"},
    {"kv_lora_rank", "128"},
    {"latent_moe_use_norm", "true"},
    {"linear_attn_config", "{\"full_attn_layers\": [4, 8], \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, 6, 7], "
                           "\"num_heads\": 8, \"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true}"},
    {"max_position_embeddings", "4096"},
    {"mla_use_nope", "true"},
    {"mla_use_output_gate", "true"},
    {"model_type", "\"kimi_linear\""},
    {"moe_intermediate_size", "256"},
    {"moe_layer_freq", "1"},
    {"moe_renormalize", "true"},
    {"moe_router_activation_func", "\"sigmoid\""},
    {"num_attention_heads", "8"},
    {"num_expert_group", "1"},
    {"num_experts", "8"},
    {"num_experts_per_token", "2"},
    {"num_hidden_layers", "8"},
    {"num_key_value_heads", "8"},
    {"num_nextn_predict_layers", "0"},
    {"num_shared_experts", "1"},
    {"q_lora_rank", "256"},
    {"qk_nope_head_dim", "64"},
    {"qk_rope_head_dim", "32"},
    {"rms_norm_eps", "1e-05"},
    {"rope_theta", "10000.0"},
    {"routed_expert_hidden_size", "512"},
    {"routed_scaling_factor", "1.0"},
    {"tie_word_embeddings", "false"},
    {"topk_group", "1"},
    {"topk_method", "\"noaux_tc\""},
    {"use_grouped_topk", "true"},
    {"v_head_dim", "64"},
    {"vocab_size", "163840"},
};
enum { N_BASE = sizeof base / sizeof base[0] };

#define MXFP4_QUANT                                                                                \
    "{\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\", "            \
    "\"config_groups\": {\"group_0\": {\"format\": \"mxfp4-pack-quantized\", \"targets\": [\"Linear\"], " \
    "\"weights\": {\"num_bits\": 4, \"group_size\": 32, \"type\": \"float\", \"strategy\": \"group\", "    \
    "\"symmetric\": true, \"scale_dtype\": \"torch.uint8\"}, \"input_activations\": null}}, "      \
    "\"ignore\": [\"re:.*self_attn.*\"]}"

#define LIN(kda, full, extra)                                                                      \
    "{\"full_attn_layers\": " full ", \"head_dim\": 32, \"kda_layers\": " kda ", \"num_heads\": 8, " \
    "\"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true" extra "}"

enum { CONFIG_MAX = 16384 };

/* Writes the base text_config with `over` applied into out: wrapped as the released
 * multimodal config (with `top` spliced into the top level) or flat. */
static void build(char *out, const kv *over, int n_over, bool flat, const char *top) {
    size_t k = 0;
    int first = 1;
    if (!flat)
        k += (size_t)snprintf(out + k, CONFIG_MAX - k,
                              "{\n  \"architectures\": [\"KimiK3ForConditionalGeneration\"],\n"
                              "  \"model_type\": \"kimi_k3\",%s\n  \"text_config\": ", top ? top : "");
    k += (size_t)snprintf(out + k, CONFIG_MAX - k, "{\n");
    for (int i = 0; i < N_BASE; i++) {
        const char *value = base[i].value;
        for (int j = 0; j < n_over; j++)
            if (strcmp(over[j].key, base[i].key) == 0)
                value = over[j].value;
        if (value) {
            k += (size_t)snprintf(out + k, CONFIG_MAX - k, "%s    \"%s\": %s", first ? "" : ",\n",
                                  base[i].key, value);
            first = 0;
        }
    }
    for (int j = 0; j < n_over; j++) {
        int known = 0;
        for (int i = 0; i < N_BASE; i++)
            known |= strcmp(over[j].key, base[i].key) == 0;
        if (!known && over[j].value)
            k += (size_t)snprintf(out + k, CONFIG_MAX - k, ",\n    \"%s\": %s", over[j].key, over[j].value);
    }
    k += (size_t)snprintf(out + k, CONFIG_MAX - k, "\n  }");
    if (!flat)
        snprintf(out + k, CONFIG_MAX - k, "\n}\n");
}

/* Parses the wrapped base config with overrides. */
static k3_status load(const kv *over, int n_over, k3_config *c, k3_error *err) {
    static char text[CONFIG_MAX];
    build(text, over, n_over, false, NULL);
    return config_parse(text, strlen(text), "config.json", c, err);
}

/* One override: refused with K3_ERR_CONFIG and `substr`. */
static int refuses(const char *key, const char *value, const char *substr) {
    const kv over[1] = {{key, value}};
    k3_config c;
    k3_error err = {0};
    k3_status st = load(over, 1, &c, &err);
    if (st != K3_ERR_CONFIG || !strstr(err.detail, substr)) {
        fprintf(stderr, "  %s = %s: status %s, detail \"%s\"; want config with \"%s\"\n", key,
                value ? value : "(removed)", k3_status_name(st), err.detail, substr);
        return 0;
    }
    if (c.hidden_size != 0) {
        fprintf(stderr, "  the struct is not zeroed after a refusal\n");
        return 0;
    }
    return 1;
}

/* ---- reading ------------------------------------------------------------------------------ */

TEST(config_reads_the_published_tiny_text_config) {
    k3_config c;
    k3_error err = {0};
    CHECK_OK(load(NULL, 0, &c, &err), err);
    CHECK_INT(c.hidden_size, 1024);
    CHECK_INT(c.num_hidden_layers, 8);
    CHECK_INT(c.vocab_size, 163840);
    CHECK_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
    CHECK_NEAR(c.situ_beta, 4.0, 0);
    CHECK_NEAR(c.situ_linear_beta, 25.0, 0);
    CHECK_INT(c.attn_res_block_size, 4);
    CHECK_INT(c.n_attn_res_blocks, 2);
    CHECK_INT(c.n_eos_token_ids, 1);
    CHECK_INT(c.eos_token_ids[0], 2);
    CHECK_INT(c.bos_token_id, 1);
    CHECK_INT(c.pad_token_id, 0);
    CHECK_INT(c.intermediate_size, 2048);
    CHECK_INT(c.first_k_dense_replace, 1);
    CHECK_INT(c.moe_layer_freq, 1);
    CHECK_INT(c.num_experts, 8);
    CHECK_INT(c.num_experts_per_token, 2);
    CHECK_INT(c.num_shared_experts, 1);
    CHECK_INT(c.moe_intermediate_size, 256);
    CHECK_INT(c.routed_expert_hidden_size, 512);
    CHECK(c.latent_moe_use_norm);
    CHECK(c.moe_renormalize);
    CHECK_NEAR(c.routed_scaling_factor, 1.0, 0);
    CHECK_INT(c.num_expert_group, 1);
    CHECK_INT(c.topk_group, 1);
    CHECK_INT(c.num_attention_heads, 8);
    CHECK_INT(c.num_key_value_heads, 8);
    CHECK_INT(c.q_lora_rank, 256);
    CHECK_INT(c.kv_lora_rank, 128);
    CHECK_INT(c.qk_nope_head_dim, 64);
    CHECK_INT(c.qk_rope_head_dim, 32);
    CHECK_INT(c.v_head_dim, 64);
    CHECK(c.mla_use_output_gate);
    CHECK_INT(c.kda_num_heads, 8);
    CHECK_INT(c.kda_head_dim, 32);
    CHECK_INT(c.kda_short_conv_kernel_size, 4);
    CHECK_INT(c.kda_gate, K3_KDA_GATE_SOFTPLUS); /* no gate_lower_bound in this model */
    CHECK_INT(c.expert_format, K3_EXPERTS_DENSE);
    CHECK_INT(c.expert_group_size, 0);
    /* derived: KDA at 0-based 0-2 and 4-6, MLA at 3 and 7; layer 0 dense */
    static const uint8_t kda[8] = {1, 1, 1, 0, 1, 1, 1, 0};
    static const int slot[8] = {0, 1, 2, 0, 3, 4, 5, 1};
    for (int i = 0; i < 8; i++) {
        CHECK_INT(c.layer_is_kda[i], kda[i]);
        CHECK_INT(c.layer_slot[i], slot[i]);
        CHECK_INT(c.layer_is_moe[i], i >= 1);
    }
    CHECK_INT(c.n_kda_layers, 6);
    CHECK_INT(c.n_mla_layers, 2);
    CHECK_INT(c.n_moe_layers, 7);
    CHECK_INT(c.n_dense_layers, 1);
    CHECK_INT(c.mla_qk_head_dim, 96);
    CHECK_INT(c.kda_dim, 256);
    CHECK_INT(c.shared_expert_width, 256);
}

TEST(config_flat_file_reads_the_same_as_text_config) {
    static char wrapped[CONFIG_MAX], flat[CONFIG_MAX];
    build(wrapped, NULL, 0, false, NULL);
    build(flat, NULL, 0, true, NULL);
    k3_config a, b;
    k3_error err = {0};
    CHECK_OK(config_parse(wrapped, strlen(wrapped), "config.json", &a, &err), err);
    CHECK_OK(config_parse(flat, strlen(flat), "config.json", &b, &err), err);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    /* and a flat file's messages do not invent a text_config */
    const kv over[1] = {{"kv_lora_rank", NULL}};
    build(flat, over, 1, true, NULL);
    CHECK_ERROR(config_parse(flat, strlen(flat), "config.json", &b, &err), err, K3_ERR_CONFIG,
                "config.json: kv_lora_rank is missing");
}

TEST(config_text_config_wins_over_the_top_level) {
    static char text[CONFIG_MAX];
    /* a wrapper whose top level carries a different hidden_size and the eos id */
    const kv over[1] = {{"eos_token_id", NULL}};
    build(text, over, 1, false, "\n  \"hidden_size\": 7,\n  \"eos_token_id\": 163586,");
    k3_config c;
    k3_error err = {0};
    CHECK_OK(config_parse(text, strlen(text), "config.json", &c, &err), err);
    CHECK_INT(c.hidden_size, 1024);
    CHECK_INT(c.eos_token_ids[0], 163586); /* from the top level, text_config has none */
}

TEST(config_the_extension_s_k3_code_key_is_read_past_not_refused) {
    /* k3-code's own top-level key (what the model was trained for, server/engine/modelInfo.ts)
     * sits beside the released keys; the engine reads the same config with or without it. */
    static char plain[CONFIG_MAX], marked[CONFIG_MAX];
    build(plain, NULL, 0, false, NULL);
    build(marked, NULL, 0, false, "\n  \"k3_code\": {\"chat\": false},");
    k3_config a, b;
    k3_error err = {0};
    CHECK_OK(config_parse(plain, strlen(plain), "config.json", &a, &err), err);
    CHECK_OK(config_parse(marked, strlen(marked), "config.json", &b, &err), err);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
}

TEST(config_full_size_layer_lists_put_mla_at_3_7_and_the_last_two_layers) {
    char kda[512] = "[", full[256] = "[";
    for (int l = 1; l <= 93; l++) {
        char *list = (l % 4 == 0 || l == 93) ? full : kda;
        snprintf(list + strlen(list), 16, "%s%d", strlen(list) > 1 ? ", " : "", l);
    }
    strcat(kda, "]");
    strcat(full, "]");
    char lin[1024];
    snprintf(lin, sizeof lin,
             "{\"full_attn_layers\": %s, \"head_dim\": 128, \"kda_layers\": %s, \"num_heads\": 96, "
             "\"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true, \"gate_lower_bound\": -5.0}",
             full, kda);
    const kv over[] = {
        {"num_hidden_layers", "93"}, {"hidden_size", "7168"}, {"linear_attn_config", lin},
        {"attn_res_block_size", "12"}, {"num_experts", "896"}, {"num_experts_per_token", "16"},
        {"num_shared_experts", "2"}, {"moe_intermediate_size", "3072"},
        {"routed_expert_hidden_size", "3584"}, {"num_attention_heads", "96"},
        {"num_key_value_heads", "96"}, {"q_lora_rank", "1536"}, {"kv_lora_rank", "512"},
        {"qk_nope_head_dim", "128"}, {"qk_rope_head_dim", "64"}, {"v_head_dim", "128"},
        {"intermediate_size", "33792"}, {"eos_token_id", "163586"}, {"bos_token_id", "163584"},
        {"pad_token_id", "163839"}, {"quantization_config", MXFP4_QUANT},
    };
    k3_config c;
    k3_error err = {0};
    CHECK_OK(load(over, sizeof over / sizeof over[0], &c, &err), err);
    CHECK_INT(c.n_kda_layers, 69);
    CHECK_INT(c.n_mla_layers, 24);
    /* 0-based 87..92 are M K K K M M: not i % 4 == 3 */
    static const uint8_t tail[6] = {0, 1, 1, 1, 0, 0};
    for (int i = 0; i < 6; i++)
        CHECK_INT(c.layer_is_kda[87 + i], tail[i]);
    CHECK_INT(c.layer_is_kda[0], 1);
    CHECK_INT(c.layer_is_kda[3], 0);
    CHECK_INT(c.layer_slot[92], 23);
    CHECK_INT(c.layer_slot[90], 68);
    CHECK_INT(c.n_moe_layers, 92);
    CHECK_INT(c.n_attn_res_blocks, 8); /* ceil(93 / 12) */
    CHECK_INT(c.kda_gate, K3_KDA_GATE_LOWER_BOUND);
    CHECK_NEAR(c.kda_gate_lower_bound, -5.0, 0);
    CHECK_INT(c.kda_dim, 12288);
    CHECK_INT(c.mla_qk_head_dim, 192);
    CHECK_INT(c.shared_expert_width, 6144);
    CHECK_INT(c.expert_format, K3_EXPERTS_MXFP4);
    CHECK_INT(c.expert_group_size, 32);
    CHECK_INT(c.pad_token_id, 163839);
}

TEST(config_both_kda_gate_forms_are_read) {
    k3_config c;
    k3_error err = {0};
    const kv lb[1] = {{"linear_attn_config", LIN("[1, 2, 3, 5, 6, 7]", "[4, 8]", ", \"gate_lower_bound\": -5.0")}};
    CHECK_OK(load(lb, 1, &c, &err), err);
    CHECK_INT(c.kda_gate, K3_KDA_GATE_LOWER_BOUND);
    CHECK_NEAR(c.kda_gate_lower_bound, -5.0, 0);
    const kv sp[1] = {{"linear_attn_config", LIN("[1, 2, 3, 5, 6, 7]", "[4, 8]", ", \"gate_lower_bound\": null")}};
    CHECK_OK(load(sp, 1, &c, &err), err);
    CHECK_INT(c.kda_gate, K3_KDA_GATE_SOFTPLUS);
    CHECK_NEAR(c.kda_gate_lower_bound, 0, 0);
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6, 7]", "[4, 8]", ", \"gate_lower_bound\": 0.5"),
                  "config.json: text_config.linear_attn_config.gate_lower_bound is 0.5, must be negative"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6, 7]", "[4, 8]", ", \"gate_lower_bound\": \"-5\""),
                  "gate_lower_bound is '-5', expected a number"));
}

TEST(config_null_means_off_for_the_linear_cap_and_attn_res) {
    k3_config c;
    k3_error err = {0};
    const kv over[2] = {{"activation_situ_linear_beta", "null"}, {"attn_res_block_size", "null"}};
    CHECK_OK(load(over, 2, &c, &err), err);
    CHECK_NEAR(c.situ_linear_beta, 0, 0);
    CHECK_INT(c.attn_res_block_size, 0);
    CHECK_INT(c.n_attn_res_blocks, 0);
    const kv absent[1] = {{"attn_res_block_size", NULL}};
    CHECK_OK(load(absent, 1, &c, &err), err);
    CHECK_INT(c.attn_res_block_size, 0);
}

TEST(config_moe_layer_freq_and_first_dense_layers_give_the_moe_plan) {
    k3_config c;
    k3_error err = {0};
    const kv over[2] = {{"first_k_dense_replace", "3"}, {"moe_layer_freq", "2"}};
    CHECK_OK(load(over, 2, &c, &err), err);
    static const uint8_t moe[8] = {0, 0, 0, 0, 1, 0, 1, 0};
    for (int i = 0; i < 8; i++)
        CHECK_INT(c.layer_is_moe[i], moe[i]);
    CHECK_INT(c.n_moe_layers, 2);
    CHECK_INT(c.n_dense_layers, 6);
}

TEST(config_eos_may_be_a_list_and_must_be_in_the_vocabulary) {
    k3_config c;
    k3_error err = {0};
    const kv list[1] = {{"eos_token_id", "[163586, 163585]"}};
    CHECK_OK(load(list, 1, &c, &err), err);
    CHECK_INT(c.n_eos_token_ids, 2);
    CHECK_INT(c.eos_token_ids[1], 163585);
    CHECK(refuses("eos_token_id", "163840", "text_config.eos_token_id is 163840, must be at most 163839"));
    CHECK(refuses("eos_token_id", "[1, 200000]", "text_config.eos_token_id[1] is 200000, expected a token id in 0..163839"));
    CHECK(refuses("eos_token_id", "[]", "text_config.eos_token_id lists 0 ids, expected 1..8"));
    CHECK(refuses("eos_token_id", NULL, "eos_token_id is missing (from text_config and the top level)"));
    CHECK(refuses("bos_token_id", "-1", "text_config.bos_token_id is -1, must be at least 0"));
    const kv nobos[1] = {{"bos_token_id", "null"}};
    CHECK_OK(load(nobos, 1, &c, &err), err);
    CHECK_INT(c.bos_token_id, -1);
}

TEST(config_mxfp4_quantization_is_recorded_from_text_config_or_the_top_level) {
    k3_config c;
    k3_error err = {0};
    const kv q[1] = {{"quantization_config", MXFP4_QUANT}};
    CHECK_OK(load(q, 1, &c, &err), err);
    CHECK_INT(c.expert_format, K3_EXPERTS_MXFP4);
    CHECK_INT(c.expert_group_size, 32);
    static char text[CONFIG_MAX];
    build(text, NULL, 0, false, "\n  \"quantization_config\": " MXFP4_QUANT ",");
    CHECK_OK(config_parse(text, strlen(text), "config.json", &c, &err), err);
    CHECK_INT(c.expert_format, K3_EXPERTS_MXFP4);
    build(text, NULL, 0, false, "\n  \"quantization_config\": {\"quant_method\": \"fp8\"},");
    CHECK_ERROR(config_parse(text, strlen(text), "config.json", &c, &err), err, K3_ERR_CONFIG,
                "config.json: quantization_config.quant_method is 'fp8', which this engine does not "
                "support (only 'compressed-tensors')");
}

/* ---- refusals ------------------------------------------------------------------------------ */

TEST(config_malformed_json_is_a_format_error_with_line_and_column) {
    k3_config c;
    k3_error err = {0};
    const char *text = "{\n  \"text_config\": {\n    \"hidden_size\": 1024,\n  }\n}\n";
    CHECK_ERROR(config_parse(text, strlen(text), "config.json", &c, &err), err, K3_ERR_FORMAT,
                "config.json: line 4, column 3 (byte 48): expected a string key after ',', found '}'");
    CHECK_ERROR(config_parse("[1]", 3, "config.json", &c, &err), err, K3_ERR_CONFIG,
                "config.json: the top level is JSON array, expected an object");
    CHECK_ERROR(config_parse("{\"text_config\": []}", 19, "config.json", &c, &err), err, K3_ERR_CONFIG,
                "config.json: text_config is an array, expected an object");
}

TEST(config_load_reads_a_file_and_names_it) {
    char dir[64], path[128];
    static char text[CONFIG_MAX];
    CHECK(tf_mkdtemp(dir));
    build(text, NULL, 0, false, NULL);
    CHECK(tf_write_str(dir, "config.json", text) == 0);
    tf_path(path, sizeof path, dir, "config.json");
    k3_config c;
    k3_error err = {0};
    CHECK_OK(config_load(path, &c, &err), err);
    CHECK_INT(c.num_hidden_layers, 8);
    const kv over[1] = {{"hidden_act", "\"silu\""}};
    build(text, over, 1, false, NULL);
    CHECK(tf_write_str(dir, "config.json", text) == 0);
    char want[256];
    snprintf(want, sizeof want, "%s: text_config.hidden_act is 'silu', which this engine does not support (only 'situ')", path);
    CHECK_ERROR(config_load(path, &c, &err), err, K3_ERR_CONFIG, want);
    CHECK(tf_write_str(dir, "config.json", "{\"text_config\": {\"hidden_size\": 1024,}}") == 0);
    CHECK_ERROR(config_load(path, &c, &err), err, K3_ERR_FORMAT, "config.json: line 1, column 38");
    tf_path(path, sizeof path, dir, "missing.json");
    CHECK_ERROR(config_load(path, &c, &err), err, K3_ERR_IO, "missing.json: cannot open");
    tf_rmtree(dir);
}

TEST(config_missing_and_mistyped_fields_are_named) {
    CHECK(refuses("kv_lora_rank", NULL, "config.json: text_config.kv_lora_rank is missing"));
    CHECK(refuses("hidden_size", "\"1024\"", "text_config.hidden_size is '1024', expected an integer"));
    CHECK(refuses("hidden_size", "1024.5", "text_config.hidden_size is 1024.5, expected an integer"));
    CHECK(refuses("hidden_size", "0", "text_config.hidden_size is 0, must be at least 1"));
    CHECK(refuses("hidden_size", "-7168", "text_config.hidden_size is -7168, must be at least 1"));
    CHECK(refuses("vocab_size", "100000000", "text_config.vocab_size is 100000000, must be at most 16777216"));
    CHECK(refuses("num_hidden_layers", "1000", "text_config.num_hidden_layers is 1000, must be at most 512"));
    CHECK(refuses("kv_lora_rank", "null", "text_config.kv_lora_rank is null, expected an integer"));
    CHECK(refuses("rms_norm_eps", "0", "text_config.rms_norm_eps is 0, must be a positive number"));
    CHECK(refuses("rms_norm_eps", "2", "text_config.rms_norm_eps is 2, expected a small positive number"));
    CHECK(refuses("rms_norm_eps", "1e-50", "text_config.rms_norm_eps is 1e-50, must be a positive number that a float holds"));
    CHECK(refuses("activation_situ_beta", "null", "text_config.activation_situ_beta is null, expected a number"));
    CHECK(refuses("activation_situ_beta", "-4", "text_config.activation_situ_beta is -4, must be a positive number"));
    CHECK(refuses("activation_situ_beta", NULL, "text_config.activation_situ_beta is missing (KimiLinearConfig has no default for it)"));
    CHECK(refuses("hidden_act", NULL, "text_config.hidden_act is missing, so 'silu' (the KimiLinearConfig default), which this engine does not support"));
    CHECK(refuses("moe_renormalize", "1", "text_config.moe_renormalize is 1, expected true or false"));
    CHECK(refuses("routed_scaling_factor", "0", "text_config.routed_scaling_factor is 0, must be a positive number"));
    CHECK(refuses("linear_attn_config", NULL, "text_config.linear_attn_config is missing"));
    CHECK(refuses("linear_attn_config", "[]", "text_config.linear_attn_config is an array, expected an object"));
    CHECK(refuses("linear_attn_config", "{\"kda_layers\": [1, 2, 3, 5, 6, 7], \"full_attn_layers\": [4, 8], "
                                        "\"head_dim\": 32, \"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true}",
                  "text_config.linear_attn_config.num_heads is missing"));
}

TEST(config_absent_keys_take_the_reference_class_defaults_and_are_listed) {
    k3_config c;
    k3_error err = {0};
    CHECK_OK(load(NULL, 0, &c, &err), err);
    CHECK(strcmp(c.defaults, "") == 0); /* the 0.40B text_config names every key */
    const kv gone[] = {{"moe_layer_freq", NULL},         {"num_shared_experts", NULL},     {"mla_use_output_gate", NULL},
                       {"attn_res_block_size", NULL},    {"latent_moe_use_norm", NULL},    {"activation_situ_linear_beta", NULL},
                       {"rms_norm_eps", NULL},           {"num_key_value_heads", NULL},    {"first_k_dense_replace", NULL},
                       {"moe_renormalize", NULL},        {"routed_scaling_factor", NULL},  {"moe_router_activation_func", NULL},
                       {"num_nextn_predict_layers", NULL}};
    CHECK_OK(load(gone, (int)(sizeof gone / sizeof gone[0]), &c, &err), err);
    CHECK(c.moe_layer_freq == 1 && c.first_k_dense_replace == 0 && c.n_moe_layers == 8);
    CHECK(c.num_shared_experts == 0 && c.shared_expert_width == 0);
    CHECK(!c.mla_use_output_gate && !c.latent_moe_use_norm && c.moe_renormalize);
    CHECK(c.attn_res_block_size == 0 && c.n_attn_res_blocks == 0 && c.situ_linear_beta == 0.0f);
    CHECK(c.rms_norm_eps == 1e-6f && c.routed_scaling_factor == 1.0f);
    CHECK(c.num_key_value_heads == c.num_attention_heads && c.num_nextn_predict_layers == 0);
    CHECK(strstr(c.defaults, "text_config.moe_layer_freq 1") != NULL);
    CHECK(strstr(c.defaults, "text_config.num_shared_experts 0") != NULL);
    CHECK(strstr(c.defaults, "text_config.mla_use_output_gate false") != NULL);
    CHECK(strstr(c.defaults, "text_config.attn_res_block_size null") != NULL);
    CHECK(strstr(c.defaults, "text_config.rms_norm_eps 1e-06") != NULL);
    CHECK(strstr(c.defaults, "text_config.num_key_value_heads = num_attention_heads") != NULL);
    /* Dimensions too: the shapes then decide (weights.c names the tensor and these). */
    const kv dims[] = {{"hidden_size", NULL}, {"num_attention_heads", NULL}, {"num_key_value_heads", NULL}};
    CHECK_OK(load(dims, 3, &c, &err), err);
    CHECK(c.hidden_size == 4096 && c.num_attention_heads == 32 && c.num_key_value_heads == 32);
    CHECK(strcmp(c.defaults, "text_config.hidden_size 4096, text_config.num_attention_heads 32, "
                             "text_config.num_key_value_heads = num_attention_heads") == 0);
}

TEST(config_layer_lists_must_cover_every_layer_once_and_be_1_based) {
    CHECK(refuses("linear_attn_config", LIN("[0, 1, 2, 4, 5, 6]", "[3, 7]", ""),
                  "text_config.linear_attn_config.kda_layers[0] is 0, but layer numbers are 1-based (1..8)"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6, 7]", "[4, 9]", ""),
                  "text_config.linear_attn_config.full_attn_layers[1] is 9, outside 1..8 (1-based; num_hidden_layers is 8)"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6, -7]", "[4, 8]", ""),
                  "kda_layers[5] is -7, outside 1..8"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 5, 6, 7]", "[4, 8]", ""),
                  "text_config.linear_attn_config.kda_layers lists layer 5 twice"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 4, 5, 6, 7]", "[4, 8]", ""),
                  "text_config.linear_attn_config.full_attn_layers and "
                  "text_config.linear_attn_config.kda_layers both list layer 4"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6]", "[4]", ""),
                  "config.json: layer 7 (1-based) is in neither text_config.linear_attn_config.kda_layers nor "
                  "text_config.linear_attn_config.full_attn_layers (2 of the 8 layers are in neither)"));
    CHECK(refuses("linear_attn_config", LIN("[1, 2, 3, 5, 6, 7.5]", "[4, 8]", ""),
                  "kda_layers[5] is 7.5, expected a 1-based layer number"));
    CHECK(refuses("linear_attn_config", LIN("\"1-7\"", "[4, 8]", ""),
                  "kda_layers is '1-7', expected an array of 1-based layer numbers"));
}

TEST(config_inconsistent_dimensions_are_refused_with_the_numbers) {
    CHECK(refuses("num_experts_per_token", "9", "text_config.num_experts_per_token is 9, more than num_experts (8)"));
    CHECK(refuses("num_key_value_heads", "3", "text_config.num_key_value_heads is 3, which does not divide num_attention_heads (8)"));
    CHECK(refuses("num_key_value_heads", "16", "text_config.num_key_value_heads is 16, must be at most 8"));
    CHECK(refuses("first_k_dense_replace", "9", "text_config.first_k_dense_replace is 9, must be at most 8"));
    CHECK(refuses("moe_layer_freq", "0", "text_config.moe_layer_freq is 0, must be at least 1"));
    CHECK(refuses("attn_res_block_size", "0", "text_config.attn_res_block_size is 0, must be at least 1"));
    CHECK(refuses("num_shared_experts", "-1", "text_config.num_shared_experts is -1, must be at least 0"));
    CHECK(refuses("linear_attn_config", "{\"full_attn_layers\": [4, 8], \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, 6, 7], "
                                        "\"num_heads\": 8, \"short_conv_kernel_size\": 0, \"use_full_rank_gate\": true}",
                  "text_config.linear_attn_config.short_conv_kernel_size is 0, must be at least 1"));
    static const char *over_heads = "{\"full_attn_layers\": [4, 8], \"head_dim\": 8192, \"kda_layers\": [1, 2, 3, 5, 6, 7], "
                                    "\"num_heads\": 4096, \"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true}";
    CHECK(refuses("linear_attn_config", over_heads,
                  "text_config.linear_attn_config.num_heads is 4096: num_heads * head_dim = 33554432 exceeds 16777216"));
}

TEST(config_mxfp4_needs_expert_columns_in_groups_of_32_and_at_most_16384) {
    k3_config c;
    k3_error err = {0};
    const kv latent[2] = {{"quantization_config", MXFP4_QUANT}, {"routed_expert_hidden_size", "500"}};
    CHECK_ERROR(load(latent, 2, &c, &err), err, K3_ERR_CONFIG,
                "text_config.routed_expert_hidden_size is 500, not a multiple of 32: the MXFP4 experts' "
                "w1/w3 columns come in groups of 32");
    const kv inter[2] = {{"quantization_config", MXFP4_QUANT}, {"moe_intermediate_size", "100"}};
    CHECK_ERROR(load(inter, 2, &c, &err), err, K3_ERR_CONFIG,
                "text_config.moe_intermediate_size is 100, not a multiple of 32: the MXFP4 experts' w2 columns");
    const kv wide[2] = {{"quantization_config", MXFP4_QUANT}, {"routed_expert_hidden_size", "16416"}};
    CHECK_ERROR(load(wide, 2, &c, &err), err, K3_ERR_CONFIG,
                "text_config.routed_expert_hidden_size is 16416: the MXFP4 kernels take at most 16384 columns");
    const kv wide_inter[2] = {{"quantization_config", MXFP4_QUANT}, {"moe_intermediate_size", "16416"}};
    CHECK_ERROR(load(wide_inter, 2, &c, &err), err, K3_ERR_CONFIG,
                "text_config.moe_intermediate_size is 16416: the MXFP4 kernels take at most 16384 columns");
    /* without quantization the same widths are fine */
    const kv dense[1] = {{"routed_expert_hidden_size", "500"}};
    CHECK_OK(load(dense, 1, &c, &err), err);
}

TEST(config_other_quantization_schemes_are_refused_by_name) {
    CHECK(refuses("quantization_config", "{\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\"}",
                  "text_config.quantization_config.format is 'nvfp4-pack-quantized', which this engine does not "
                  "support (only 'mxfp4-pack-quantized')"));
    CHECK(refuses("quantization_config", "{\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\", "
                                         "\"config_groups\": {\"g\": {\"weights\": {\"num_bits\": 4, \"group_size\": 16}}}}",
                  "text_config.quantization_config.config_groups.g.weights.group_size is 16, expected 32"));
    CHECK(refuses("quantization_config", "{\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\", "
                                         "\"config_groups\": {\"g\": {\"weights\": {\"num_bits\": 8}}}}",
                  "text_config.quantization_config.config_groups.g.weights.num_bits is 8, expected 4"));
    CHECK(refuses("quantization_config", "{\"quant_method\": \"compressed-tensors\", "
                                         "\"config_groups\": {\"g\": {\"format\": \"int-quantized\"}}}",
                  "text_config.quantization_config.config_groups.g.format is 'int-quantized'"));
    CHECK(refuses("quantization_config", "{\"quant_method\": \"compressed-tensors\"}",
                  "text_config.quantization_config names no format (expected mxfp4-pack-quantized)"));
    CHECK(refuses("quantization_config", "{\"quant_method\": \"awq\", \"bits\": 4}",
                  "text_config.quantization_config.quant_method is 'awq', which this engine does not support"));
    CHECK(refuses("quantization_config", "\"mxfp4\"", "text_config.quantization_config is 'mxfp4', expected an object"));
}

TEST(config_unsupported_features_are_refused_by_name) {
    CHECK(refuses("hidden_act", "\"silu\"", "text_config.hidden_act is 'silu', which this engine does not support (only 'situ')"));
    CHECK(refuses("q_lora_rank", "null", "text_config.q_lora_rank is null (a plain q_proj without the query LoRA), which this engine does not support"));
    CHECK(refuses("routed_expert_hidden_size", "null",
                  "text_config.routed_expert_hidden_size is null (routed experts at full width, no latent projection)"));
    CHECK(refuses("mla_use_nope", "false", "text_config.mla_use_nope is false (RoPE attention), which this engine does not support"));
    CHECK(refuses("mla_use_nope", NULL, "text_config.mla_use_nope is missing, so false (the KimiLinearConfig default): this engine implements only NoPE MLA"));
    CHECK(refuses("tie_word_embeddings", "true", "text_config.tie_word_embeddings is true: this engine needs a separate lm_head"));
    CHECK(refuses("moe_router_activation_func", "\"softmax\"",
                  "text_config.moe_router_activation_func is 'softmax', which this engine does not support (only 'sigmoid')"));
    CHECK(refuses("topk_method", "\"greedy\"", "text_config.topk_method is 'greedy', which this engine does not support (only 'noaux_tc')"));
    CHECK(refuses("linear_attn_config", "{\"full_attn_layers\": [4, 8], \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, 6, 7], "
                                        "\"num_heads\": 8, \"short_conv_kernel_size\": 4, \"use_full_rank_gate\": false}",
                  "text_config.linear_attn_config.use_full_rank_gate is false: the low-rank output gate "
                  "(g_a_proj/g_b_proj) is not supported yet"));
    CHECK(refuses("linear_attn_config", "{\"full_attn_layers\": [4, 8], \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, 6, 7], "
                                        "\"num_heads\": 8, \"short_conv_kernel_size\": 4}",
                  "use_full_rank_gate is missing (so false): the low-rank output gate"));

    /* group-limited routing: refused only when it would change the selection */
    k3_config c;
    k3_error err = {0};
    const kv groups[2] = {{"num_expert_group", "8"}, {"topk_group", "4"}};
    CHECK_ERROR(load(groups, 2, &c, &err), err, K3_ERR_CONFIG,
                "text_config.num_expert_group is 8 with topk_group 4: group-limited routing is not supported");
    const kv noop[2] = {{"num_expert_group", "4"}, {"topk_group", "4"}};
    CHECK_OK(load(noop, 2, &c, &err), err);

    /* tie_word_embeddings is also checked at the top level of the wrapper */
    static char text[CONFIG_MAX];
    build(text, NULL, 0, false, "\n  \"tie_word_embeddings\": true,");
    CHECK_ERROR(config_parse(text, strlen(text), "config.json", &c, &err), err, K3_ERR_CONFIG,
                "config.json: tie_word_embeddings is true");
}

TEST(config_every_allocation_failure_is_reported_and_leaks_nothing) {
    static char text[CONFIG_MAX];
    build(text, NULL, 0, false, NULL);
    for (long n = 1;; n++) {
        json_fault_alloc(n);
        k3_config c;
        k3_error err = {0};
        k3_status st = config_parse(text, strlen(text), "config.json", &c, &err);
        json_fault_alloc(0);
        if (st == K3_OK) {
            CHECK_INT(c.num_hidden_layers, 8);
            CHECK(n > 1); /* at least the document itself was refused once */
            break;
        }
        CHECK_ERROR(st, err, K3_ERR_OUT_OF_MEMORY, "out of memory");
        CHECK_INT(c.hidden_size, 0);
        CHECK(n < 20);
    }
}
