// heal.test.ts - token healing is exact (docs/PROMPTS.md, "Token healing"): on the embedded
// k3-mini and the random-weight tiny fixture, the engine's healed run equals the rule
// written out independently (support/engine.ts healedGreedy); where the healed tokens end
// on the healed text's last byte the rest is plain greedy decoding after them, and where
// they are the text's own tokens it is greedy decoding of the unhealed prompt;
// speculative decoding under the constraint equals serial decoding, with drafts all,
// partly or never accepted; generation cut into slices (as the server runs it), resumed
// from a checkpoint, or at another thread count gives the same ids; a loaded saved state,
// which carries no logits, is refused with a clear message.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { EngineError, Model } from '../../server/engine/engine';
import { Tokenizer } from '../../server/engine/tokenizer';
import { engine, greedyIncremental, healedGreedy, k3Binaries, ordinaryTokenBytes } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const MINI = path.join(repoRoot, 'media/models/k3-mini');
const GEN = 16;

// Cursor positions an editor sees: after indentation, inside a word, after `.` and `(`,
// inside a number and a string.
const PROMPTS = [
  'def area(r):\n    ',
  'def area(r):\n    ret',
  'const items = list.fil',
  'import os\npath = os.',
  'result = compute(',
  'let total = 10',
  'print("hel',
  'class Stack:\n    def __init__(self):\n        self.ite',
];

interface Model3 {
  dir: string;
  tok: Tokenizer;
  tokens: Uint8Array[];
}
const models: Model3[] = [];

before(() => {
  for (const dir of [MINI, ensureFixture({ gate: 'lowerbound' })]) {
    const tok = Tokenizer.open(dir);
    models.push({ dir, tok, tokens: ordinaryTokenBytes(tok) });
  }
});

after(() => {
  for (const m of models) m.tok.close();
});

/** The prompt text cut at its last piece: ids of the stable part, and the healed bytes. */
function cut(tok: Tokenizer, text: string): { ids: number[]; heal: string } {
  const at = tok.lastPiece(text);
  return { ids: Array.from(tok.encode(text.slice(0, at), false)), heal: text.slice(at) };
}

function withContext<T>(dir: string, f: (ctx: ReturnType<typeof newContext>) => T): T {
  const m = new engine.Model(dir);
  const ctx = newContext(m);
  try {
    return f(ctx);
  } finally {
    ctx.close();
    m.close();
  }
}

function newContext(m: InstanceType<typeof engine.Model>) {
  return new engine.Context(m, { maxContext: 1024 });
}

/** `k3 DIR --prompt-file … --heal` and its generated ids. */
function cliHeal(dir: string, text: string, extra: string[] = []): number[] {
  const file = path.join(os.tmpdir(), `k3-heal-${process.pid}.txt`);
  fs.writeFileSync(file, text);
  try {
    const r = spawnSync(k3Binaries.plain, [dir, '--prompt-file', file, '--heal', '--gen', String(GEN), ...extra], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const m = /^generated: \[([^\]]*)\]$/m.exec(r.stdout);
    assert.ok(m, r.stdout);
    return m[1] === '' ? [] : m[1].split(', ').map(Number);
  } finally {
    fs.rmSync(file, { force: true });
  }
}

test('the healed run is the rule of docs/PROMPTS.md: the best token that fits the healed bytes, then plain greedy', () => {
  for (const m of models) {
    for (const text of PROMPTS) {
      const { ids, heal } = cut(m.tok, text);
      const expected = withContext(m.dir, (ctx) => healedGreedy(ctx, ids, Buffer.from(heal, 'utf8'), m.tokens, GEN));
      assert.deepEqual(cliHeal(m.dir, text), expected, `${path.basename(m.dir)}: ${JSON.stringify(text)}`);
      const spelled = Buffer.from(m.tok.decodeBytes(expected)).toString('latin1');
      assert.ok(spelled.startsWith(Buffer.from(heal, 'utf8').toString('latin1')), `it spells ${JSON.stringify(heal)} first`);
    }
  }
});

test('where the healed tokens end on the last healed byte, the rest is greedy decoding after them; where they are its own tokens, greedy decoding of the unhealed prompt', (t) => {
  let aligned = 0;
  let canonical = 0;
  // Prompts ending in a finished piece, which the models more often spell on its own.
  const ends = ['  return x;', 'if (ready) {', 'values = [1, 2, 3]', 'x = 1\n', 'end\n\n', 'a, b = b, a', 'f(x) {\n  return x;\n}'];
  for (const m of models) {
    for (const text of [...PROMPTS, ...ends]) {
      const { ids, heal } = cut(m.tok, text);
      const healBytes = Buffer.byteLength(heal);
      const healed = cliHeal(m.dir, text);
      let bytes = 0;
      let k = 0;
      while (bytes < healBytes) bytes += m.tokens[healed[k++]].length;
      if (bytes !== healBytes) continue;
      aligned++;
      const rest = withContext(m.dir, (ctx) => greedyIncremental(ctx, [...ids, ...healed.slice(0, k)], GEN - k).ids);
      assert.deepEqual(healed.slice(k), rest, `${path.basename(m.dir)}: ${JSON.stringify(text)}`);
      const own = Array.from(m.tok.encode(heal, false));
      if (own.length === k && own.every((t, i) => t === healed[i])) {
        canonical++;
        const unhealed = withContext(m.dir, (ctx) => greedyIncremental(ctx, Array.from(m.tok.encode(text, false)), GEN - k).ids);
        assert.deepEqual(healed.slice(k), unhealed, `${path.basename(m.dir)}: ${JSON.stringify(text)} unhealed`);
      }
    }
  }
  t.diagnostic(`${aligned} aligned, ${canonical} with the text's own tokens`);
  assert.ok(aligned >= 3, `${aligned} prompts whose healed tokens end on the healed text's end`);
  assert.ok(canonical >= 1, `${canonical} prompts healed with the text's own tokens`);
});

