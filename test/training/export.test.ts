// export.test.ts - what training/export.py writes is what the engine reads: a randomly
// initialised model of the `test` size is exported in the released layout (BF16 trunk, F32
// gate parameters, MXFP4 experts, config.json), reloaded into torch, and the engine's
// logits on the exported directory match torch's float64 logits of the same weights at
// every position. Tolerance 2e-3, as between the engine and the TypeScript reference
// (test/engine/reference.test.ts: float32 against float64 accumulation); measured 1.5e-5.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { engine } from '../support/engine';
import { repoRoot } from '../support/paths';

const TOLERANCE = 2e-3;
const IDS = [1, 2, 3, 400, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 600, 511, 0];

test('the engine computes on an exported checkpoint what torch computes on its weights', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-export-'));
  try {
    const r = spawnSync('/usr/bin/python3', [path.join(repoRoot, 'training/check_export.py'), dir, '--ids', IDS.join(',')], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `check_export.py failed (is python3-torch installed?):\n${r.stderr}`);
    const bytes = fs.readFileSync(path.join(dir, 'torch-logits.f64'));
    const expected = new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
    const model = new engine.Model(dir);
    const ctx = new engine.Context(model, { maxContext: 64 });
    const { logits } = ctx.decode(Int32Array.from(IDS), IDS.length);
    assert.equal(logits.length, expected.length);
    let worst = 0;
    let spread = 0;
    for (let i = 0; i < expected.length; i++) {
      worst = Math.max(worst, Math.abs(logits[i] - expected[i]));
      spread = Math.max(spread, Math.abs(expected[i]));
    }
    ctx.close();
    model.close();
    assert.ok(spread > 1, `the logits carry signal (max |logit| ${spread})`);
    assert.ok(worst <= TOLERANCE, `max |engine - torch| = ${worst}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
