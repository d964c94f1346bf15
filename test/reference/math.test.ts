// math.test.ts - the reference's scalar pieces against values computed by hand.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertAllClose, assertClose } from '../support/close';
import { l2Normalize, matvec, matrix, rmsNorm, situ } from './math';

test('rmsNorm scales by 1/sqrt(mean square + eps) and then by gamma', () => {
  // mean square of [1,2,3,4] = 7.5
  const y = rmsNorm(new Float64Array([1, 2, 3, 4]), new Float64Array([1, 1, 2, 0.5]), 1e-5);
  assertAllClose(y, [0.3651481282381064, 0.7302962564762128, 2.1908887694286383, 0.7302962564762128], 1e-15);
});

test('rmsNorm eps is added inside the square root', () => {
  // mean square 1e-6: with eps 1e-6 the value is divided by sqrt(2e-6), with 1e-5 by sqrt(1.1e-5)
  assertClose(rmsNorm(new Float64Array([1e-3]), null, 1e-6)[0], 0.7071067811865476, 1e-15);
  assertClose(rmsNorm(new Float64Array([1e-3]), null, 1e-5)[0], 0.3015113445777636, 1e-15);
});

test('situ is 4 tanh(g/4) sigmoid(g) times 25 tanh(u/25)', () => {
  assertClose(situ(2, 30, 4, 25), 33.93236366537544, 1e-12);
  assertClose(situ(-3, -5, 4, 25), 0.5945436833059362, 1e-14);
});

test('situ takes the sigmoid of the uncapped gate and leaves up alone when beta2 is null', () => {
  // 4 tanh(2.5) sigmoid(10) * 3; the capped-gate variant would give 11.614935728084278
  assertClose(situ(10, 3, 4, null), 11.838834095580754, 1e-12);
});

test('l2Normalize divides by sqrt(sum of squares + eps)', () => {
  assertAllClose(l2Normalize(new Float64Array([3, 4]), 1e-6), [3 / Math.sqrt(25 + 1e-6), 4 / Math.sqrt(25 + 1e-6)], 1e-16);
});

test('matvec uses the [out, in] row-major layout of nn.Linear', () => {
  const w = matrix(2, 3, new Float64Array([1, 2, 3, 4, 5, 6]));
  assert.deepEqual(Array.from(matvec(w, new Float64Array([1, 0, -1]))), [-2, -2]);
});
