// scale-profile.test.ts - the arithmetic that turns `k3 bench-scale` runs into the figures
// of docs/SCALE.md and the machine profile (scripts/bench/lib/scale-profile.ts), on
// hand-made runs: per-kind medians over the steady steps (the first step, which fills the
// caches, left out), the verify factor with the experts' and the waits' part taken away,
// and the profile's fields.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diskConcurrency, kindFigures, makeProfile, passHitRate, prefillFactor, verifyFactors, type LayerRecord, type Pass, type ScaleRun } from '../../scripts/bench/lib/scale-profile';

/** A layer record: mixer and FFN seconds, bytes, waits, distinct experts. */
function rec(mixer: number, ffn: number, bytes: number, experts = 0, wait = 0): LayerRecord {
  return [mixer, ffn, bytes / 2, bytes / 2, 0, wait, experts, 0];
}

function pass(scale: number, experts = 4, wait = 0, bandwidth = 10e9): Pass {
  return {
    seconds: scale * (0.3 + 0.2 + 0.2 + 0.15 + 0.25) + wait,
    cpu_s: 1,
    embed_s: 0,
    head_s: 0.25 * scale,
    head_bytes: 2e9,
    bandwidth,
    layers: [rec(0.1 * scale, 0.2 * scale, 2e9), rec(0.1 * scale, 0.1 * scale, 1e9, experts, wait), rec(0.05 * scale, 0.1 * scale, 0.5e9, experts)],
  };
}

const run: ScaleRun = {
  model: 'm',
  threads: 2,
  io_threads: 2,
  repeat: 1,
  cold_each_token: 0,
  load_average: [1, 1, 1, 1, 1, 1],
  peak_rss_bytes: 1,
  open_seconds: 1,
  layers: [
    { mixer: 'kda', ffn: 'mlp' },
    { mixer: 'kda', ffn: 'moe' },
    { mixer: 'mla', ffn: 'moe' },
  ],
  // The first step is slow (caches filling) and must not count; then 1x, 1.2x, 1x.
  steps: [pass(5, 4, 0, 8e9), pass(1, 4, 0, 10e9), pass(1.2, 4, 0, 12e9), pass(1, 4, 0, 11e9)],
  prefill: null,
  verify: [
    { positions: 1, pass: pass(1) },
    { positions: 1, pass: pass(1.1) },
    // Two positions: twice the experts, a wait of 0.3 s; the rest 1.5x a single pass.
    { positions: 2, pass: { ...pass(1.5, 8, 0.3) } },
  ],
  disk_sequential: [{ block: 256e6, readers: 1, bytes: 4e9, seconds: 2, read_seconds: 2, cpu_seconds: 0.5 }],
  disk_random: [{ block: 17e6, readers: 2, bytes: 1.7e9, seconds: 4, read_seconds: 8, cpu_seconds: 0.34 }],
  disk_mixed: [{ block: 17e6, readers: 3, bytes: 5e9, seconds: 2.5, read_seconds: 9, cpu_seconds: 1 }],
  disk_sequential_after: [],
  disk_random_after: [],
  disk_mixed_after: [],
  beside_reads: { triad_alone: 40e9, triad_reading: 30e9, triad_read_bytes_per_s: 1e9, steps_read_bytes_per_s: 1e9, steps: [0.5, 0.6] },
  memory: {} as ScaleRun['memory'],
};

test('kind figures are the medians over the steady steps, the first step left out', () => {
  const k = kindFigures(run);
  assert.ok(Math.abs(k.dense.seconds - 0.3) < 1e-12);
  assert.ok(Math.abs(k.dense.ffn_seconds - 0.2) < 1e-12);
  assert.equal(k.dense.bytes, 2e9);
  assert.ok(Math.abs(k.kda_moe.seconds - 0.2) < 1e-12);
  assert.ok(Math.abs(k.mla_moe.seconds - 0.15) < 1e-12);
  assert.ok(Math.abs(k.lm_head.seconds - 0.25) < 1e-12);
});

test('the verify factor leaves out the experts\' compute and the waits, fastest repetition first', () => {
  const expertSeconds = 0.01;
  const [one, two] = verifyFactors(run, expertSeconds);
  assert.equal(one.positions, 1);
  assert.equal(one.factor, 1);
  // Each pass: 8 distinct experts at positions 1 (4 per MoE layer), 16 at 2.
  const rest1 = pass(1).seconds - 8 * expertSeconds;
  const rest2 = pass(1.5, 8, 0.3).seconds - 0.3 - 16 * expertSeconds;
  assert.ok(Math.abs(two.factor - rest2 / rest1) < 1e-12, `${two.factor}`);
  assert.equal(two.experts, 16);
});

