"""load.py - builds K3ForCausalLM from a checkpoint directory in the released layout:
config.json (text_config, or a flat config), the safetensors shards, MXFP4 experts
dequantized to the exact values the engine computes with. Every parameter must be present
with its shape; anything missing, misshapen or left over is an error naming the tensor.
"""
import json
import os

import torch

import mxfp4
from k3_torch import K3ForCausalLM, TextConfig
from safetensors_io import read_checkpoint

PREFIX = "language_model."


def read_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        raw = json.load(f)
    return TextConfig(raw.get("text_config", raw))


def load_checkpoint(directory, dtype=torch.float32):
    cfg = read_config(directory)
    model = K3ForCausalLM(cfg)
    tensors = read_checkpoint(directory)
    state = {}
    for name, param in list(model.state_dict().items()):
        full = PREFIX + name
        if full + "_packed" in tensors:  # "<name>_packed exists" is the release's MXFP4 rule
            value = mxfp4.dequantize(tensors.pop(full + "_packed"), tensors.pop(full + "_scale"))
        elif full in tensors:
            value = tensors.pop(full)
        else:
            raise ValueError(f"{directory}: tensor {full} is missing")
        if name.endswith(".A_log"):
            value = value[: param.shape[0]]  # stored padded; one entry per head is used
        if tuple(value.shape) != tuple(param.shape):
            raise ValueError(f"{directory}: {full} has shape {list(value.shape)}, expected {list(param.shape)}")
        state[name] = value
    if tensors:
        raise ValueError(f"{directory}: unexpected tensors {sorted(tensors)[:5]}")
    model.load_state_dict(state)
    return model.to(dtype)
