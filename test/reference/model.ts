// model.ts - the reference K3 text model: loads a checkpoint directory through the
// reference's own safetensors and MXFP4 readers into float64 weights, and computes logits
// by full recompute over the whole token sequence (no cache, no incremental state). It is
// the oracle the C engine is tested against; it is written for clarity, not speed, and
// holds every weight as float64 (about 8 bytes per parameter: meant for the tiny fixture).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { foldResWeight, runAttnResStack, type Seq } from './attn-res';
import { ffnKind, mixerKind, parseConfig, type K3Config, type MixerKind } from './config';
import { decodeBf16, decodeF32, decodeMxfp4 } from './dtypes';
import { kdaForward, type KdaWeights } from './kda';
import { matrix, matvec, rmsNorm, type Matrix } from './math';
import { mlaForward, type MlaWeights } from './mla';
import type { Mistake, ReferenceOptions } from './mistakes';
import { gluMlp, latentMoe, type GluWeights, type MoeShape, type MoeWeights, type Routing } from './moe';
import { Checkpoint } from './safetensors';
import { expectedTensors, layerPrefix, PREFIX } from './tensors';

export type Mixer = { kind: 'kda'; w: KdaWeights } | { kind: 'mla'; w: MlaWeights };
export type Ffn = { kind: 'dense'; w: GluWeights } | { kind: 'moe'; w: MoeWeights };

export interface ReferenceLayer {
  inputNorm: Float64Array;
  postAttentionNorm: Float64Array;
  /** Folded AttnRes pseudo-queries of the attention and FFN sites. */
  attnResWeight: Float64Array;
  mlpResWeight: Float64Array;
  mixer: Mixer;
  ffn: Ffn;
}

export interface ReferenceModel {
  dir: string;
  config: K3Config;
  /** Embedding rows stay bf16 bytes until looked up. */
  embedRow(id: number): Float64Array;
  layers: ReferenceLayer[];
  outResWeight: Float64Array;
  finalNorm: Float64Array;
  lmHead: Matrix;
}

