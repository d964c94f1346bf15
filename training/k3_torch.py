"""k3_torch.py - the Kimi K3 text model in PyTorch: a third implementation of
docs/k3-architecture.md §3 (after the C engine and the float64 TypeScript reference), written
for training. It runs whole sequences (batch x time) instead of one token at a time: KDA's
delta rule is the plain recurrence in token order, MLA is ordinary causal attention over the
expanded keys (the engine uses the absorbed latent form; the two agree to rounding).

Parameters are named exactly as the released checkpoint names them, without the
`language_model.` prefix, so export.py and load_checkpoint() need no renaming table.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from mxfp4 import fake_quantize


class TextConfig:
    """The text_config keys the model reads, with the layer lists turned 0-based."""

    def __init__(self, tc):
        self.hidden = tc["hidden_size"]
        self.layers = tc["num_hidden_layers"]
        self.vocab = tc["vocab_size"]
        self.eps = tc["rms_norm_eps"]
        self.beta1 = tc["activation_situ_beta"]
        self.beta2 = tc.get("activation_situ_linear_beta")
        self.block = tc.get("attn_res_block_size")
        self.dense_width = tc["intermediate_size"]
        self.first_dense = tc["first_k_dense_replace"]
        self.experts = tc["num_experts"]
        self.top_k = tc["num_experts_per_token"]
        self.expert_width = tc["moe_intermediate_size"]
        self.shared_width = tc["moe_intermediate_size"] * tc["num_shared_experts"]
        self.latent = tc["routed_expert_hidden_size"]
        self.mla_heads = tc["num_attention_heads"]
        self.q_rank = tc["q_lora_rank"]
        self.kv_rank = tc["kv_lora_rank"]
        self.nope = tc["qk_nope_head_dim"]
        self.rope = tc["qk_rope_head_dim"]
        self.v_dim = tc["v_head_dim"]
        la = tc["linear_attn_config"]
        self.kda_heads = la["num_heads"]
        self.kda_dim = la["head_dim"]
        self.conv = la["short_conv_kernel_size"]
        self.lower_bound = la.get("gate_lower_bound")
        self.mla_layers = {i - 1 for i in la["full_attn_layers"]}


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def situ(g, u, beta1, beta2):
    up = u if beta2 is None else beta2 * torch.tanh(u / beta2)
    return beta1 * torch.tanh(g / beta1) * torch.sigmoid(g) * up


def linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False)


class Weight(nn.Module):
    """A bare tensor that the checkpoint stores as `<name>.weight` (norms, conv taps, AttnRes)."""

    def __init__(self, tensor):
        super().__init__()
        self.weight = nn.Parameter(tensor)


class Glu(nn.Module):
    """SiTU-GLU MLP: the dense layer-0 MLP and the fused shared experts."""

    def __init__(self, cfg, width):
        super().__init__()
        self.cfg = cfg
        self.gate_proj = linear(cfg.hidden, width)
        self.up_proj = linear(cfg.hidden, width)
        self.down_proj = linear(width, cfg.hidden)

    def forward(self, x):
        return self.down_proj(situ(self.gate_proj(x), self.up_proj(x), self.cfg.beta1, self.cfg.beta2))


class Kda(nn.Module):
    """Kimi Delta Attention, §3.4. State per head is [key dim, value dim], decayed per key row."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, d = cfg.kda_heads, cfg.kda_dim
        p = h * d
        for name in ("q_proj", "k_proj", "v_proj", "g_proj"):
            setattr(self, name, linear(cfg.hidden, p))
        for name in ("q_conv1d", "k_conv1d", "v_conv1d"):
            setattr(self, name, Weight(torch.empty(p, 1, cfg.conv)))
        self.f_a_proj = linear(cfg.hidden, d)
        self.f_b_proj = linear(d, p)
        self.A_log = nn.Parameter(torch.zeros(h))
        self.dt_bias = nn.Parameter(torch.zeros(p))
        self.b_proj = linear(cfg.hidden, h)
        self.o_norm = Weight(torch.ones(d))
        self.o_proj = linear(p, cfg.hidden)

    def short_conv(self, u, weight):
        # Causal depthwise conv over time on the pre-conv projections; zeros before the start.
        b, t, p = u.shape
        padded = F.pad(u.transpose(1, 2), (self.cfg.conv - 1, 0))
        return F.silu(F.conv1d(padded, weight, groups=p).transpose(1, 2))

    def forward(self, x):
        cfg = self.cfg
        b, t, _ = x.shape
        h, d = cfg.kda_heads, cfg.kda_dim
        q = self.short_conv(self.q_proj(x), self.q_conv1d.weight).view(b, t, h, d)
        k = self.short_conv(self.k_proj(x), self.k_conv1d.weight).view(b, t, h, d)
        v = self.short_conv(self.v_proj(x), self.v_conv1d.weight).view(b, t, h, d)
        q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) * d ** -0.5
        k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
        z = (self.f_b_proj(self.f_a_proj(x)) + self.dt_bias).view(b, t, h, d)
        a = torch.exp(self.A_log[:h]).view(1, 1, h, 1)
        if cfg.lower_bound is not None:
            g = cfg.lower_bound * torch.sigmoid(a * z)
        else:
            g = -a * F.softplus(z)
        beta = torch.sigmoid(self.b_proj(x))
        o = delta_rule(q, k, v, g, beta)
        o = rms_norm(o, self.o_norm.weight, cfg.eps).reshape(b, t, h * d)
        return self.o_proj(o * torch.sigmoid(self.g_proj(x)))


