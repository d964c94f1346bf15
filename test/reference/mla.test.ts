// mla.test.ts - the reference's NoPE MLA against hand-computed values: the 1/sqrt(nope+pe)
// score scale with un-rotated pe dims, the 1e-6 eps of the LoRA norms, and the absence of
// any position dependence.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertAllClose, assertClose } from '../support/close';
import { matrix, type Matrix } from './math';
import { attendHead, mlaForward, mlaScoreScale, type MlaShape, type MlaWeights } from './mla';

const f64 = (...v: number[]) => new Float64Array(v);

test('mla score scale is 1/sqrt(qk_nope + qk_rope)', () => {
  const s: MlaShape = { numHeads: 1, qkNope: 24, qkRope: 8, vHead: 16, rmsNormEps: 1e-5 };
  assert.equal(mlaScoreScale(s), 1 / Math.sqrt(32));
  assert.equal(mlaScoreScale(s, 'mla-scale-nope-only'), 1 / Math.sqrt(24));
});

test('mla scores add the un-rotated pe dot product to the nope one', () => {
  // q = [nope 1,0 | pe 1]; key 0 = [1,0 | 0] -> 1; key 1 = [0,0 | 2] -> 2 (no rotation at position 1)
  // p = softmax([1, 2] / sqrt(3)) = [0.3595425243193725, 0.6404574756806275]; v = identity rows
  const o = attendHead(f64(1, 0), f64(1), [f64(1, 0), f64(0, 0)], [f64(0), f64(2)], [f64(1, 0), f64(0, 1)], 1 / Math.sqrt(3));
  assertAllClose(o, [0.3595425243193725, 0.6404574756806275], 1e-15);
});

/** One head, nope 1, pe 1, v 1, LoRA ranks 2; gate weights 0 (sigmoid 0.5), o_proj identity. */
function tinyMla(kvA: Matrix): MlaWeights {
  return {
    qA: matrix(2, 1, f64(1, 1)),
    qANorm: f64(1, 1),
    qB: matrix(2, 2, f64(1, 0, 0, 1)),
    kvA,
    kvANorm: f64(1, 1),
    kvB: matrix(2, 2, f64(0, 0, 1, 0)), // k_nope = 0, v = first latent channel
    gProj: matrix(1, 1, f64(0)),
    oProj: matrix(1, 1, f64(1)),
  };
}
const oneHead: MlaShape = { numHeads: 1, qkNope: 1, qkRope: 1, vHead: 1, rmsNormEps: 1e-5 };

test('mla LoRA norms use eps 1e-6, not rms_norm_eps', () => {
  // latent c = [1e-3, 1e-3] (mean square 1e-6): v = c0 / sqrt(1e-6 + eps) * gate 0.5
  const w = tinyMla(matrix(3, 1, f64(1e-3, 1e-3, 0)));
  assertClose(mlaForward(w, oneHead, [f64(1)])[0][0], 0.5 * 0.7071067811865476, 1e-12);
  assertClose(mlaForward(w, oneHead, [f64(1)], 'mla-lora-norm-eps-1e-5')[0][0], 0.5 * 0.3015113445777636, 1e-12);
});

test('mla output depends on the set of earlier tokens, not their positions (NoPE)', () => {
  const w: MlaWeights = {
    ...tinyMla(matrix(3, 1, f64(0.7, -0.4, 1.3))),
    qA: matrix(2, 1, f64(0.9, -1.1)),
    qB: matrix(2, 2, f64(1.5, -0.5, 0.25, 2)),
    kvB: matrix(2, 2, f64(1.2, 0.3, -0.8, 0.6)),
  };
  const a = f64(0.3);
  const b = f64(-1.7);
  const c = f64(2.2);
  const abc = mlaForward(w, oneHead, [a, b, c]);
  const bac = mlaForward(w, oneHead, [b, a, c]);
  assertClose(abc[2][0], bac[2][0], 1e-15);
  assert.notEqual(abc[1][0], bac[1][0]);
});
