// kda.ts - the KDA (Kimi Delta Attention) token mixer of §3.4 in docs/k3-architecture.md,
// over a whole sequence at once: projections, causal short conv + SiLU, q/k L2 norm, the
// per-head decay gate (both forms), beta, the gated delta rule and the gated head-wise
// output norm. It keeps no state between calls (the reference always recomputes).
import { l2Normalize, matvec, rmsNorm, sigmoid, silu, softplus, type Matrix } from './math';
import type { Mistake } from './mistakes';
import type { Seq } from './attn-res';

export interface KdaWeights {
  qProj: Matrix;
  kProj: Matrix;
  vProj: Matrix;
  /** [P, K] depthwise taps, oldest to newest: the last tap multiplies the current input. */
  qConv: Matrix;
  kConv: Matrix;
  vConv: Matrix;
  fA: Matrix;
  fB: Matrix;
  /** As stored: one entry per head, zero padding after the head count. */
  aLog: Float64Array;
  /** Per (head, channel), index h*D + d. */
  dtBias: Float64Array;
  bProj: Matrix;
  gProj: Matrix;
  /** [D], shared by all heads. */
  oNorm: Float64Array;
  oProj: Matrix;
}

export interface KdaShape {
  numHeads: number;
  headDim: number;
  /** Present: g = lb * sigmoid(exp(A_log[h]) * zz); null: g = -exp(A_log[h]) * softplus(zz). */
  gateLowerBound: number | null;
  /** eps of o_norm (rms_norm_eps). */
  eps: number;
}

/** eps inside the sqrt of FLA's in-kernel q/k L2 norm. */
export const KDA_L2_EPS = 1e-6;

/** The lower bound a port hard-codes when it applies K3's gate to a checkpoint without one. */
const K3_GATE_LOWER_BOUND = -5;

/** Causal depthwise conv over the pre-conv projections `us` (zeros before position 0), then SiLU. */
export function shortConvSilu(us: Seq, taps: Matrix): Seq {
  const K = taps.cols;
  return us.map((_, t) => {
    const y = new Float64Array(taps.rows);
    for (let c = 0; c < taps.rows; c++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        const src = t - (K - 1) + k;
        if (src >= 0) s += taps.data[c * K + k] * us[src][c];
      }
      y[c] = silu(s);
    }
    return y;
  });
}

/**
 * Log-space decay g[h*D + d] from z = f_b(f_a(x)). A_log is indexed by head: the stored
 * vector is padded to head_dim, and only its first num_heads entries are used.
 */
export function kdaDecay(z: Float64Array, dtBias: Float64Array, aLog: Float64Array, s: KdaShape, mistake?: Mistake): Float64Array {
  const { numHeads: H, headDim: D } = s;
  const wrongForm = mistake === 'kda-wrong-gate-form';
  const lowerBound = wrongForm ? (s.gateLowerBound === null ? K3_GATE_LOWER_BOUND : null) : s.gateLowerBound;
  const g = new Float64Array(H * D);
  for (let h = 0; h < H; h++) {
    for (let d = 0; d < D; d++) {
      const zz = z[h * D + d] + dtBias[h * D + d];
      const a = mistake === 'kda-a-log-per-channel' ? aLog[d] : aLog[h];
      g[h * D + d] = lowerBound !== null ? lowerBound * sigmoid(Math.exp(a) * zz) : -Math.exp(a) * softplus(zz);
    }
  }
  return g;
}

/**
 * One token of the gated delta rule for one head, in place on S = [key i][value j] (D x D):
 * decay the rows by alpha (per key channel) first, then u = S^T k with the decayed state,
 * then the delta write S += beta k (v - u)^T, then read o = S^T q from the updated state.
 */
export function kdaStep(
  S: Float64Array,
  q: Float64Array,
  k: Float64Array,
  v: Float64Array,
  alpha: Float64Array,
  beta: number,
  mistake?: Mistake,
): Float64Array {
  const D = q.length;
  const transposed = mistake === 'kda-state-transposed';
  for (let i = 0; i < D; i++) {
    for (let j = 0; j < D; j++) S[i * D + j] *= transposed ? alpha[j] : alpha[i];
  }
  const u = new Float64Array(D);
  for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) u[j] += S[i * D + j] * k[i];
  for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) S[i * D + j] += beta * k[i] * (v[j] - u[j]);
  const o = new Float64Array(D);
  for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) o[j] += S[i * D + j] * q[i];
  return o;
}

/** The KDA mixer over a sequence of normed layer inputs `xs`; returns the o_proj output per position. */
export function kdaForward(w: KdaWeights, s: KdaShape, xs: Seq, mistake?: Mistake): Seq {
  const { numHeads: H, headDim: D } = s;
  const q = shortConvSilu(xs.map((x) => matvec(w.qProj, x)), w.qConv);
  const k = shortConvSilu(xs.map((x) => matvec(w.kProj, x)), w.kConv);
  const v = shortConvSilu(xs.map((x) => matvec(w.vProj, x)), w.vConv);
  const states = Array.from({ length: H }, () => new Float64Array(D * D));
  const qScale = 1 / Math.sqrt(D);

  return xs.map((x, t) => {
    const g = kdaDecay(matvec(w.fB, matvec(w.fA, x)), w.dtBias, w.aLog, s, mistake);
    const b = matvec(w.bProj, x);
    const gate = matvec(w.gProj, x);
    const o = new Float64Array(H * D);
    for (let h = 0; h < H; h++) {
      const head = (a: Float64Array) => a.slice(h * D, (h + 1) * D);
      const norm = (a: Float64Array) => (mistake === 'kda-no-qk-l2norm' ? a : l2Normalize(a, KDA_L2_EPS));
      const qh = norm(head(q[t])).map((e) => e * qScale);
      const kh = norm(head(k[t]));
      const alpha = head(g).map(Math.exp);
      const beta = mistake === 'kda-beta-outside-sigmoid' ? b[h] : sigmoid(b[h]);
      const oh = rmsNorm(kdaStep(states[h], qh, kh, head(v[t]), alpha, beta, mistake), w.oNorm, s.eps);
      for (let j = 0; j < D; j++) o[h * D + j] = oh[j] * sigmoid(gate[h * D + j]);
    }
    return matvec(w.oProj, o);
  });
}