test('speculative decoding under the constraint equals serial decoding, drafts all, partly or never accepted', () => {
  let drafted = 0; // prompts whose drafts include healed tokens after the first
  for (const m of models) {
    // A made-up word no token spells whole, so its healing takes several tokens.
    for (const text of [...PROMPTS.slice(0, 4), 'label = "xqzvwkxqzvwk']) {
      const serial = cliHeal(m.dir, text);
      const { ids, heal } = cut(m.tok, text);
      let bytes = 0;
      let k = 0;
      while (bytes < Buffer.byteLength(heal)) bytes += m.tokens[serial[k++]].length;
      if (k >= 2) drafted++;
      const tail = ids.slice(-3);
      // Perfect material makes every draft land, healed tokens included; every fourth
      // token wrong makes verification reject some of them.
      const perfect = [...tail, ...serial];
      const corrupted = [...tail, ...serial.map((t, i) => (i % 4 === 1 ? (t + 1) % (m.tokens.length - 1) : t))];
      for (const k of [2, 8]) {
        for (const material of [null, perfect, corrupted]) {
          const args = ['--spec', String(k), '--spec-always'];
          if (material) args.push('--context-ids', material.join(','));
          assert.deepEqual(cliHeal(m.dir, text, args), serial, `${path.basename(m.dir)} --spec ${k}: ${JSON.stringify(text)}`);
        }
      }
      assert.deepEqual(cliHeal(m.dir, text, ['--threads', '2']), serial, 'two threads');
    }
  }
  assert.ok(drafted >= 2, `${drafted} prompts healed over two tokens or more, so drafts are verified under the constraint`);
});

test('healing cut into one-token slices, or resumed from a checkpoint, gives the ids of one call', async () => {
  const dir = MINI;
  const tok = models[0].tok;
  const model = await Model.open(dir).promise;
  try {
    for (const text of PROMPTS) {
      const { ids, heal } = cut(tok, text);
      const bytes = Buffer.from(heal, 'utf8');
      const s = model.session({ maxContext: 1024 });
      await s.sync(ids);
      await s.checkpoint();
      const whole: number[] = [];
      await s.generate({ maxTokens: GEN, heal: { bytes, tokenizer: tok }, onTokens: (t) => whole.push(...t) });
      // As the server's runner does: one token per call, the rest of the bytes each time.
      await s.sync(ids); // resumes from the checkpoint (the live sequence is longer)
      const sliced: number[] = [];
      let left: Uint8Array = bytes;
      while (sliced.length < GEN) {
        if (sliced.length > 0) await s.sync([...ids, ...sliced]);
        await s.generate({ maxTokens: 1, heal: left.length ? { bytes: left, tokenizer: tok } : undefined, onTokens: (t) => sliced.push(...t) });
        if (left.length) left = left.subarray(Math.min(left.length, tok.tokenBytes(sliced[sliced.length - 1]).length));
      }
      assert.deepEqual(sliced, whole, JSON.stringify(text));
      s.close();
    }
  } finally {
    model.close();
  }
});

test('healing after a loaded saved state, which carries no logits, is refused naming why', async () => {
  const tok = models[0].tok;
  const model = await Model.open(MINI).promise;
  const file = path.join(os.tmpdir(), `k3-heal-${process.pid}.k3state`);
  try {
    const { ids, heal } = cut(tok, PROMPTS[1]);
    const a = model.session({ maxContext: 1024 });
    await a.sync(ids);
    await a.saveState(file);
    a.close();
    const b = model.session({ maxContext: 1024 });
    await b.loadState(file);
    await assert.rejects(
      b.generate({ maxTokens: 4, heal: { bytes: Buffer.from(heal), tokenizer: tok } }),
      (e: unknown) => e instanceof EngineError && e.code === 'invalid-argument' && /healing needs the logits of position \d+/.test(e.detail),
    );
    // Decoding the prompt's last token again gives the logits: then it heals.
    await b.sync(ids.slice(0, -1));
    await b.sync(ids);
    const got: number[] = [];
    await b.generate({ maxTokens: 4, heal: { bytes: Buffer.from(heal), tokenizer: tok }, onTokens: (t) => got.push(...t) });
    assert.equal(got.length, 4);
    b.close();
  } finally {
    fs.rmSync(file, { force: true });
    model.close();
  }
});
