/* fuzz_config.c - the config harness: bytes as config.json to config_parse (every key, the
 * reference-class defaults, the layer plan), then, for a config it accepts, the plan inputs
 * the CLI computes before loading anything (weights_inputs_from_config), whose sums must
 * not overflow whatever the dimensions. */
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "model.h"

static const char *const dictionary[] = {"\"text_config\": {", "\"linear_attn_config\": {", "\"kda_layers\": [1, 2]",
                                         "\"full_attn_layers\": [3]", "\"num_hidden_layers\": 3", "\"hidden_size\": 64",
                                         "\"quantization_config\": {\"quant_method\": \"compressed-tensors\"}",
                                         "\"eos_token_id\": [1, 2]", "\"attn_res_block_size\": 1", "null", ", ", NULL};

static void run(const uint8_t *data, size_t n) {
    k3_config c;
    k3_error err;
    if (config_parse((const char *)data, n, "config.json", &c, &err) != K3_OK) {
        if (!err.detail[0])
            fuzz_fail("a refused config without a detail");
        return;
    }
    if (c.n_kda_layers + c.n_mla_layers != c.num_hidden_layers || c.n_moe_layers + c.n_dense_layers != c.num_hidden_layers)
        fuzz_fail("layer plan %d KDA + %d MLA, %d MoE + %d dense for %d layers", c.n_kda_layers, c.n_mla_layers,
                  c.n_moe_layers, c.n_dense_layers, c.num_hidden_layers);
    if (strlen(c.defaults) >= sizeof c.defaults)
        fuzz_fail("defaults not terminated");
    plan_inputs in;
    weights_inputs_from_config(&c, &in);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) { return fuzz_mutate_json(d, n, cap, r); }

const fuzz_harness fuzz_config = {"config", "bytes as config.json -> config_parse, then the plan inputs", NULL, run, mutate,
                                  dictionary, 64 << 10};