CHUNK = 16


def delta_rule(q, k, v, g, beta):
    """The gated delta rule (decay, delta write, read the updated state), computed chunk by
    chunk in its WY form so the work is small matrix products instead of one elementwise
    update per token. q, k, v, g (log decay): [b, t, h, d]; beta: [b, t, h]. Returns o like v.

    Within a chunk starting from state S0, with G the running sum of g (per key channel):
      u_t = beta_t (v_t - S0^T (e^G_t k_t) - sum_{s<t} A_ts u_s),  A_ts = sum_c k_t k_s e^(G_t-G_s)
      o_t = S0^T (e^G_t q_t) + sum_{s<=t} B_ts u_s,                B_ts = sum_c q_t k_s e^(G_t-G_s)
      S_end = e^G_end S0 + sum_s (e^(G_end-G_s) k_s) u_s^T
    A and B are products of e^G-scaled and e^-G-scaled rows. e^-G grows as the chunk decays:
    with the release's lower-bound gate (g >= -5 per token) it stays below e^80 over a
    16-token chunk, inside float32's range.

    u is affine in S0: u = U - W S0 with U = T^-1 (beta v), W = T^-1 (beta e^G k) and
    T = I + beta A, so every triangular solve is done for all chunks at once, and only the
    two products that carry the state stay in the sequential loop over chunks; the outputs
    are computed after it from the state at each chunk's start. (One solve per chunk inside
    the loop made 1024-token training steps about twice as slow per token as 256-token ones.)"""
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    pad = -t % CHUNK
    if pad:  # k = 0, g = 0, beta = 0 leaves the state untouched; the padded outputs are dropped
        q, k, v, g = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, g))
        beta = F.pad(beta, (0, 0, 0, pad))
    n = (t + pad) // CHUNK
    q, k, g = (x.reshape(b, n, CHUNK, h, dk).permute(0, 3, 1, 2, 4) for x in (q, k, g))
    v = v.reshape(b, n, CHUNK, h, dv).permute(0, 3, 1, 2, 4)
    beta = beta.reshape(b, n, CHUNK, h).permute(0, 3, 1, 2).unsqueeze(-1)
    G = g.cumsum(-2)
    k_start, q_start = k * torch.exp(G), q * torch.exp(G)
    k_inv = (k * torch.exp(-G)).transpose(-1, -2)
    a = (k_start @ k_inv).tril(-1)
    bq = (q_start @ k_inv).tril()
    tri = torch.eye(CHUNK, dtype=q.dtype, device=q.device) + beta * a
    uw = torch.linalg.solve_triangular(tri, torch.cat([beta * v, beta * k_start], -1), upper=False, unitriangular=True)
    k_end = k * torch.exp(G[..., -1:, :] - G)
    decay_end = torch.exp(G[..., -1, :]).unsqueeze(-1)
    # unbind, not indexing: the backward of an index writes a whole zero tensor per chunk.
    chunks = zip(*(x.unbind(2) for x in (uw[..., :dv], uw[..., dv:], decay_end, k_end.transpose(-1, -2))))
    state = q.new_zeros(b, h, dk, dv)
    starts, us = [], []
    for u0_i, w_i, decay_i, k_end_i in chunks:
        u = u0_i - w_i @ state
        starts.append(state)
        us.append(u)
        state = decay_i * state + k_end_i @ u
    o = q_start @ torch.stack(starts, 2) + bq @ torch.stack(us, 2)
    o = o.permute(0, 2, 3, 1, 4).reshape(b, n * CHUNK, h, dv)
    return o[:, :t]


