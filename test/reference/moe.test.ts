// moe.test.ts - the reference's router and latent MoE against hand-computed values: bias
// for selection only, renormalised sigmoid weights, the latent norm on the weighted sum,
// gate = w1 and up = w3, shared experts on the full-width input.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertAllClose, assertClose } from '../support/close';
import { matrix, situ } from './math';
import { latentMoe, route, type MoeShape, type MoeWeights } from './moe';

const f64 = (...v: number[]) => new Float64Array(v);

// sigmoid([0, 1, 2, -1]) = [0.5, 0.7311, 0.8808, 0.2689]; + bias [0.5, 0, -0.6, 0] = [1.0, 0.7311, 0.2808, 0.2689]
const logits = f64(0, 1, 2, -1);
const bias = f64(0.5, 0, -0.6, 0);

test('router selects by score plus bias but weights by the plain score, renormalised', () => {
  const r = route(logits, bias, 2, true, 1);
  assert.deepEqual(r.experts, [0, 1]); // without the bias it would be [2, 1]
  assertAllClose(r.weights, [0.40615451504869066, 0.5938454849513094], 1e-15); // [0.5, 0.7311] / 1.2311
});

test('router ignoring the bias selects other experts', () => {
  assert.deepEqual(route(logits, bias, 2, true, 1, 'router-bias-ignored').experts, [2, 1]);
});

test('router scaling factor multiplies after renormalising', () => {
  assertAllClose(route(logits, bias, 2, true, 2.5).weights, [2.5 * 0.40615451504869066, 2.5 * 0.5938454849513094], 1e-14);
});

test('router without renormalisation keeps the sigmoid scores', () => {
  assertAllClose(route(logits, bias, 2, false, 1).weights, [0.5, 0.7310585786300049], 1e-15);
});

test('router bias used in the weights changes them', () => {
  const r = route(logits, bias, 2, true, 1, 'router-bias-in-weights');
  assertAllClose(r.weights, [1 / 1.7310585786300049, 0.7310585786300049 / 1.7310585786300049], 1e-15);
});

const shape: MoeShape = { topK: 1, renormalize: true, routedScalingFactor: 1, situBeta: 4, situLinearBeta: 25, rmsNormEps: 1e-5 };

/** Hidden 1, latent 1, expert width 1, one expert, no shared experts: every step is a scalar. */
function scalarMoe(shared: boolean): MoeWeights {
  return {
    router: matrix(1, 1, f64(1)),
    bias: f64(0),
    latentDown: matrix(1, 1, f64(0.5)),
    latentNorm: f64(2),
    latentUp: matrix(1, 1, f64(3)),
    shared: shared ? { gate: matrix(1, 1, f64(1)), up: matrix(1, 1, f64(2)), down: matrix(1, 1, f64(1)) } : null,
    experts: [{ gate: matrix(1, 1, f64(4)), up: matrix(1, 1, f64(-2)), down: matrix(1, 1, f64(0.25)) }],
  };
}

// With one expert chosen there is nothing to renormalise: its weight is sigmoid(router . x) = sigmoid(1).
const W1 = 1 / (1 + Math.exp(-1));

test('latent moe: down-project, experts (w1 gate, w3 up), weighted sum, RMSNorm, up-project', () => {
  // x = 1: z = 0.5; expert out = 0.25 situ(4z, -2z); RMSNorm of the scalar sum y is
  // gamma * y / sqrt(y^2 + eps); up-projection * 3
  const normUp = (y: number) => (3 * 2 * y) / Math.sqrt(y * y + 1e-5);
  assertClose(latentMoe(scalarMoe(false), f64(1), shape)[0], normUp(W1 * 0.25 * situ(2, -1, 4, 25)), 1e-12);
  assertClose(latentMoe(scalarMoe(false), f64(1), shape, 'expert-w1-w3-swapped')[0], normUp(W1 * 0.25 * situ(-1, 2, 4, 25)), 1e-12);
});

test('shared experts read the full-width input and are added unweighted', () => {
  const routed = latentMoe(scalarMoe(false), f64(1), shape)[0];
  assertClose(latentMoe(scalarMoe(true), f64(1), shape)[0], routed + situ(1, 2, 4, 25), 1e-12);
});

test('latent norm before the experts normalises their input instead of their sum', () => {
  // z = 0.5 -> 2 * 0.5 / sqrt(0.25 + eps); no norm on the sum
  const z = (2 * 0.5) / Math.sqrt(0.25 + 1e-5);
  assertClose(latentMoe(scalarMoe(false), f64(1), shape, 'latent-norm-before-experts')[0], 3 * W1 * 0.25 * situ(4 * z, -2 * z, 4, 25), 1e-12);
});
