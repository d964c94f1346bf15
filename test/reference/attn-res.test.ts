// attn-res.test.ts - the reference's attention residuals against hand-computed values: the
// mix (scores from normalised candidates without gamma, sum of raw candidates) and the
// skeleton (what each site sees, raw block banking, the FFN seeing its layer's attention).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertAllClose } from '../support/close';
import { attnResMix, foldResWeight, runAttnResStack, type Seq } from './attn-res';

const f64 = (...v: number[]) => new Float64Array(v);

test('attn-res mix scores normalised candidates and sums the raw ones', () => {
  // normalised [2,2] -> ~[1,1], [3,-1] -> [3,-1]/sqrt(5); scores with w = [0.5,-0.25]: 0.25, 0.7826
  // p = [0.36991, 0.63009]; out = p0 [2,2] + p1 [3,-1]
  const out = attnResMix([f64(2, 2), f64(3, -1)], f64(0.5, -0.25), 1e-5);
  assertAllClose(out, [2.6300947520655247, 0.10971574380342641], 1e-14);
});

test('attn-res mix scores do not depend on a candidate scale, its value does', () => {
  const w = f64(0.5, -0.25);
  const base = attnResMix([f64(2, 2), f64(3, -1)], w, 0);
  const scaled = attnResMix([f64(20, 20), f64(3, -1)], w, 0);
  // same softmax weights p: scaled = base + 9 * p0 * [2, 2]
  const p0 = (base[1] - -1) / (2 - -1);
  assertAllClose(scaled, [base[0] + 18 * p0, base[1] + 18 * p0], 1e-12);
});

test('attn-res gamma is folded into the pseudo-query, not applied to the candidates', () => {
  assert.deepEqual(Array.from(foldResWeight(f64(2, 0.5), f64(3, 4))), [6, 2]);
});

test('attn-res mix over normalised values is the classic mistake', () => {
  const right = attnResMix([f64(2, 2), f64(3, -1)], f64(0.5, -0.25), 1e-5);
  const wrong = attnResMix([f64(2, 2), f64(3, -1)], f64(0.5, -0.25), 1e-5, 'attn-res-sum-normalised');
  assert.ok(Math.abs(right[0] - wrong[0]) > 0.5);
});

test('attn-res stack banks raw block sums and the FFN site sees its own layer attention', () => {
  // 4 layers, block size 2, one token with embedding [1,1]; zero pseudo-queries, so every
  // mix is the plain mean of its candidates. Layer l's mixer returns [l+1, 0], its FFN [0, l+1].
  // l0: attn sees e = [1,1] (nothing banked); bank e; P = a0 = [1,0]; ffn sees mean(e, P) = [1, .5]; P = [1,1]
  // l1: attn sees mean(e, [1,1]) = [1,1]; P = [3,1]; ffn sees mean(e, [3,1]) = [2,1]; P = [3,3]
  // l2: attn sees mean(e, [3,3]) = [2,2]; bank the raw [3,3]; P = [3,0]; ffn sees mean(e,[3,3],[3,0]); P = [3,3]
  // l3: attn sees mean(e,[3,3],[3,3]); P = [7,3]; ffn sees mean(e,[3,3],[7,3]); P = [7,7]
  // output: mean(e, [3,3], [7,7]) = [11/3, 11/3]
  const attnIn: number[][] = [];
  const ffnIn: number[][] = [];
  const zero = f64(0, 0);
  const out = runAttnResStack([f64(1, 1)], {
    numLayers: 4,
    blockSize: 2,
    eps: 1e-5,
    attnWeight: () => zero,
    mlpWeight: () => zero,
    outWeight: zero,
    mixer: (l: number, h: Seq) => {
      attnIn.push(Array.from(h[0]));
      return [f64(l + 1, 0)];
    },
    ffn: (l: number, h: Seq) => {
      ffnIn.push(Array.from(h[0]));
      return [f64(0, l + 1)];
    },
  });
  const flat = (xs: number[][]) => xs.flat();
  assertAllClose(flat(attnIn), flat([[1, 1], [1, 1], [2, 2], [7 / 3, 7 / 3]]), 1e-15);
  assertAllClose(flat(ffnIn), flat([[1, 0.5], [2, 1], [7 / 3, 4 / 3], [11 / 3, 7 / 3]]), 1e-15);
  assertAllClose(out[0], [11 / 3, 11 / 3], 1e-15);
});
