// mistakes.test.ts - every classic K3 porting mistake moves the tiny fixture's logits by a
// clearly measurable amount (far above the tolerance the C engine is held to), so a port
// that makes one cannot pass a comparison with the reference. Each test reports the
// largest logit difference it measured.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ensureFixture } from '../support/fixtures';
import { MISTAKES, MISTAKE_DESCRIPTIONS, type Mistake } from './mistakes';
import { forwardAll, loadReferenceModel, type ReferenceModel } from './model';

/** Visible means more than this; the engine's tolerance against the reference is far smaller. */
const VISIBLE = 1e-3;

// Two prompts of real K3 token ids; both longer than one token, so attention and the KDA
// state have history (at position 0 a softmax over one key hides any score scale).
const PROMPTS = [
  [1008, 10484, 318, 15383, 387, 17374, 20829, 10],
  [18805, 308, 799, 5624, 12524, 318],
];

const correct = new Map<ReferenceModel, Float64Array[][]>();

/** Largest |logit difference| over every position and token of every prompt; NaN counts as infinite. */
function maxDifference(model: ReferenceModel, mistake: Mistake): number {
  if (!correct.has(model)) correct.set(model, PROMPTS.map((p) => forwardAll(model, p)));
  const base = correct.get(model) as Float64Array[][];
  let max = 0;
  PROMPTS.forEach((p, k) => {
    forwardAll(model, p, { mistake }).forEach((row, t) => {
      for (let i = 0; i < row.length; i++) {
        const d = Math.abs(row[i] - base[k][t][i]);
        max = Number.isNaN(d) ? Infinity : Math.max(max, d);
      }
    });
  });
  return max;
}

const lowerbound = loadReferenceModel(ensureFixture({ size: 'tiny', gate: 'lowerbound' }));

/** Where a mistake hides on the default fixture, the fixture built to show it. */
const SHOWN_ON: Partial<Record<Mistake, () => ReferenceModel>> = {
  // With router scores near 0.5 and top-2, the two weights sum to about 1 anyway.
  'router-not-renormalised': () => loadReferenceModel(ensureFixture({ size: 'tiny', gate: 'lowerbound', router: 'sharp' })),
};

for (const mistake of MISTAKES.filter((m) => m !== 'zero-based-layer-lists')) {
  test(`mistake ${mistake} moves the logits visibly`, (t) => {
    const shown = SHOWN_ON[mistake];
    if (shown) t.diagnostic(`on the default fixture only ${maxDifference(lowerbound, mistake).toExponential(3)}`);
    const d = maxDifference(shown ? shown() : lowerbound, mistake);
    t.diagnostic(`max |logit difference| ${d.toExponential(3)}: ${MISTAKE_DESCRIPTIONS[mistake]}`);
    assert.ok(d > VISIBLE, `${mistake} changes the logits by only ${d}`);
  });
}

test('mistake kda-wrong-gate-form moves the logits visibly on the softplus fixture too', (t) => {
  const softplus = loadReferenceModel(ensureFixture({ size: 'tiny', gate: 'softplus' }));
  const d = maxDifference(softplus, 'kda-wrong-gate-form');
  t.diagnostic(`max |logit difference| ${d.toExponential(3)}`);
  assert.ok(d > VISIBLE, `the lower-bound gate on the softplus fixture changes the logits by only ${d}`);
});

test('mistake zero-based-layer-lists cannot even load: layer 0 would need MLA weights', () => {
  assert.throws(
    () => forwardAll(lowerbound, PROMPTS[0], { mistake: 'zero-based-layer-lists' }),
    /layer 0 is MLA under a 0-based reading .* no language_model\.model\.layers\.0\.self_attn\.q_a_proj\.weight/,
  );
});
