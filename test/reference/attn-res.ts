// attn-res.ts - Block Attention Residuals (§3.3 of docs/k3-architecture.md): the per-token
// softmax mix over banked block sums that replaces the residual stream, and the layer
// skeleton that decides what is banked when. The token mixers and FFNs are passed in, so
// this file knows the order of the sites but none of their math.
import { add, rmsNorm } from './math';
import type { Mistake } from './mistakes';

/** A sequence of per-position vectors. */
export type Seq = Float64Array[];

/** The mix's pseudo-query: res_norm.weight ⊙ res_proj.weight[0]. */
export function foldResWeight(gamma: Float64Array, proj: Float64Array): Float64Array {
  return gamma.map((g, i) => g * proj[i]);
}

/**
 * One token's mix. Scores come from the candidates RMS-normalised WITHOUT gamma (gamma is
 * folded into `w`); the softmax weights then sum the RAW candidates.
 */
export function attnResMix(candidates: Float64Array[], w: Float64Array, eps: number, mistake?: Mistake): Float64Array {
  const normed = candidates.map((v) => rmsNorm(v, null, eps));
  const scores = normed.map((n) => n.reduce((s, x, j) => s + x * w[j], 0));
  const m = Math.max(...scores);
  const e = scores.map((s) => Math.exp(s - m));
  const z = e.reduce((a, b) => a + b, 0);
  const values = mistake === 'attn-res-sum-normalised' ? normed : candidates;
  const out = new Float64Array(w.length);
  values.forEach((v, i) => {
    for (let j = 0; j < out.length; j++) out[j] += (e[i] / z) * v[j];
  });
  return out;
}

export interface AttnResStack {
  numLayers: number;
  blockSize: number;
  eps: number;
  attnWeight(layer: number): Float64Array;
  mlpWeight(layer: number): Float64Array;
  outWeight: Float64Array;
  /** The whole token mixer of a layer, its input RMSNorm included; `h` is the mixed input. */
  mixer(layer: number, h: Seq): Seq;
  /** The whole FFN of a layer, its input RMSNorm included. */
  ffn(layer: number, h: Seq): Seq;
}

/**
 * Runs the decoder stack and returns the output mix per position (before the final norm).
 * Banked blocks R start with the embedding; P is the running sum of the current block.
 * At a block start the RAW P is banked (not the mixed input) and the sum restarts; the FFN
 * site of a layer already sees that layer's attention output.
 */
export function runAttnResStack(embeds: Seq, s: AttnResStack, mistake?: Mistake): Seq {
  const banked: Seq[] = [];
  let P: Seq | null = embeds;
  const mix = (w: Float64Array, current: Seq): Seq =>
    current.map((p, t) => attnResMix([...banked.map((b) => b[t]), p], w, s.eps, mistake));

  for (let l = 0; l < s.numLayers; l++) {
    const cur: Seq = P as Seq;
    const h = banked.length === 0 ? cur : mix(s.attnWeight(l), cur);
    if (l % s.blockSize === 0) {
      banked.push(cur);
      P = null;
    }
    const a = s.mixer(l, h);
    const afterAttn: Seq = P === null ? a : P.map((p, t) => add(p, a[t]));
    const f = s.ffn(l, mix(s.mlpWeight(l), afterAttn));
    P = afterAttn.map((p, t) => add(p, f[t]));
  }
  return mix(s.outWeight, P as Seq);
}