class Mla(nn.Module):
    """Gated NoPE MLA, §3.5, in the expanded form: per-head keys and values from kv_b_proj."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        nh = cfg.mla_heads
        self.q_a_proj = linear(cfg.hidden, cfg.q_rank)
        self.q_a_layernorm = Weight(torch.ones(cfg.q_rank))
        self.q_b_proj = linear(cfg.q_rank, nh * (cfg.nope + cfg.rope))
        self.kv_a_proj_with_mqa = linear(cfg.hidden, cfg.kv_rank + cfg.rope)
        self.kv_a_layernorm = Weight(torch.ones(cfg.kv_rank))
        self.kv_b_proj = linear(cfg.kv_rank, nh * (cfg.nope + cfg.v_dim))
        self.g_proj = linear(cfg.hidden, nh * cfg.v_dim)
        self.o_proj = linear(nh * cfg.v_dim, cfg.hidden)

    def forward(self, x):
        cfg = self.cfg
        b, t, _ = x.shape
        nh = cfg.mla_heads
        q = self.q_b_proj(rms_norm(self.q_a_proj(x), self.q_a_layernorm.weight, 1e-6))
        q = q.view(b, t, nh, cfg.nope + cfg.rope).transpose(1, 2)
        ckv = self.kv_a_proj_with_mqa(x)
        c = rms_norm(ckv[..., : cfg.kv_rank], self.kv_a_layernorm.weight, 1e-6)
        k_pe = ckv[..., cfg.kv_rank :].unsqueeze(1).expand(b, nh, t, cfg.rope)
        kv = self.kv_b_proj(c).view(b, t, nh, cfg.nope + cfg.v_dim).transpose(1, 2)
        k = torch.cat([kv[..., : cfg.nope], k_pe], -1)
        v = kv[..., cfg.nope :]
        scores = q @ k.transpose(-1, -2) * (cfg.nope + cfg.rope) ** -0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        p = torch.softmax(scores.masked_fill(causal, float("-inf")), -1)
        o = (p @ v).transpose(1, 2).reshape(b, t, nh * cfg.v_dim)
        return self.o_proj(o * torch.sigmoid(self.g_proj(x)))


class Expert(nn.Module):
    """One routed expert in the latent space (w1 gate, w3 up, w2 down); MXFP4 when exported."""

    def __init__(self, cfg):
        super().__init__()
        self.w1 = linear(cfg.latent, cfg.expert_width)
        self.w3 = linear(cfg.latent, cfg.expert_width)
        self.w2 = linear(cfg.expert_width, cfg.latent)


class Gate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.experts, cfg.hidden))
        # Selection-only bias, moved by the trainer toward balanced load (noaux_tc), never by SGD.
        self.register_buffer("e_score_correction_bias", torch.zeros(cfg.experts))


class LatentMoe(nn.Module):
    """§3.7: fp32 sigmoid router on the full-width input, bias for selection only, experts in
    the latent space, RMSNorm on the weighted aggregate, shared experts on the full width."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.gate = Gate(cfg)
        self.routed_expert_down_proj = linear(cfg.hidden, cfg.latent)
        self.routed_expert_norm = Weight(torch.ones(cfg.latent))
        self.routed_expert_up_proj = linear(cfg.latent, cfg.hidden)
        self.experts = nn.ModuleList(Expert(cfg) for _ in range(cfg.experts))
        self.shared_experts = Glu(cfg, cfg.shared_width)
        self.fake_quant = False  # set by the trainer for the quantization-aware phase
        self.last_load = None  # tokens per expert in the last forward, for the bias update

    def expert_weight(self, linear_layer):
        return fake_quantize(linear_layer.weight) if self.fake_quant else linear_layer.weight

    def forward(self, x):
        cfg = self.cfg
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        wide = torch.promote_types(flat.dtype, torch.float32)  # the router is at least fp32
        scores = torch.sigmoid(flat.to(wide) @ self.gate.weight.to(wide).t())
        chosen = torch.topk(scores + self.gate.e_score_correction_bias, cfg.top_k, dim=-1).indices
        weights = scores.gather(-1, chosen)
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        z = self.routed_expert_down_proj(flat)
        y = torch.zeros_like(z)
        load = torch.zeros(cfg.experts, device=x.device)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            load[e] = rows.numel()
            if rows.numel() == 0:
                continue
            ze = z[rows]
            hidden = situ(F.linear(ze, self.expert_weight(expert.w1)), F.linear(ze, self.expert_weight(expert.w3)),
                          cfg.beta1, cfg.beta2)
            out = F.linear(hidden, self.expert_weight(expert.w2)) * weights[rows, slot].unsqueeze(-1).to(z.dtype)
            y = y.index_add(0, rows, out)
        self.last_load = load
        y = self.routed_expert_up_proj(rms_norm(y, self.routed_expert_norm.weight, cfg.eps))
        return (y + self.shared_experts(flat)).view(shape)


