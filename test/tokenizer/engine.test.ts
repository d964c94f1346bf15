// engine.test.ts - the tokenizer facade (server/engine/tokenizer.ts over the addon): the
// 32 code cases made by the real tokenizer, special tokens allowed and not, raw bytes that
// are not UTF-8, streaming decode, and the errors it throws.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { SPECIAL_TOKENS, Tokenizer } from '../../server/engine/tokenizer';
import { addonFile, repoRoot } from '../support/paths';
import { generatedTexts, hasLoneSurrogate, rng } from './corpus';

process.env.K3_ADDON ??= addonFile;
const dir = path.join(repoRoot, 'test/data/kimi-tokenizer');
const tok = Tokenizer.open(dir);

interface CodeCase {
  name: string;
  text: string;
  ids: number[];
}

test('the 32 code cases encode to the ids the real tokenizer gave, and decode back', () => {
  const { cases } = JSON.parse(fs.readFileSync(path.join(dir, 'k3-tokenizer-code-cases.json'), 'utf8')) as {
    cases: CodeCase[];
  };
  assert.equal(cases.length, 32);
  for (const c of cases) {
    assert.deepEqual([...tok.encode(c.text)], c.ids, c.name);
    assert.equal(tok.decode(c.ids), c.text, c.name);
  }
});

test('the vocabulary is 163,584 ranks and 256 special slots; turns end at [EOS] or <|end_of_msg|>', () => {
  assert.equal(tok.vocabSize, 163_840);
  assert.equal(tok.specialId(SPECIAL_TOKENS.bos), 163_584);
  assert.equal(tok.specialId(SPECIAL_TOKENS.open), 163_587);
  assert.equal(tok.specialId('<|reserved_token_163700|>'), 163_700);
  assert.equal(tok.specialId('<|im_start|>'), undefined);
  assert.deepEqual(tok.stopIds(), [163_585, 163_586]);
  assert.equal(Buffer.from(tok.tokenBytes(163_586)).toString(), '<|end_of_msg|>');
  assert.deepEqual([...tok.encode('The capital of France is')], [1008, 10484, 318, 15383, 387]);
});

test('special-token names are ids only when allowed', () => {
  const text = 'x<|open|>y[EOS]';
  assert.deepEqual([...tok.encode(text, true)].filter((id) => id >= 163_584), [163_587, 163_585]);
  assert.deepEqual([...tok.encode(text, false)].filter((id) => id >= 163_584), []);
  assert.equal(tok.decode(tok.encode(text, false)), text);
  // The default is the release's: allowed.
  assert.deepEqual([...tok.encode('<|sep|>')], [163_589]);
});

test('any bytes round-trip through encode and decodeBytes, UTF-8 or not', () => {
  const r = rng(7);
  for (let i = 0; i < 2_000; i++) {
    const bytes = Uint8Array.from({ length: Math.floor(r() * 64) }, () => Math.floor(r() * 256));
    const ids = tok.encode(bytes, i % 2 === 0);
    assert.ok(ids.length <= bytes.length);
    assert.deepEqual(tok.decodeBytes(ids), bytes);
  }
  // A string with a lone surrogate is encoded as U+FFFD, as JavaScript's UTF-8 encoders do.
  assert.deepEqual(tok.encode('a\ud800b'), tok.encode('a\ufffdb'));
});

test('the stream gives the text back in pieces that never split a character', () => {
  const stream = tok.stream();
  for (const text of generatedTexts(500, 11)) {
    if (hasLoneSurrogate(text)) continue;
    let out = '';
    for (const id of tok.encode(text, false)) {
      const piece = stream.push(id);
      assert.ok(!piece.includes('\ufffd') || text.includes('\ufffd'), JSON.stringify(piece));
      out += piece;
    }
    out += stream.end();
    assert.equal(out, text);
  }
  const emoji = tok.encode('😀', false);
  assert.ok(emoji.length > 1, 'the emoji should be split into byte tokens for this test');
  assert.equal(stream.push(emoji[0]!), '');
  assert.equal(stream.end(), '\ufffd'); // an unfinished character ends as U+FFFD
});

test('errors carry the engine status as code and name the file or id', () => {
  assert.throws(() => Tokenizer.open('/nonexistent-k3-dir'), { code: 'io', message: /nonexistent-k3-dir\/tiktoken\.model/ });
  assert.throws(() => tok.decode([1, 163_840]), { code: 'token', message: /ids\[1\] = 163840/ });
  assert.throws(() => tok.tokenBytes(-1), { code: 'token' });
  assert.throws(() => tok.decode([1.5]), TypeError);
  const bad = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-tok-'));
  try {
    const lines = fs.readFileSync(path.join(dir, 'tiktoken.model'), 'utf8').split('\n').slice(0, 300);
    lines[299] = 'not*base64 299';
    fs.writeFileSync(path.join(bad, 'tiktoken.model'), lines.join('\n') + '\n');
    fs.copyFileSync(path.join(dir, 'tokenizer_config.json'), path.join(bad, 'tokenizer_config.json'));
    assert.throws(() => Tokenizer.open(bad), { code: 'tokenizer', message: /tiktoken\.model:300: .*not base64/ });
  } finally {
    fs.rmSync(bad, { recursive: true, force: true });
  }
  const closed = Tokenizer.open(dir);
  closed.close();
  assert.throws(() => closed.encode('x'), { code: 'invalid-argument' });
});
