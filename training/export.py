"""export.py - writes a trained K3ForCausalLM in the released checkpoint layout: config.json,
safetensors shards with model.safetensors.index.json, `language_model.` names, the release's
dtypes (F32 for the KDA gate parameters, conv taps, o_norm and the router bias; MXFP4 for the
routed experts, one expert's six tensors back to back in one shard; BF16 for everything else).
"""
import json
import os
import re

import torch

import mxfp4
from safetensors_io import write_shards

F32_SUFFIXES = (".A_log", ".dt_bias", "_conv1d.weight", ".o_norm.weight", ".e_score_correction_bias")
EXPERT = re.compile(r"(.*\.experts\.\d+)\.(w[123])\.weight$")
SHARD_BYTES = 8 << 20


def write_checkpoint(directory, model, config):
    os.makedirs(directory, exist_ok=True)
    for f in os.listdir(directory):
        if re.fullmatch(r"model(-\d{5}-of-\d{6})?\.safetensors", f):
            os.remove(os.path.join(directory, f))
    units, experts = [], {}
    for name, t in model.state_dict().items():
        full = "language_model." + name
        t = t.detach().float().cpu()
        m = EXPERT.match(name)
        if m:
            packed, scale = mxfp4.quantize(t)
            experts.setdefault(m.group(1), {})[m.group(2)] = [(full + "_packed", packed), (full + "_scale", scale)]
        elif full.endswith(F32_SUFFIXES):
            units.append([(full, t.contiguous())])
        else:
            units.append([(full, t.to(torch.bfloat16).contiguous())])
    for parts in experts.values():
        units.append(parts["w1"] + parts["w3"] + parts["w2"])
    shards = write_shards(directory, units, SHARD_BYTES)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return shards
