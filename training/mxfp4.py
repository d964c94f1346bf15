"""mxfp4.py - the release's `mxfp4-pack-quantized` format (docs/k3-architecture.md §2.8):
E2M1 codes, low nibble = even column, bit 3 = sign, one E8M0 scale byte per 32 columns.
quantize() picks per block the smallest power-of-two scale that fits the block's largest
magnitude under 6 and rounds each weight to the nearest E2M1 value; dequantize() is its
exact inverse on the grid; fake_quantize() is the straight-through version used for
quantization-aware training.
"""
import torch

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
MIDPOINTS = (E2M1[1:] + E2M1[:-1]) / 2
GROUP = 32


def _blocks(w):
    rows, cols = w.shape
    if cols % GROUP:
        raise ValueError(f"MXFP4 needs columns divisible by {GROUP}, got {tuple(w.shape)}")
    return w.reshape(rows, cols // GROUP, GROUP)


def quantize(w):
    """w: [rows, cols] float -> (packed uint8 [rows, cols/2], scale uint8 [rows, cols/32])."""
    b = _blocks(w.detach().float())
    amax = b.abs().amax(-1)
    # Smallest e with amax / 2^e <= 6; blocks of zeros take the smallest scale.
    e = torch.ceil(torch.log2(torch.clamp(amax, min=2.0 ** -126) / 6.0))
    e = torch.clamp(e, -127, 127)
    scaled = b / torch.pow(2.0, e).unsqueeze(-1)
    index = torch.bucketize(scaled.abs(), MIDPOINTS.to(scaled.device))
    sign = ((scaled < 0) & (index > 0)).to(torch.uint8)
    codes = (index.to(torch.uint8) | (sign << 3)).reshape(w.shape[0], -1)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.contiguous(), (e + 127).to(torch.uint8).contiguous()


def dequantize(packed, scale):
    """The exact weights the engine computes with: [rows, 2 * packed cols] float32."""
    rows = packed.shape[0]
    codes = torch.stack([packed & 0x0F, packed >> 4], -1).reshape(rows, -1).long()
    value = E2M1.to(packed.device)[codes & 7] * torch.where(codes & 8 > 0, -1.0, 1.0)
    factor = torch.pow(2.0, scale.float() - 127.0)
    return (value.reshape(rows, -1, GROUP) * factor.unsqueeze(-1)).reshape(rows, -1)


def fake_quantize(w):
    """Forward through the MXFP4 grid, backward as the identity (straight-through)."""
    q = dequantize(*quantize(w)).to(w.dtype)
    return w + (q - w).detach()
