// moe.ts - the channel mixers of §3.6-3.7 in docs/k3-architecture.md: the dense SiTU-GLU
// MLP of the first layers and the latent MoE (sigmoid router with bias-for-selection-only,
// renormalised top-k, experts in the latent width, RMSNorm on their weighted sum, up
// projection, plus the shared experts on the full-width input). Weights arrive decoded.
import { matvec, rmsNorm, sigmoid, situ, type Matrix } from './math';
import type { Mistake } from './mistakes';

export interface GluWeights {
  gate: Matrix;
  up: Matrix;
  down: Matrix;
}

export interface MoeWeights {
  router: Matrix;
  bias: Float64Array;
  latentDown: Matrix;
  /** null when latent_moe_use_norm is false. */
  latentNorm: Float64Array | null;
  latentUp: Matrix;
  /** null when there are no shared experts. */
  shared: GluWeights | null;
  /** Per expert: gate = w1, up = w3, down = w2, dequantized. */
  experts: GluWeights[];
}

export interface MoeShape {
  topK: number;
  renormalize: boolean;
  routedScalingFactor: number;
  situBeta: number;
  situLinearBeta: number | null;
  rmsNormEps: number;
}

export interface Routing {
  experts: number[];
  weights: number[];
  /** The k-th biased score minus the next one: how far the choice is from a tie. */
  gap: number;
}

/**
 * Top-k by sigmoid(logit) + bias (ties to the lower expert id); the weights are the plain
 * sigmoid scores of the chosen experts, divided by their sum (+1e-20) when renormalising,
 * then multiplied by the scaling factor.
 */
export function route(
  logits: Float64Array,
  bias: Float64Array,
  k: number,
  renormalize: boolean,
  scaling: number,
  mistake?: Mistake,
): Routing {
  const score = Array.from(logits, sigmoid);
  const biased = score.map((s, e) => s + (mistake === 'router-bias-ignored' ? 0 : bias[e]));
  const order = biased.map((_, e) => e).sort((a, b) => biased[b] - biased[a] || a - b);
  const experts = order.slice(0, k);
  const used = mistake === 'router-bias-in-weights' ? biased : score;
  let weights = experts.map((e) => used[e]);
  if (renormalize && k > 1 && mistake !== 'router-not-renormalised') {
    const sum = weights.reduce((a, b) => a + b, 0) + 1e-20;
    weights = weights.map((w) => w / sum);
  }
  const gap = k < order.length ? biased[order[k - 1]] - biased[order[k]] : Infinity;
  return { experts, weights: weights.map((w) => w * scaling), gap };
}

function situGate(g: number, u: number, s: MoeShape, mistake?: Mistake): number {
  if (mistake === 'situ-sigmoid-of-capped-gate') {
    const capped = s.situBeta * Math.tanh(g / s.situBeta);
    const up = s.situLinearBeta === null ? u : s.situLinearBeta * Math.tanh(u / s.situLinearBeta);
    return capped * sigmoid(capped) * up;
  }
  return situ(g, u, s.situBeta, s.situLinearBeta);
}

/** down(situ(gate x, up x)). */
export function gluMlp(w: GluWeights, x: Float64Array, s: MoeShape, mistake?: Mistake): Float64Array {
  const g = matvec(w.gate, x);
  const u = matvec(w.up, x);
  return matvec(w.down, g.map((gi, i) => situGate(gi, u[i], s, mistake)));
}

/** The latent MoE of one position; `x` is the post_attention_layernorm output. */
export function latentMoe(w: MoeWeights, x: Float64Array, s: MoeShape, mistake?: Mistake, onRoute?: (r: Routing) => void): Float64Array {
  const r = route(matvec(w.router, x), w.bias, s.topK, s.renormalize, s.routedScalingFactor, mistake);
  onRoute?.(r);
  let z = matvec(w.latentDown, x);
  if (mistake === 'latent-norm-before-experts' && w.latentNorm) z = rmsNorm(z, w.latentNorm, s.rmsNormEps);

  let y: Float64Array = new Float64Array(z.length);
  r.experts.forEach((e, i) => {
    const ex = w.experts[e];
    const glu = mistake === 'expert-w1-w3-swapped' ? { gate: ex.up, up: ex.gate, down: ex.down } : ex;
    const out = gluMlp(glu, z, s, mistake);
    for (let j = 0; j < y.length; j++) y[j] += r.weights[i] * out[j];
  });
  const normAfter = mistake !== 'latent-norm-before-experts' && mistake !== 'latent-norm-after-up-proj';
  if (w.latentNorm && normAfter) y = rmsNorm(y, w.latentNorm, s.rmsNormEps);
  let routed = matvec(w.latentUp, y);
  if (w.latentNorm && mistake === 'latent-norm-after-up-proj') routed = rmsNorm(routed, null, s.rmsNormEps);

  if (!w.shared) return routed;
  const sh = gluMlp(w.shared, x, s, mistake);
  return routed.map((v, i) => v + sh[i]);
}
