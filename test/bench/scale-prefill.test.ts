// scale-prefill.test.ts - the arithmetic that checks time to first token on the slice
// (scripts/bench/lib/scale-prefill.ts), on hand-made runs: the counts a batch implies
// (⌈N / batch⌉ passes, each reading every streamed layer once), the forecast's error and the
// term that moved a miss, and the prompt lengths K3_SCALE_PREFILL accepts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePrefillLengths, prefillCheck, prefillCountErrors, prefillMissTerm } from '../../scripts/bench/lib/scale-prefill';
import type { Pass, PrefillForecast, PrefillRecord } from '../../scripts/bench/lib/scale-profile';

/** A prefill of `seconds`, waiting `wait` on the trunk, having read the given bytes. */
function record(over: Partial<PrefillRecord> = {}, seconds = 10, wait = 2, reads: [number, number, number, number] = [4e9, 3, 6e9, 2]): PrefillRecord {
  const pass: Pass = {
    seconds,
    cpu_s: 2 * seconds,
    embed_s: 0,
    head_s: 0.1,
    head_bytes: 2e9,
    bandwidth: 0,
    reads,
    layers: [
      [1, 1, 1e9, 1e9, wait, 0, 0, 0],
      [1, 1, 1e9, 1e9, 0, 0, 64, 4e9],
    ],
  };
  return { tokens: 2048, batch: 2049, batch_sized: 1, passes: 1, trunk_layer_reads: 3, streamed_layers: 3, pass, ...over };
}

function forecast(over: Partial<PrefillForecast> = {}): PrefillForecast {
  return { tokens: 2048, batch: 2049, passes: 1, seconds: 11, compute_seconds: 8.5, disk_seconds: 3, trunk_read_bytes: 6e9, expert_read_bytes: 4e9, ...over };
}

test('a prefill agrees with its batch when it took ⌈N / batch⌉ passes, each reading every streamed layer', () => {
  assert.deepEqual(prefillCountErrors('one pass', record()), []);
  assert.deepEqual(prefillCountErrors('16 passes', record({ batch: 128, passes: 16, trunk_layer_reads: 48 })), []);
  assert.deepEqual(prefillCountErrors('resident', record({ streamed_layers: 0, trunk_layer_reads: 0 })), []);
  // 2048 / 1000 leaves a short third pass.
  assert.deepEqual(prefillCountErrors('short last pass', record({ batch: 1000, passes: 3, trunk_layer_reads: 9 })), []);
});

test('a prefill that read the trunk more often than its passes, or took more passes than its batch needs, is named with its figures', () => {
  assert.deepEqual(prefillCountErrors('re-read', record({ trunk_layer_reads: 5 })), ['re-read: 5 trunk layer reads, expected 1 passes x 3 streamed layers = 3']);
  assert.deepEqual(prefillCountErrors('split', record({ batch: 128, passes: 17, trunk_layer_reads: 51 })), [
    'split: 2048 tokens in batches of 128 took 17 passes, expected ⌈2048 / 128⌉ = 16',
    'split: 51 trunk layer reads, expected 16 passes x 3 streamed layers = 48',
  ]);
  assert.deepEqual(prefillCountErrors('no batch', record({ batch: 0 })), ['no batch: prefill batch 0 (expected at least 1)']);
});

test('the check compares the forecast with the run term by term: compute is the pass less its waits', () => {
  const c = prefillCheck('p', record(), forecast());
  assert.equal(c.seconds, 10);
  assert.equal(c.waits, 2);
  assert.equal(c.compute, 8);
  assert.ok(Math.abs(c.error - 0.1) < 1e-12);
  assert.ok(Math.abs(c.compute_error - 0.0625) < 1e-12);
  assert.equal(c.trunk_bytes_error, 0);
  assert.equal(c.expert_bytes_error, 0);
  assert.equal(c.trunk_read_seconds, 2);
  assert.equal(c.expert_read_seconds, 3);
});

test('a forecast made for another batch or length than the run is refused', () => {
  assert.throws(() => prefillCheck('p', record(), forecast({ batch: 128 })), /forecast is for 2048 tokens in batches of 128, the run prefilled 2048 in batches of 2049/);
  assert.throws(() => prefillCheck('p', record(), forecast({ tokens: 512 })), /forecast is for 512 tokens/);
});

test('a miss names the term furthest from the run in seconds; a forecast within the tolerance names none', () => {
  assert.equal(prefillMissTerm(prefillCheck('p', record(), forecast()), 0.15), undefined);
  // Compute forecast 16 s against 8 measured.
  assert.deepEqual(prefillMissTerm(prefillCheck('p', record(), forecast({ seconds: 19, compute_seconds: 16 })), 0.15), { term: 'compute', seconds: 8 });
  // Twice the trunk bytes the run read, at the run's 2 s of trunk reads: 2 s too many.
  assert.deepEqual(prefillMissTerm(prefillCheck('p', record(), forecast({ seconds: 13, trunk_read_bytes: 12e9 })), 0.15), { term: 'trunk reads', seconds: 2 });
  // Half the expert bytes at 3 reader-seconds: 1.5 s too few.
  assert.deepEqual(prefillMissTerm(prefillCheck('p', record(), forecast({ seconds: 7, compute_seconds: 8, expert_read_bytes: 2e9 })), 0.15), { term: 'expert reads', seconds: -1.5 });
});

test('K3_SCALE_PREFILL takes the lengths k3 forecast gives, or none', () => {
  assert.deepEqual(parsePrefillLengths('512,2048', [512, 2048]), [512, 2048]);
  assert.deepEqual(parsePrefillLengths(' 2048 ', [512, 2048]), [2048]);
  assert.deepEqual(parsePrefillLengths('0', [512, 2048]), []);
  assert.deepEqual(parsePrefillLengths('', [512, 2048]), []);
  assert.throws(() => parsePrefillLengths('512,1000', [512, 2048]), /K3_SCALE_PREFILL=512,1000: 1000 is not a length k3 forecast gives \(512, 2048\), or 0 for none/);
});
