// model.test.ts - the reference model end to end on the tiny generated checkpoint: it
// loads, decodes with activations in a realistic range, is causal, rejects bad input, and
// its command line writes what greedy() computes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../fixture/paths';
import { ensureFixture } from '../support/fixtures';
import { forwardAll, forwardLast, greedy, loadReferenceModel, type ReferenceModel } from './model';

// "The capital of France is" and "According to all known laws" in the K3 tokenizer.
const PROMPT = [1008, 10484, 318, 15383, 387];
const PROMPT2 = [18805, 308, 799, 5624, 12524];

const models = new Map<string, ReferenceModel>();
function model(gate: 'lowerbound' | 'softplus'): ReferenceModel {
  if (!models.has(gate)) models.set(gate, loadReferenceModel(ensureFixture({ size: 'tiny', gate })));
  return models.get(gate) as ReferenceModel;
}

function spread(logits: Float64Array): number {
  const mean = logits.reduce((a, b) => a + b, 0) / logits.length;
  return Math.sqrt(logits.reduce((a, b) => a + (b - mean) ** 2, 0) / logits.length);
}

// 32 steps on the release's gate form; 8 on the other keep the suite fast.
for (const [gate, prompt, steps] of [['lowerbound', PROMPT, 32], ['softplus', PROMPT2, 8]] as const) {
  test(`greedy decoding of the tiny ${gate} fixture over ${steps} steps is not one repeated token and keeps a logit spread`, (t) => {
    const r = greedy(model(gate), prompt, steps);
    assert.equal(r.generated.length, steps);
    const distinct = new Set(r.generated).size;
    assert.ok(distinct > 1, `${steps} greedy steps produced only token ${r.generated[0]}`);
    for (const [i, l] of r.logits.entries()) {
      assert.ok(l.every(Number.isFinite), `step ${i} has non-finite logits`);
      assert.ok(spread(l) > 0.5, `step ${i}: logit standard deviation ${spread(l)} over the vocabulary`);
    }
    t.diagnostic(`${distinct} distinct tokens; logit std at the last step ${spread(r.logits[steps - 1]).toFixed(3)}; smallest top-2 margin ${Math.min(...r.margins).toExponential(2)}`);
  });
}

test('logits of a position do not depend on later tokens', () => {
  const ids = [...PROMPT, ...PROMPT2];
  const all = forwardAll(model('lowerbound'), ids);
  const prefix = forwardAll(model('lowerbound'), ids.slice(0, 6));
  assert.deepEqual(Array.from(prefix[5]), Array.from(all[5]));
  assert.deepEqual(Array.from(forwardLast(model('lowerbound'), ids)), Array.from(all[ids.length - 1]));
});

test('the reference rejects token ids outside the vocabulary', () => {
  assert.throws(() => forwardAll(model('lowerbound'), [1, 163_840]), /token id 163840 is outside 0\.\.163839/);
  assert.throws(() => forwardAll(model('lowerbound'), []), /no tokens/);
});

test('loading rejects a checkpoint whose tensors disagree with its config', () => {
  const src = ensureFixture({ size: 'tiny', gate: 'lowerbound' });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-ref-'));
  try {
    for (const f of fs.readdirSync(src)) if (f !== 'config.json') fs.symlinkSync(path.join(src, f), path.join(dir, f));
    const config = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8')) as { text_config: Record<string, unknown> };
    config.text_config.moe_intermediate_size = 64;
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
    assert.throws(() => loadReferenceModel(dir), /shared_experts\.gate_proj\.weight is BF16 \[192,64\], the config implies BF16 \[128,64\]/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the reference command line writes the prompt, greedy ids, margins and per-step logits', () => {
  const dir = ensureFixture({ size: 'tiny', gate: 'lowerbound' });
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'k3-ref-')), 'ref.json');
  try {
    const r = spawnSync(process.execPath, ['scripts/run-ts.mjs', 'test/reference/cli.ts', dir, '--ids', PROMPT.join(','), '--gen', '2', '--out', out], {
      cwd: repoRoot(),
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const json = JSON.parse(fs.readFileSync(out, 'utf8')) as { prompt: number[]; generated: number[]; margins: number[]; logits: number[][] };
    const expected = greedy(model('lowerbound'), PROMPT, 2);
    assert.deepEqual(json.prompt, PROMPT);
    assert.deepEqual(json.generated, expected.generated);
    assert.deepEqual(json.margins, expected.margins);
    assert.deepEqual(json.logits[1], Array.from(expected.logits[1]));
  } finally {
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  }
});

test('the reference command line names a bad argument and exits non-zero', () => {
  const r = spawnSync(process.execPath, ['scripts/run-ts.mjs', 'test/reference/cli.ts', '/nonexistent', '--ids', '1,x'], { cwd: repoRoot(), encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--ids must be comma-separated token ids/);
});
