"""safetensors_io.py - reads and writes the released checkpoint layout without the
safetensors package (not in Debian's torch): config.json, model.safetensors.index.json and
shards `model-XXXXX-of-XXXXXX.safetensors` (6-digit total, as released), or one
model.safetensors. Only the dtypes K3 uses: BF16, F32, U8.
"""
import json
import os
import struct

import torch

DTYPES = {"BF16": (torch.bfloat16, 2), "F32": (torch.float32, 4), "U8": (torch.uint8, 1)}
NAMES = {v[0]: k for k, v in DTYPES.items()}


def _read_shard(path, wanted):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header of {n} bytes runs past the end of the {len(data)}-byte file")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or (wanted is not None and name not in wanted):
            continue
        if meta.get("dtype") not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {meta.get('dtype')!r}, expected one of {sorted(DTYPES)}")
        dtype, size = DTYPES[meta["dtype"]]
        lo, hi = meta["data_offsets"]
        want = size
        for d in meta["shape"]:
            want *= d
        if not 0 <= lo <= hi or base + hi > len(data) or hi - lo != want:
            raise ValueError(f"{path}: tensor {name} data_offsets [{lo}, {hi}] must hold {want} bytes "
                             f"({meta['dtype']} {meta['shape']}) inside the {len(data) - base} data bytes")
        raw = bytearray(data[base + lo : base + hi])
        if dtype == torch.bfloat16:
            bits = torch.frombuffer(raw, dtype=torch.int16).to(torch.int32) << 16
            t = bits.view(torch.float32)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(meta["shape"]).clone()
    return out


def read_checkpoint(directory):
    """All tensors of a checkpoint as {name: tensor}; BF16 is widened to float32 exactly."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return _read_shard(os.path.join(directory, "model.safetensors"), None)
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        names = {n for n, s in weight_map.items() if s == shard}
        tensors.update(_read_shard(os.path.join(directory, shard), names))
    return tensors


def _tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_shards(directory, units, shard_bytes):
    """Writes `units` (lists of (name, tensor), each list kept in one shard, e.g. one expert's
    six tensors) into shards of about shard_bytes and the index. Returns the shard names."""
    groups, size = [], 0
    for unit in units:
        unit_size = sum(t.numel() * t.element_size() for _, t in unit)
        if not groups or (size and size + unit_size > shard_bytes):
            groups.append([])
            size = 0
        groups[-1].extend(unit)
        size += unit_size
    total = f"{len(groups):06d}"
    weight_map, files, total_size = {}, [], 0
    for k, group in enumerate(groups):
        file = f"model-{k + 1:05d}-of-{total}.safetensors"
        header, blobs, offset = {}, [], 0
        for name, t in group:
            blob = _tensor_bytes(t)
            header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
            blobs.append(blob)
            offset += len(blob)
            weight_map[name] = file
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(directory, file), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for blob in blobs:
                f.write(blob)
        files.append(file)
        total_size += offset
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    return files