test('the profile takes the median triad, what reads beside it leave of it, the probes\' aggregate rates and the kinds', () => {
  const p = makeProfile(run, { sequential: run.disk_sequential[0], expert: run.disk_random[0] }, 17e6, 'test');
  assert.equal(p.format, 'k3-machine-profile');
  assert.equal(p.memory_bandwidth, 10.5e9); // median of 8, 10, 12, 11
  assert.equal(p.disk_sequential, 2e9);
  assert.equal(p.disk_expert, 1.7e9 / 4);
  // The steps' triad scaled by the share the reads left of the triad measured beside them.
  assert.equal(p.memory_bandwidth_reading, 10.5e9 * 0.75);
  assert.deepEqual(Object.keys(p.kinds).sort(), ['dense', 'kda_moe', 'lm_head', 'mla_moe']);
  assert.deepEqual(p.verify.map((v) => v.positions), [1, 2]);
  assert.throws(() => makeProfile({ ...run, beside_reads: null }, { sequential: run.disk_sequential[0], expert: run.disk_random[0] }, 17e6, 'test'), /--beside-reads/);
});

test('reading both kinds at once is timed against one after the other at the same minutes\' probe rates, before and after together', () => {
  // Before: sequential 2 GB/s, experts 0.425 GB/s; the mixed probe read 3.3 GB in order and
  // the random probe's 1.7 GB of experts in 2.5 s, where one after the other takes 5.65 s.
  assert.ok(Math.abs((diskConcurrency(run) as number) - 5.65 / 2.5) < 1e-12);
  // After: both 1 GB/s, so 5 s one after the other; the mixed probe took 6 s.
  const after = {
    ...run,
    disk_sequential_after: [{ ...run.disk_sequential[0], seconds: 4 }],
    disk_random_after: [{ ...run.disk_random[0], seconds: 1.7 }],
    disk_mixed_after: [{ ...run.disk_mixed[0], seconds: 6 }],
  };
  assert.ok(Math.abs((diskConcurrency(after) as number) - (5.65 + 5) / (2.5 + 6)) < 1e-12);
  assert.equal(diskConcurrency({ ...run, disk_mixed: [] }), undefined, 'no mixed probe, nothing to say');
  const p = makeProfile(run, { sequential: run.disk_sequential[0], expert: run.disk_random[0], concurrency: 0.9 }, 17e6, 'test');
  assert.equal(p.disk_concurrency, 0.9);
  assert.equal(makeProfile(run, { sequential: run.disk_sequential[0], expert: run.disk_random[0] }, 17e6, 'test').disk_concurrency, undefined);
});

test('the hit rate of a run is one minus the experts read over the experts asked for', () => {
  const slot = 1e6;
  const p = (asked: number, readBytes: number): Pass => ({ ...pass(1), layers: [[0, 0, 0, 0, 0, 0, asked, readBytes]] });
  assert.equal(passHitRate([p(16, 16 * slot), p(16, 4 * slot)], slot), 1 - 20 / 32);
  assert.equal(passHitRate([p(16, 0)], slot), 1);
  assert.equal(passHitRate([], slot), 1, 'no request: nothing was missed');
});

test('g\' comes from a prefill timed in one pass: a slower prefill gives a larger factor, and none without such a pass', () => {
  const shape = { layerBytes: [2e9, 0.9e9, 0.4e9], moe: [false, true, true], expertBytes: 1e7, experts: 8, topK: 2 };
  const prefill = (seconds: number, passes = 1, tokens = 64) => ({
    ...run,
    prefill: { tokens, batch: 64, batch_sized: 0, passes, trunk_layer_reads: 0, streamed_layers: 0, pass: { ...pass(1), seconds } },
  });
  assert.equal(prefillFactor(run, shape), undefined, 'no prefill');
  assert.equal(prefillFactor(prefill(20, 2), shape), undefined, 'two passes');
  assert.equal(prefillFactor(prefill(20, 1, 1), shape), undefined, 'one token');
  const slow = prefillFactor(prefill(40), shape);
  const fast = prefillFactor(prefill(20), shape);
  assert.ok(slow && fast);
  assert.deepEqual(fast[0], { positions: 1, factor: 1 });
  assert.equal(fast[1].positions, 64);
  assert.ok(slow[1].factor > fast[1].factor && fast[1].factor > 1, `${fast[1].factor} then ${slow[1].factor}`);
  // Faster than one step's own work is no factor at all.
  assert.equal(prefillFactor(prefill(0.1), shape), undefined);
});