/** Loads `dir` (config.json + safetensors) after checking every tensor against the config's table. */
export function loadReferenceModel(dir: string): ReferenceModel {
  const config = parseConfig(JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')));
  const ckpt = new Checkpoint(dir);
  const expected = expectedTensors(config);
  for (const [name, spec] of expected) {
    const e = ckpt.entry(name);
    if (e.dtype !== spec.dtype || e.shape.join() !== spec.shape.join()) {
      throw new Error(`${dir}: ${name} is ${e.dtype} [${e.shape}], the config implies ${spec.dtype} [${spec.shape}]`);
    }
  }
  for (const name of ckpt.tensors.keys()) {
    if (name.startsWith(PREFIX) && !expected.has(name)) throw new Error(`${dir}: unexpected tensor ${name}`);
  }

  const vec = (name: string): Float64Array => {
    const e = ckpt.entry(name);
    return e.dtype === 'F32' ? decodeF32(ckpt.read(name)) : decodeBf16(ckpt.read(name));
  };
  const mat = (name: string): Matrix => {
    const e = ckpt.entry(name);
    const rows = e.shape[0];
    const cols = e.shape.slice(1).reduce((a, b) => a * b, 1);
    return matrix(rows, cols, vec(name));
  };
  const mxfp4 = (name: string, rows: number, cols: number): Matrix =>
    matrix(rows, cols, decodeMxfp4(ckpt.read(`${name}.weight_packed`), ckpt.read(`${name}.weight_scale`), rows, cols));

  const layers: ReferenceLayer[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    const p = layerPrefix(i);
    const a = `${p}self_attn.`;
    const mixer: Mixer =
      mixerKind(config, i) === 'kda'
        ? {
            kind: 'kda',
            w: {
              qProj: mat(`${a}q_proj.weight`),
              kProj: mat(`${a}k_proj.weight`),
              vProj: mat(`${a}v_proj.weight`),
              qConv: mat(`${a}q_conv1d.weight`),
              kConv: mat(`${a}k_conv1d.weight`),
              vConv: mat(`${a}v_conv1d.weight`),
              fA: mat(`${a}f_a_proj.weight`),
              fB: mat(`${a}f_b_proj.weight`),
              aLog: vec(`${a}A_log`),
              dtBias: vec(`${a}dt_bias`),
              bProj: mat(`${a}b_proj.weight`),
              gProj: mat(`${a}g_proj.weight`),
              oNorm: vec(`${a}o_norm.weight`),
              oProj: mat(`${a}o_proj.weight`),
            },
          }
        : {
            kind: 'mla',
            w: {
              qA: mat(`${a}q_a_proj.weight`),
              qANorm: vec(`${a}q_a_layernorm.weight`),
              qB: mat(`${a}q_b_proj.weight`),
              kvA: mat(`${a}kv_a_proj_with_mqa.weight`),
              kvANorm: vec(`${a}kv_a_layernorm.weight`),
              kvB: mat(`${a}kv_b_proj.weight`),
              gProj: mat(`${a}g_proj.weight`),
              oProj: mat(`${a}o_proj.weight`),
            },
          };

    let ffn: Ffn;
    if (ffnKind(config, i) === 'dense') {
      const m = `${p}mlp.`;
      ffn = { kind: 'dense', w: { gate: mat(`${m}gate_proj.weight`), up: mat(`${m}up_proj.weight`), down: mat(`${m}down_proj.weight`) } };
    } else {
      const m = `${p}block_sparse_moe.`;
      const L = config.latentSize;
      const I = config.moeIntermediateSize;
      const experts: GluWeights[] = [];
      for (let e = 0; e < config.numExperts; e++) {
        const x = `${m}experts.${e}.`;
        experts.push({ gate: mxfp4(`${x}w1`, I, L), up: mxfp4(`${x}w3`, I, L), down: mxfp4(`${x}w2`, L, I) });
      }
      const shared = config.numSharedExperts > 0
        ? {
            gate: mat(`${m}shared_experts.gate_proj.weight`),
            up: mat(`${m}shared_experts.up_proj.weight`),
            down: mat(`${m}shared_experts.down_proj.weight`),
          }
        : null;
      ffn = {
        kind: 'moe',
        w: {
          router: mat(`${m}gate.weight`),
          bias: vec(`${m}gate.e_score_correction_bias`),
          latentDown: mat(`${m}routed_expert_down_proj.weight`),
          latentNorm: config.latentUseNorm ? vec(`${m}routed_expert_norm.weight`) : null,
          latentUp: mat(`${m}routed_expert_up_proj.weight`),
          shared,
          experts,
        },
      };
    }

    layers.push({
      inputNorm: vec(`${p}input_layernorm.weight`),
      postAttentionNorm: vec(`${p}post_attention_layernorm.weight`),
      attnResWeight: foldResWeight(vec(`${p}self_attention_res_norm.weight`), vec(`${p}self_attention_res_proj.weight`)),
      mlpResWeight: foldResWeight(vec(`${p}mlp_res_norm.weight`), vec(`${p}mlp_res_proj.weight`)),
      mixer,
      ffn,
    });
  }

  const d = config.hiddenSize;
  const embedBytes = ckpt.read(`${PREFIX}model.embed_tokens.weight`);
  return {
    dir,
    config,
    embedRow: (id) => decodeBf16(embedBytes.subarray(id * d * 2, (id + 1) * d * 2)),
    layers,
    outResWeight: foldResWeight(vec(`${PREFIX}model.output_attn_res_norm.weight`), vec(`${PREFIX}model.output_attn_res_proj.weight`)),
    finalNorm: vec(`${PREFIX}model.norm.weight`),
    lmHead: mat(`${PREFIX}lm_head.weight`),
  };
}

/** The mixer kinds a port reading the 1-based lists as 0-based would assign; throws where it would fail to load. */
function checkLayerReading(model: ReferenceModel, mistake?: Mistake): void {
  if (mistake !== 'zero-based-layer-lists') return;
  model.layers.forEach((layer, i) => {
    const wrong: MixerKind = model.config.kda.kdaLayers.includes(i) ? 'kda' : 'mla';
    if (wrong !== layer.mixer.kind) {
      const missing = wrong === 'mla' ? 'self_attn.q_a_proj.weight' : 'self_attn.A_log';
      throw new Error(`layer ${i} is ${wrong.toUpperCase()} under a 0-based reading of the layer lists, but the checkpoint has no ${layerPrefix(i)}${missing}`);
    }
  });
}

/** The final-normed hidden state of every position. */
export function finalHidden(model: ReferenceModel, ids: readonly number[], options: ReferenceOptions = {}): Seq {
  const { config: c } = model;
  const mistake = options.mistake;
  checkLayerReading(model, mistake);
  if (ids.length === 0) throw new Error('reference: no tokens');
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) throw new Error(`reference: token id ${id} is outside 0..${c.vocabSize - 1}`);
  }
  const moeShape: MoeShape = {
    topK: c.topK,
    renormalize: c.renormalize,
    routedScalingFactor: c.routedScalingFactor,
    situBeta: c.situBeta,
    situLinearBeta: c.situLinearBeta,
    rmsNormEps: c.rmsNormEps,
  };
  const kdaShape = { numHeads: c.kda.numHeads, headDim: c.kda.headDim, gateLowerBound: c.kda.gateLowerBound, eps: c.rmsNormEps };
  const mlaShape = { numHeads: c.mlaHeads, qkNope: c.qkNopeHeadDim, qkRope: c.qkRopeHeadDim, vHead: c.vHeadDim, rmsNormEps: c.rmsNormEps };

  const trace = options.trace;
  const embeds = ids.map((id) => model.embedRow(id));
  trace?.('model.embed_tokens', embeds);
  const out = runAttnResStack(
    embeds,
    {
      numLayers: c.numLayers,
      blockSize: c.attnResBlockSize,
      eps: c.rmsNormEps,
      attnWeight: (l) => model.layers[l].attnResWeight,
      mlpWeight: (l) => model.layers[l].mlpResWeight,
      outWeight: model.outResWeight,
      mixer: (l, h) => {
        const layer = model.layers[l];
        trace?.(`model.layers.${l}.input_layernorm`, h);
        const xs = h.map((v) => rmsNorm(v, layer.inputNorm, c.rmsNormEps));
        const a =
          layer.mixer.kind === 'kda' ? kdaForward(layer.mixer.w, kdaShape, xs, mistake) : mlaForward(layer.mixer.w, mlaShape, xs, mistake);
        trace?.(`model.layers.${l}.self_attn`, a);
        return a;
      },
      ffn: (l, h) => {
        const layer = model.layers[l];
        const ffn = layer.ffn;
        trace?.(`model.layers.${l}.post_attention_layernorm`, h);
        const routes: Routing[] = [];
        const f = h.map((v) => {
          const x = rmsNorm(v, layer.postAttentionNorm, c.rmsNormEps);
          return ffn.kind === 'dense' ? gluMlp(ffn.w, x, moeShape, mistake) : latentMoe(ffn.w, x, moeShape, mistake, (r) => routes.push(r));
        });
        trace?.(`model.layers.${l}.${ffn.kind === 'dense' ? 'mlp' : 'block_sparse_moe'}`, f);
        if (ffn.kind === 'moe') {
          trace?.(`model.layers.${l}.block_sparse_moe.gate`, routes.map((r) => [...r.experts].sort((a, b) => a - b)), routes.map((r) => r.gap));
        }
        return f;
      },
    },
    mistake,
  );
  const normed = out.map((h) => rmsNorm(h, model.finalNorm, c.rmsNormEps));
  trace?.('model.norm', normed);
  return normed;
}