def attn_res_mix(candidates, norm_weight, proj_weight):
    """Block attention residuals, §3.3: softmax over depth of scores taken on the RMS-normalised
    candidates (no gamma), applied to the raw candidates."""
    v = torch.stack(candidates, 0)
    w = norm_weight * proj_weight[0]
    s = (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5) * w).sum(-1)
    p = torch.softmax(s, 0).unsqueeze(-1)
    return (p * v).sum(0)


class Layer(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        self.cfg = cfg
        self.index = index
        self.input_layernorm = Weight(torch.ones(cfg.hidden))
        self.post_attention_layernorm = Weight(torch.ones(cfg.hidden))
        self.self_attention_res_norm = Weight(torch.ones(cfg.hidden))
        self.self_attention_res_proj = Weight(torch.zeros(1, cfg.hidden))
        self.mlp_res_norm = Weight(torch.ones(cfg.hidden))
        self.mlp_res_proj = Weight(torch.zeros(1, cfg.hidden))
        self.self_attn = Mla(cfg) if index in cfg.mla_layers else Kda(cfg)
        if index < cfg.first_dense:
            self.mlp = Glu(cfg, cfg.dense_width)
        else:
            self.block_sparse_moe = LatentMoe(cfg)

    def ffn(self, x):
        return self.mlp(x) if self.index < self.cfg.first_dense else self.block_sparse_moe(x)


class TextModel(nn.Module):
    """`language_model.model`: embeddings, layers, the output mix and the final norm."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(Layer(cfg, i) for i in range(cfg.layers))
        self.norm = Weight(torch.ones(cfg.hidden))
        self.output_attn_res_norm = Weight(torch.ones(cfg.hidden))
        self.output_attn_res_proj = Weight(torch.zeros(1, cfg.hidden))

    def forward(self, ids):
        cfg = self.cfg
        blocks, partial = [], self.embed_tokens(ids)
        for layer in self.layers:
            if cfg.block is None:
                partial = partial + layer.self_attn(rms_norm(partial, layer.input_layernorm.weight, cfg.eps))
                partial = partial + layer.ffn(rms_norm(partial, layer.post_attention_layernorm.weight, cfg.eps))
                continue
            h = partial if not blocks else attn_res_mix(blocks + [partial], layer.self_attention_res_norm.weight,
                                                        layer.self_attention_res_proj.weight)
            if layer.index % cfg.block == 0:
                blocks.append(partial)  # bank the raw layer input, restart the block sum
                partial = None
            a = layer.self_attn(rms_norm(h, layer.input_layernorm.weight, cfg.eps))
            partial = a if partial is None else partial + a
            h2 = attn_res_mix(blocks + [partial], layer.mlp_res_norm.weight, layer.mlp_res_proj.weight)
            partial = partial + layer.ffn(rms_norm(h2, layer.post_attention_layernorm.weight, cfg.eps))
        if cfg.block is not None:
            partial = attn_res_mix(blocks + [partial], self.output_attn_res_norm.weight, self.output_attn_res_proj.weight)
        return rms_norm(partial, self.norm.weight, cfg.eps)


class K3ForCausalLM(nn.Module):
    """`language_model`: the text model and the untied lm_head. state_dict() keys prefixed with
    `language_model.` are the released tensor names (experts before MXFP4 packing)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = TextModel(cfg)
        self.lm_head = linear(cfg.hidden, cfg.vocab)

    def forward(self, ids):
        return self.lm_head(self.model(ids))

    def moe_layers(self):
        return [layer.block_sparse_moe for layer in self.model.layers if hasattr(layer, "block_sparse_moe")]


OUTPUT_PROJECTIONS = ("o_proj", "down_proj", "w2", "routed_expert_up_proj")


def init_weights(model, seed):
    """Small-normal init for matrices, output projections scaled down by depth; conv taps near
    the identity; KDA decay spread so some channels remember for hundreds of tokens and others
    for a few. Norms start at one and AttnRes pseudo-queries at zero (a uniform depth mix)."""
    cfg = model.cfg
    gen = torch.Generator().manual_seed(seed)
    std = 0.02
    for name, p in model.named_parameters():
        parts = name.split(".")
        if parts[-2].endswith("_conv1d"):
            p.data.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            p.data[..., -1] += 1.0
        elif p.dim() == 2 and not parts[-2].endswith("_res_proj"):
            scale = std / math.sqrt(2 * cfg.layers) if parts[-2] in OUTPUT_PROJECTIONS else std
            p.data.copy_(torch.randn(p.shape, generator=gen) * scale)
    for layer in model.model.layers:
        if isinstance(layer.self_attn, Kda):
            kda = layer.self_attn
            kda.A_log.data.zero_()
            kda.dt_bias.data.copy_(-6.0 + 6.0 * torch.rand(kda.dt_bias.shape, generator=gen))
