// kernel-paths.test.ts - every kernel implementation this CPU runs (the scalar reference,
// AVX2, AVX-512, AMX; K3_KERNELS forces one for a process) computes what the float64 reference
// computes, within the engine tolerance, at every position of the tiny fixture; within one
// implementation, batch size and thread count change no bit. The implementations add in
// different orders, so their bits differ from each other (which also shows that each run
// used the implementation it was asked for).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { forwardAll, loadReferenceModel } from '../reference';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const TOLERANCE = 2e-3; // as reference.test.ts
const PROMPT = [1512, 12, 19, 4, 2766, 11, 220, 1008, 10484, 318, 7, 15, 45, 98, 163586, 12, 19, 4, 2766];

/** The implementations this CPU can run, from the flags kernels_best() checks. */
function pathsHere(): string[] {
  const flags = new Set((fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/));
  const paths = ['scalar'];
  if (flags.has('avx2') && flags.has('fma')) paths.push('avx2');
  if (['avx512f', 'avx512bw', 'avx512vl', 'avx512dq'].every((f) => flags.has(f))) {
    paths.push('avx512');
    if (flags.has('amx_tile') && flags.has('amx_bf16')) paths.push('amx');
  }
  return paths;
}

/** Every position's logits from one teacher-forced pass with the given kernels. */
function logitsWith(kernels: string, model: string, dir: string, batch: number, threads: number): Float32Array {
  const dump = path.join(dir, `${kernels}-${batch}-${threads}.bin`);
  const r = spawnSync(
    k3Binaries.plain,
    [model, '--ids', PROMPT.join(','), '--tf-check', '--dump-logits', dump, '--batch', String(batch), '--threads', String(threads)],
    { encoding: 'utf8', env: { ...process.env, K3_KERNELS: kernels } },
  );
  assert.equal(r.status, 0, r.stderr);
  const bytes = fs.readFileSync(dump);
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

test('each kernel implementation is within the tolerance of the reference and bit-stable across batches and threads', () => {
  const model = ensureFixture({ gate: 'lowerbound' });
  const expected = forwardAll(loadReferenceModel(model), PROMPT);
  const vocab = expected[0].length;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-kernels-'));
  try {
    const byPath = new Map<string, Float32Array>();
    for (const kernels of pathsHere()) {
      const whole = logitsWith(kernels, model, dir, 128, 2);
      const one = logitsWith(kernels, model, dir, 1, 1);
      assert.ok(Buffer.from(whole.buffer).equals(Buffer.from(one.buffer)), `${kernels}: batch 128 x 2 threads != batch 1`);
      let worst = 0;
      for (let p = 0; p < PROMPT.length; p++)
        for (let v = 0; v < vocab; v++) worst = Math.max(worst, Math.abs(whole[p * vocab + v] - expected[p][v]));
      assert.ok(worst <= TOLERANCE, `${kernels}: max |engine - reference| = ${worst}`);
      for (const [other, theirs] of byPath)
        assert.ok(!Buffer.from(whole.buffer).equals(Buffer.from(theirs.buffer)), `${kernels} gave ${other}'s bits`);
      byPath.set(kernels, whole);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
