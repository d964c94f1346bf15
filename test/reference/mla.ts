// mla.ts - the gated NoPE MLA token mixer of §3.5 in docs/k3-architecture.md, over a whole
// sequence, in its plain (expanded, non-absorbed) form: LoRA query and KV latents with their
// own RMSNorms (eps 1e-6), per-head [nope | pe] queries, one shared un-rotated k_pe, causal
// softmax scaled by 1/sqrt(nope + pe), sigmoid output gate, o_proj. No positions anywhere.
import { dot, matvec, rmsNorm, sigmoid, softmax, type Matrix } from './math';
import type { Mistake } from './mistakes';
import type { Seq } from './attn-res';

export interface MlaWeights {
  qA: Matrix;
  qANorm: Float64Array;
  qB: Matrix;
  /** Rows [latent (kv_lora_rank) | k_pe (qk_rope_head_dim)]. */
  kvA: Matrix;
  kvANorm: Float64Array;
  /** Per head rows [k_nope | v]. */
  kvB: Matrix;
  gProj: Matrix;
  oProj: Matrix;
}

export interface MlaShape {
  numHeads: number;
  qkNope: number;
  qkRope: number;
  vHead: number;
  rmsNormEps: number;
}

/** The LoRA norms are built without an eps argument in the reference code: KimiRMSNorm's default. */
export const MLA_LORA_NORM_EPS = 1e-6;

export function mlaScoreScale(s: MlaShape, mistake?: Mistake): number {
  return 1 / Math.sqrt(mistake === 'mla-scale-nope-only' ? s.qkNope : s.qkNope + s.qkRope);
}

/**
 * One head at one query position over the keys 0..n-1 it may see (the caller passes only
 * those): score_s = (q_nope . k_nope[s] + q_pe . k_pe[s]) * scale, o = sum_s softmax_s v[s].
 */
export function attendHead(
  qNope: Float64Array,
  qPe: Float64Array,
  kNope: Float64Array[],
  kPe: Float64Array[],
  v: Float64Array[],
  scale: number,
): Float64Array {
  const p = softmax(kNope.map((kn, s) => (dot(qNope, kn) + dot(qPe, kPe[s])) * scale));
  const o = new Float64Array(v[0].length);
  v.forEach((vs, s) => {
    for (let j = 0; j < o.length; j++) o[j] += p[s] * vs[j];
  });
  return o;
}

/** The MLA mixer over a sequence of normed layer inputs `xs`; returns the o_proj output per position. */
export function mlaForward(w: MlaWeights, s: MlaShape, xs: Seq, mistake?: Mistake): Seq {
  const { numHeads: H, qkNope: N, qkRope: R, vHead: V } = s;
  const loraEps = mistake === 'mla-lora-norm-eps-1e-5' ? s.rmsNormEps : MLA_LORA_NORM_EPS;
  const rkv = w.kvANorm.length;
  const scale = mlaScoreScale(s, mistake);

  const q = xs.map((x) => matvec(w.qB, rmsNorm(matvec(w.qA, x), w.qANorm, loraEps)));
  const kvA = xs.map((x) => matvec(w.kvA, x));
  const kPe = kvA.map((c) => c.slice(rkv, rkv + R));
  const kvB = kvA.map((c) => matvec(w.kvB, rmsNorm(c.slice(0, rkv), w.kvANorm, loraEps)));

  return xs.map((x, t) => {
    const gate = matvec(w.gProj, x);
    const o = new Float64Array(H * V);
    for (let h = 0; h < H; h++) {
      const qh = q[t].subarray(h * (N + R), (h + 1) * (N + R));
      const visible = kvB.slice(0, t + 1);
      const kNope = visible.map((kv) => kv.subarray(h * (N + V), h * (N + V) + N));
      const vals = visible.map((kv) => kv.subarray(h * (N + V) + N, (h + 1) * (N + V)));
      const oh = attendHead(qh.subarray(0, N), qh.subarray(N), kNope, kPe.slice(0, t + 1), vals, scale);
      for (let j = 0; j < V; j++) o[h * V + j] = oh[j] * sigmoid(gate[h * V + j]);
    }
    return matvec(w.oProj, o);
  });
}
