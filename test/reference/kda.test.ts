// kda.test.ts - the reference's KDA pieces against hand-computed values: the order inside
// the recurrence, the two decay gate forms with A_log read per head, and the causal conv.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertAllClose, assertClose } from '../support/close';
import { kdaDecay, kdaStep, shortConvSilu, type KdaShape } from './kda';
import { matrix } from './math';

const f64 = (...v: number[]) => new Float64Array(v);

test('kda step decays first, then writes the delta against the decayed state, then reads the updated state', () => {
  // S = [[1,2],[3,4]] (S[key][value]); alpha = [0.5, 1] decays key row 0:   [[0.5,1],[3,4]]
  // u = S^T k with k = [1,0]:                                                 [0.5, 1]
  // S += beta k (v - u)^T with beta 0.5, v = [10,20]: row 0 += 0.5*[9.5,19] -> [[5.25,10.5],[3,4]]
  // o = S^T q with q = [1,0] reads row 0 of the updated state:               [5.25, 10.5]
  const S = f64(1, 2, 3, 4);
  const o = kdaStep(S, f64(1, 0), f64(1, 0), f64(10, 20), f64(0.5, 1), 0.5);
  assert.deepEqual(Array.from(S), [5.25, 10.5, 3, 4]);
  assert.deepEqual(Array.from(o), [5.25, 10.5]);
});

test('kda step reads with the query over key channels: o[j] = sum_i S[i][j] q[i]', () => {
  const S = f64(1, 2, 3, 4);
  const o = kdaStep(S, f64(0, 1), f64(0, 0), f64(0, 0), f64(1, 1), 0);
  assert.deepEqual(Array.from(o), [3, 4]);
});

test('kda state held transposed puts the decay on value channels', () => {
  const S = f64(1, 2, 3, 4);
  kdaStep(S, f64(0, 0), f64(0, 0), f64(0, 0), f64(0.5, 1), 0, 'kda-state-transposed');
  assert.deepEqual(Array.from(S), [0.5, 2, 1.5, 4]);
});

const shape = (gateLowerBound: number | null): KdaShape => ({ numHeads: 2, headDim: 3, gateLowerBound, eps: 1e-5 });
// A_log stored padded to head_dim: heads 0 and 1, then an exact zero.
const aLog = f64(0.5, -0.3, 0);
// z + dt_bias = -1 everywhere
const z = new Float64Array(6).fill(-0.25);
const dtBias = new Float64Array(6).fill(-0.75);

test('kda lower-bound gate is lb * sigmoid(exp(A_log[head]) * (z + dt_bias))', () => {
  const g = kdaDecay(z, dtBias, aLog, shape(-5));
  // head 0: -5 sigmoid(-e^0.5); head 1: -5 sigmoid(-e^-0.3), the same for every channel of a head
  assertAllClose(g, [-0.806409241977849, -0.806409241977849, -0.806409241977849, -1.6141262367230835, -1.6141262367230835, -1.6141262367230835], 1e-14);
});

test('kda softplus gate is -exp(A_log[head]) * softplus(z + dt_bias)', () => {
  const g = kdaDecay(z, dtBias, aLog, shape(null));
  assertClose(g[3], -0.23206996595500218, 1e-15);
  assertClose(g[5], -0.23206996595500218, 1e-15);
});

test('kda A_log read per channel differs from per head', () => {
  const right = kdaDecay(z, dtBias, aLog, shape(-5));
  const wrong = kdaDecay(z, dtBias, aLog, shape(-5), 'kda-a-log-per-channel');
  // head 1 channel 0 reads A_log[0] instead of A_log[1]
  assertClose(wrong[3], -0.806409241977849, 1e-14);
  assert.notEqual(wrong[3], right[3]);
});

test('kda short conv is causal with zero history, last tap on the current input, then SiLU', () => {
  // one channel, taps [0.1, 0.2, 0.3, 0.4] oldest to newest, inputs u0 = 2, u1 = -1
  const y = shortConvSilu([f64(2), f64(-1)], matrix(1, 4, f64(0.1, 0.2, 0.3, 0.4)));
  assertClose(y[0][0], 0.55197958490209, 1e-15); // silu(0.4*2)
  assertClose(y[1][0], 0.10996679946249555, 1e-15); // silu(0.3*2 + 0.4*-1)
});
