// tensors.ts - the checkpoint's tensor table as the release lays it out (§2 of
// docs/k3-architecture.md): every name with its shape and dtype, derived from a config.
// It is the contract a loader checks a checkpoint against; it reads no files and says
// nothing about values.
import { ffnKind, mixerKind, type K3Config } from './config';

export type Dtype = 'BF16' | 'F32' | 'U8';

export interface TensorSpec {
  dtype: Dtype;
  shape: number[];
}

export const PREFIX = 'language_model.';

export function layerPrefix(layer: number): string {
  return `${PREFIX}model.layers.${layer}.`;
}

/** Every tensor a text-only K3 checkpoint holds for `c`, keyed by full name, in layer order. */
export function expectedTensors(c: K3Config): Map<string, TensorSpec> {
  const t = new Map<string, TensorSpec>();
  const bf16 = (name: string, ...shape: number[]) => t.set(name, { dtype: 'BF16', shape });
  const f32 = (name: string, ...shape: number[]) => t.set(name, { dtype: 'F32', shape });
  const u8 = (name: string, ...shape: number[]) => t.set(name, { dtype: 'U8', shape });
  const d = c.hiddenSize;

  bf16(`${PREFIX}model.embed_tokens.weight`, c.vocabSize, d);
  for (let i = 0; i < c.numLayers; i++) {
    const p = layerPrefix(i);
    bf16(`${p}input_layernorm.weight`, d);
    bf16(`${p}post_attention_layernorm.weight`, d);
    bf16(`${p}self_attention_res_norm.weight`, d);
    bf16(`${p}self_attention_res_proj.weight`, 1, d);
    bf16(`${p}mlp_res_norm.weight`, d);
    bf16(`${p}mlp_res_proj.weight`, 1, d);

    const a = `${p}self_attn.`;
    if (mixerKind(c, i) === 'kda') {
      const { numHeads: H, headDim: D, convSize: K } = c.kda;
      const P = H * D;
      bf16(`${a}q_proj.weight`, P, d);
      bf16(`${a}k_proj.weight`, P, d);
      bf16(`${a}v_proj.weight`, P, d);
      f32(`${a}q_conv1d.weight`, P, 1, K);
      f32(`${a}k_conv1d.weight`, P, 1, K);
      f32(`${a}v_conv1d.weight`, P, 1, K);
      bf16(`${a}f_a_proj.weight`, D, d);
      bf16(`${a}f_b_proj.weight`, P, D);
      // Per head, stored padded to head_dim with zeros (the release: [128] for 96 heads).
      f32(`${a}A_log`, D);
      f32(`${a}dt_bias`, P);
      bf16(`${a}b_proj.weight`, H, d);
      bf16(`${a}g_proj.weight`, P, d);
      f32(`${a}o_norm.weight`, D);
      bf16(`${a}o_proj.weight`, d, P);
    } else {
      const H = c.mlaHeads;
      const dq = c.qkNopeHeadDim + c.qkRopeHeadDim;
      bf16(`${a}q_a_proj.weight`, c.qLoraRank, d);
      bf16(`${a}q_a_layernorm.weight`, c.qLoraRank);
      bf16(`${a}q_b_proj.weight`, H * dq, c.qLoraRank);
      bf16(`${a}kv_a_proj_with_mqa.weight`, c.kvLoraRank + c.qkRopeHeadDim, d);
      bf16(`${a}kv_a_layernorm.weight`, c.kvLoraRank);
      bf16(`${a}kv_b_proj.weight`, H * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank);
      bf16(`${a}g_proj.weight`, H * c.vHeadDim, d);
      bf16(`${a}o_proj.weight`, d, H * c.vHeadDim);
    }

    if (ffnKind(c, i) === 'dense') {
      const m = `${p}mlp.`;
      bf16(`${m}gate_proj.weight`, c.intermediateSize, d);
      bf16(`${m}up_proj.weight`, c.intermediateSize, d);
      bf16(`${m}down_proj.weight`, d, c.intermediateSize);
    } else {
      const m = `${p}block_sparse_moe.`;
      const L = c.latentSize;
      const I = c.moeIntermediateSize;
      const S = I * c.numSharedExperts;
      bf16(`${m}gate.weight`, c.numExperts, d);
      f32(`${m}gate.e_score_correction_bias`, c.numExperts);
      bf16(`${m}routed_expert_down_proj.weight`, L, d);
      if (c.latentUseNorm) bf16(`${m}routed_expert_norm.weight`, L);
      bf16(`${m}routed_expert_up_proj.weight`, d, L);
      if (S > 0) {
        bf16(`${m}shared_experts.gate_proj.weight`, S, d);
        bf16(`${m}shared_experts.up_proj.weight`, S, d);
        bf16(`${m}shared_experts.down_proj.weight`, d, S);
      }
      for (let e = 0; e < c.numExperts; e++) {
        const x = `${m}experts.${e}.`;
        u8(`${x}w1.weight_packed`, I, L / 2);
        u8(`${x}w1.weight_scale`, I, L / 32);
        u8(`${x}w3.weight_packed`, I, L / 2);
        u8(`${x}w3.weight_scale`, I, L / 32);
        u8(`${x}w2.weight_packed`, L, I / 2);
        u8(`${x}w2.weight_scale`, L, I / 32);
      }
    }
  }
  bf16(`${PREFIX}model.norm.weight`, d);
  bf16(`${PREFIX}model.output_attn_res_norm.weight`, d);
  bf16(`${PREFIX}model.output_attn_res_proj.weight`, 1, d);
  bf16(`${PREFIX}lm_head.weight`, c.vocabSize, d);
  return t;
}

export function dtypeBytes(dtype: Dtype): number {
  return dtype === 'F32' ? 4 : dtype === 'BF16' ? 2 : 1;
}

export function tensorBytes(s: TensorSpec): number {
  return s.shape.reduce((a, b) => a * b, 1) * dtypeBytes(s.dtype);
}
