// config.ts - reads a K3 `config.json` into the typed text configuration the reference
// forward pass uses, with the release's semantics (§1 of docs/k3-architecture.md): the text
// model lives in `text_config` (a flat file is accepted too), layer lists are 1-based, KDA
// uses `linear_attn_config.head_dim` (never the top-level `head_dim`). It validates what the
// reference depends on and rejects release variants the reference does not implement; it
// knows nothing about tensor names (tensors.ts) or the math (the other files).

export type MixerKind = 'kda' | 'mla';
export type FfnKind = 'dense' | 'moe';

export interface KdaConfig {
  numHeads: number;
  headDim: number;
  convSize: number;
  /** K3's lower-bounded decay gate when set; null selects the Kimi-Linear softplus form. */
  gateLowerBound: number | null;
  /** 1-based, as stored. */
  kdaLayers: number[];
  /** 1-based, as stored. */
  fullAttnLayers: number[];
}

export interface K3Config {
  hiddenSize: number;
  numLayers: number;
  vocabSize: number;
  rmsNormEps: number;
  situBeta: number;
  /** null: the up branch of SiTU is not capped. */
  situLinearBeta: number | null;
  intermediateSize: number;
  firstKDenseReplace: number;
  moeLayerFreq: number;
  numExperts: number;
  topK: number;
  numSharedExperts: number;
  moeIntermediateSize: number;
  latentSize: number;
  latentUseNorm: boolean;
  renormalize: boolean;
  routedScalingFactor: number;
  mlaHeads: number;
  qLoraRank: number;
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
  attnResBlockSize: number;
  kda: KdaConfig;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function int(o: Json, key: string, where: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
    throw new Error(`config: ${where}.${key} must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return v;
}

function num(o: Json, key: string, where: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new Error(`config: ${where}.${key} must be a number, got ${JSON.stringify(v)}`);
  }
  return v;
}

function optNum(o: Json, key: string, where: string): number | null {
  return o[key] === undefined || o[key] === null ? null : num(o, key, where);
}

function bool(o: Json, key: string, where: string, dflt: boolean): boolean {
  const v = o[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new Error(`config: ${where}.${key} must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

function intList(o: Json, key: string, where: string): number[] {
  const v = o[key];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isInteger(x))) {
    throw new Error(`config: ${where}.${key} must be a list of integers`);
  }
  return v as number[];
}

/** Parses the parsed JSON of a config.json. Throws an Error naming the offending key. */
export function parseConfig(json: unknown): K3Config {
  if (!isObject(json)) throw new Error('config: not a JSON object');
  const t = isObject(json.text_config) ? json.text_config : json;
  const w = isObject(json.text_config) ? 'text_config' : 'config';
  if (!isObject(t.linear_attn_config)) throw new Error(`config: ${w}.linear_attn_config is missing`);
  const la = t.linear_attn_config;
  const lw = `${w}.linear_attn_config`;

  const unsupported = (what: string) => {
    throw new Error(`config: the reference does not implement ${what}`);
  };
  if (t.q_lora_rank === null) unsupported('q_lora_rank = null (plain q_proj)');
  if (t.routed_expert_hidden_size === null) unsupported('routed_expert_hidden_size = null (no latent MoE)');
  if (t.attn_res_block_size === null || t.attn_res_block_size === undefined) unsupported('a plain residual (attn_res_block_size = null)');
  if (la.use_full_rank_gate === false) unsupported('use_full_rank_gate = false (low-rank KDA output gate)');
  if (t.mla_use_nope === false) unsupported('mla_use_nope = false (RoPE)');
  if (t.moe_router_activation_func !== undefined && t.moe_router_activation_func !== 'sigmoid') {
    unsupported(`moe_router_activation_func = ${JSON.stringify(t.moe_router_activation_func)}`);
  }

  const cfg: K3Config = {
    hiddenSize: int(t, 'hidden_size', w),
    numLayers: int(t, 'num_hidden_layers', w),
    vocabSize: int(t, 'vocab_size', w),
    rmsNormEps: num(t, 'rms_norm_eps', w),
    situBeta: num(t, 'activation_situ_beta', w),
    situLinearBeta: optNum(t, 'activation_situ_linear_beta', w),
    intermediateSize: int(t, 'intermediate_size', w),
    firstKDenseReplace: int(t, 'first_k_dense_replace', w),
    moeLayerFreq: int(t, 'moe_layer_freq', w),
    numExperts: int(t, 'num_experts', w),
    topK: int(t, 'num_experts_per_token', w),
    numSharedExperts: int(t, 'num_shared_experts', w),
    moeIntermediateSize: int(t, 'moe_intermediate_size', w),
    latentSize: int(t, 'routed_expert_hidden_size', w),
    latentUseNorm: bool(t, 'latent_moe_use_norm', w, false),
    renormalize: bool(t, 'moe_renormalize', w, true),
    routedScalingFactor: num(t, 'routed_scaling_factor', w),
    mlaHeads: int(t, 'num_attention_heads', w),
    qLoraRank: int(t, 'q_lora_rank', w),
    kvLoraRank: int(t, 'kv_lora_rank', w),
    qkNopeHeadDim: int(t, 'qk_nope_head_dim', w),
    qkRopeHeadDim: int(t, 'qk_rope_head_dim', w),
    vHeadDim: int(t, 'v_head_dim', w),
    attnResBlockSize: int(t, 'attn_res_block_size', w),
    kda: {
      numHeads: int(la, 'num_heads', lw),
      headDim: int(la, 'head_dim', lw),
      convSize: int(la, 'short_conv_kernel_size', lw),
      gateLowerBound: optNum(la, 'gate_lower_bound', lw),
      kdaLayers: intList(la, 'kda_layers', lw),
      fullAttnLayers: intList(la, 'full_attn_layers', lw),
    },
  };
  validate(cfg);
  return cfg;
}

function validate(c: K3Config): void {
  const fail = (msg: string) => {
    throw new Error(`config: ${msg}`);
  };
  const seen = new Set<number>();
  for (const l of [...c.kda.kdaLayers, ...c.kda.fullAttnLayers]) {
    if (l < 1 || l > c.numLayers) fail(`layer ${l} in linear_attn_config is outside 1..${c.numLayers} (the lists are 1-based)`);
    if (seen.has(l)) fail(`layer ${l} is listed twice in kda_layers/full_attn_layers`);
    seen.add(l);
  }
  if (seen.size !== c.numLayers) fail(`kda_layers and full_attn_layers cover ${seen.size} of ${c.numLayers} layers`);
  if (c.topK < 1 || c.topK > c.numExperts) fail(`num_experts_per_token ${c.topK} is not in 1..num_experts ${c.numExperts}`);
  if (c.attnResBlockSize < 1) fail('attn_res_block_size must be at least 1');
  if (c.moeLayerFreq < 1) fail('moe_layer_freq must be at least 1');
  if (c.latentSize % 32 !== 0 || c.moeIntermediateSize % 32 !== 0) {
    fail(`MXFP4 experts need routed_expert_hidden_size (${c.latentSize}) and moe_intermediate_size (${c.moeIntermediateSize}) to be multiples of 32`);
  }
  if (c.kda.numHeads > c.kda.headDim) fail('A_log is stored padded to head_dim, so num_heads must not exceed head_dim');
}

/** Layer i (0-based) is KDA iff i+1 is in kda_layers; MLA iff i+1 is in full_attn_layers. */
export function mixerKind(c: K3Config, layer: number): MixerKind {
  if (c.kda.kdaLayers.includes(layer + 1)) return 'kda';
  if (c.kda.fullAttnLayers.includes(layer + 1)) return 'mla';
  throw new Error(`config: layer ${layer} (0-based) is in neither kda_layers nor full_attn_layers`);
}

export function ffnKind(c: K3Config, layer: number): FfnKind {
  return layer >= c.firstKDenseReplace && layer % c.moeLayerFreq === 0 ? 'moe' : 'dense';
}