/** Logits of every position: logits[t] predicts the token after ids[t]. */
export function forwardAll(model: ReferenceModel, ids: readonly number[], options: ReferenceOptions = {}): Float64Array[] {
  return finalHidden(model, ids, options).map((h) => matvec(model.lmHead, h));
}

/** Logits of the last position only (the same numbers as forwardAll's last entry). */
export function forwardLast(model: ReferenceModel, ids: readonly number[], options: ReferenceOptions = {}): Float64Array {
  const h = finalHidden(model, ids, options);
  return matvec(model.lmHead, h[h.length - 1]);
}

/** Index of the largest logit; ties go to the lower id. */
export function argmax(logits: Float64Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

export interface GreedyResult {
  /** The n generated ids (the prompt not included). */
  generated: number[];
  /** logits[i] are the last-position logits generated[i] was chosen from. */
  logits: Float64Array[];
  /**
   * margins[i] = best minus second-best logit of step i: a port whose logits are within
   * margins[i]/2 of these must choose the same token.
   */
  margins: number[];
}

/** Best minus second-best value. */
export function topMargin(logits: Float64Array): number {
  let a = -Infinity;
  let b = -Infinity;
  for (const v of logits) {
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) b = v;
  }
  return a - b;
}

/** Greedy decoding of n tokens, each step a full recompute over prompt + generated so far. */
export function greedy(model: ReferenceModel, ids: readonly number[], n: number, options: ReferenceOptions = {}): GreedyResult {
  const seq = [...ids];
  const result: GreedyResult = { generated: [], logits: [], margins: [] };
  for (let step = 0; step < n; step++) {
    const logits = forwardLast(model, seq, options);
    const next = argmax(logits);
    result.generated.push(next);
    result.logits.push(logits);
    result.margins.push(topMargin(logits));
    seq.push(next);
  }
  return result;
}
