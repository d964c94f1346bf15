// close.ts - assertions on floating-point values with a stated absolute tolerance, for
// numbers and vectors; the message says where and by how much they differ.
import assert from 'node:assert/strict';

export function assertClose(actual: number, expected: number, tol: number, what = 'value'): void {
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: ${actual} differs from ${expected} by ${Math.abs(actual - expected)} (tolerance ${tol})`);
}

export function assertAllClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what = 'vector'): void {
  assert.equal(actual.length, expected.length, `${what}: length ${actual.length}, expected ${expected.length}`);
  for (let i = 0; i < expected.length; i++) assertClose(actual[i], expected[i], tol, `${what}[${i}]`);
}
