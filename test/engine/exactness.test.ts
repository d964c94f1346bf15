// exactness.test.ts - the engine's bit-for-bit promises on the tiny fixture: incremental
// decode equals full recompute, a batched forward over k positions equals k one-token
// steps, prefill batch size and thread count never change a bit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bitIdentical, engine, greedyIncremental } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const PROMPT = [1512, 12, 19, 4, 2766, 11, 220, 1008, 10484, 318, 7, 15, 45, 98, 12, 19, 4, 2766];

function openModel() {
  return new engine.Model(ensureFixture({ gate: 'lowerbound' }));
}

test('incremental decode equals full recompute: same tokens, bit-identical logits at every step', () => {
  const model = openModel();
  const inc = new engine.Context(model, { maxContext: 64 });
  const full = new engine.Context(model, { maxContext: 64 });
  const steps = greedyIncremental(inc, PROMPT, 20);
  const seq = [...PROMPT];
  for (let s = 0; s < steps.ids.length; s++) {
    full.reset();
    const logits = full.decode(Int32Array.from(seq), 1).logits;
    assert.ok(bitIdentical(logits, steps.logits[s]), `step ${s}: recomputed logits differ from incremental ones`);
    seq.push(steps.ids[s]);
  }
  assert.deepEqual(Array.from(inc.tokens), seq.slice(0, seq.length - 1));
  model.close();
});

test('a batched forward over k positions equals k one-token steps, bit for bit', () => {
  const model = openModel();
  const vocab = model.vocabSize;
  for (const k of [1, 2, 5, 8]) {
    const batched = new engine.Context(model, { maxContext: 64 });
    const serial = new engine.Context(model, { maxContext: 64 });
    batched.decode(Int32Array.from(PROMPT.slice(0, 6)));
    serial.decode(Int32Array.from(PROMPT.slice(0, 6)));
    const draft = PROMPT.slice(6, 6 + k);
    const all = batched.decode(Int32Array.from(draft), k, true);
    for (let i = 0; i < k; i++) {
      const one = serial.decode(Int32Array.of(draft[i]), 1).logits;
      assert.ok(bitIdentical(all.logits.subarray(i * vocab, (i + 1) * vocab), one), `k=${k}, position ${i}`);
      let best = 0;
      for (let v = 1; v < vocab; v++) if (one[v] > one[best]) best = v;
      assert.equal(all.argmax?.[i], best, `argmax after position ${i}`);
    }
  }
  model.close();
});

test('prefill batch size and thread count never change a bit', () => {
  const model = openModel();
  const run = (batch: number, threads: number) => {
    const ctx = new engine.Context(model, { maxContext: 64, batch, threads });
    const out = ctx.decode(Int32Array.from(PROMPT), PROMPT.length).logits;
    ctx.close();
    return out;
  };
  const reference = run(32, 1);
  for (const [batch, threads] of [[1, 1], [1, 2], [1, 3], [3, 1], [7, 2], [32, 2], [32, 3]]) {
    assert.ok(bitIdentical(run(batch, threads), reference), `batch ${batch}, ${threads} threads`);
  }
  model.close();
});

test('a long prompt with every position\'s logits gives the same bits in batches of 128, 32, 7 and 1', () => {
  // 80 positions: more than the 32 logits rows one forward pass computes, so a context
  // with batch 128 cuts the passes that want logits; the cut changes no bit.
  const model = openModel();
  const prompt = Array.from({ length: 80 }, (_, i) => PROMPT[i % PROMPT.length] + 1000 * (i % 5));
  const run = (batch: number, threads: number) => {
    const ctx = new engine.Context(model, { maxContext: 128, batch, threads });
    const out = ctx.decode(Int32Array.from(prompt), prompt.length, true);
    ctx.close();
    return out;
  };
  const reference = run(1, 1);
  for (const [batch, threads] of [[128, 1], [128, 2], [32, 2], [7, 1]]) {
    const got = run(batch, threads);
    assert.ok(bitIdentical(got.logits, reference.logits), `batch ${batch}, ${threads} threads: logits`);
    assert.deepEqual(Array.from(got.argmax ?? []), Array.from(reference.argmax ?? []), `batch ${batch}: argmax`);
  }
  model.close();
});

test('decode refuses a token outside the vocabulary and a sequence past the context, changing nothing', () => {
  const model = openModel();
  const ctx = new engine.Context(model, { maxContext: 8 });
  ctx.decode(Int32Array.of(1, 2, 3));
  assert.throws(() => ctx.decode(Int32Array.of(5, model.vocabSize)), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'token');
    assert.match(e.message, /token id 163840 at input position 1 is outside the vocabulary \[0, 163840\)/);
    return true;
  });
  assert.throws(() => ctx.decode(Int32Array.of(1, 2, 3, 4, 5, 6)), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'context-full');
    assert.match(e.message, /would reach 9 tokens \(3 held \+ 6 new\), past the context of 8 positions/);
    return true;
  });
  assert.equal(ctx.length, 3);
  model.close();
});

test('a checkpoint resume equals an uninterrupted decode, bit for bit, after the sequence diverged', () => {
  const model = openModel();
  const prefix = PROMPT.slice(0, 10);
  const branchA = [500, 501, 502, 503];
  const branchB = [900, 901, 902];
  const ctx = new engine.Context(model, { maxContext: 64 });
  ctx.decode(Int32Array.from(prefix));
  ctx.checkpoint();
  ctx.decode(Int32Array.from(branchA)); // the KDA state moves past the prefix
  // Back to the prefix and down another branch: only branch B is recomputed.
  assert.equal(ctx.sync(Int32Array.from([...prefix, ...branchB.slice(0, -1)])), prefix.length);
  const resumed = ctx.decode(Int32Array.of(branchB[branchB.length - 1]), 1).logits;
  const fresh = new engine.Context(model, { maxContext: 64 });
  const uninterrupted = fresh.decode(Int32Array.from([...prefix, ...branchB]), 1).logits;
  assert.ok(bitIdentical(resumed, uninterrupted), 'resumed logits differ from an uninterrupted decode');
  // The live sequence is reused without a checkpoint when it is a prefix.
  assert.equal(ctx.sync(Int32Array.from([...prefix, ...branchB, 7])), prefix.length + branchB.length);
  model.close();
});
