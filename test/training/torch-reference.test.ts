// torch-reference.test.ts - the PyTorch K3 that trains the embedded default model
// (training/k3_torch.py) computes what the independent float64 TypeScript reference computes,
// on the tiny fixture with both KDA gate forms. Both run in float64 on the same exact
// bf16/MXFP4 values, so they differ only by summation order: the measured worst case is
// 1.6e-13; 1e-8 is the stated tolerance, and the smallest classic porting mistake
// moves the logits by more than 1e-3 (test/engine/reference.test.ts), so a torch model with
// any of them cannot pass. A truncated checkpoint is refused naming shard, tensor and
// byte counts. Needs Debian's python3-torch for /usr/bin/python3 (.ci/run
// installs it).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { forwardAll, loadReferenceModel } from '../reference';
import { ensureFixture, type GateForm } from '../support/fixtures';
import { repoRoot } from '../support/paths';

const TOLERANCE = 1e-8;
const PYTHON = '/usr/bin/python3';
const PROMPTS: number[][] = [
  [1008, 10484, 318, 15383, 387],
  [163587, 4, 88, 163589, 200, 3001, 41000, 77, 163588, 9, 9, 9, 150000, 17, 1512, 12, 19, 4, 2766],
];

function torchLogits(dir: string, ids: number[]): Float64Array {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'k3-torch-')), 'logits.f64');
  const r = spawnSync(PYTHON, [path.join(repoRoot, 'training/check_reference.py'), dir, '--ids', ids.join(','), '--out', out], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `check_reference.py failed (is python3-torch installed? apt-get install python3-torch):\n${r.stderr}`);
  const bytes = fs.readFileSync(out);
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
  return new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
}

for (const gate of ['lowerbound', 'softplus'] as GateForm[]) {
  test(`the torch K3 matches the TypeScript reference at every position (${gate} gate)`, () => {
    const dir = ensureFixture({ gate });
    const ref = loadReferenceModel(dir);
    for (const prompt of PROMPTS) {
      const expected = forwardAll(ref, prompt);
      const got = torchLogits(dir, prompt);
      const vocab = expected[0].length;
      assert.equal(got.length, prompt.length * vocab);
      let worst = 0;
      let spread = 0;
      for (let p = 0; p < prompt.length; p++) {
        for (let i = 0; i < vocab; i++) {
          worst = Math.max(worst, Math.abs(got[p * vocab + i] - expected[p][i]));
          spread = Math.max(spread, Math.abs(expected[p][i]));
        }
      }
      assert.ok(spread > 1, `the logits carry signal (max |logit| ${spread})`);
      assert.ok(worst <= TOLERANCE, `prompt of ${prompt.length} ids: max |torch - reference| = ${worst}`);
    }
  });
}

test('the torch loader names the shard, tensor and byte counts of a truncated checkpoint', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-torch-bad-'));
  try {
    fs.copyFileSync(path.join(ensureFixture(), 'config.json'), path.join(dir, 'config.json'));
    const header = Buffer.from(JSON.stringify({ 'language_model.lm_head.weight': { dtype: 'BF16', shape: [4, 8], data_offsets: [0, 64] } }));
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(header.length));
    fs.writeFileSync(path.join(dir, 'model.safetensors'), Buffer.concat([length, header, Buffer.alloc(10)]));
    const r = spawnSync(PYTHON, [path.join(repoRoot, 'training/check_reference.py'), dir, '--ids', '1', '--out', path.join(dir, 'x')], {
      encoding: 'utf8',
    });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /model\.safetensors: tensor language_model\.lm_head\.weight data_offsets \[0, 64\] must hold 64 bytes .* inside the 10 data bytes/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
