// cli.test.ts - `k3 tokenize` and `k3 detokenize`: ids as a JSON array on the last line,
// specials recognised unless --no-special, text back byte for byte, exit 1 with the
// engine's detail for a broken tokenizer and exit 2 for a bad command line.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { k3Cli, repoRoot } from '../support/paths';

const dir = path.join(repoRoot, 'test/data/kimi-tokenizer');
const k3 = (...args: string[]) => spawnSync(k3Cli, args, { encoding: 'utf8' });
const lastLine = (s: string) => s.trimEnd().split('\n').at(-1) ?? '';

test('k3 tokenize prints the ids as a JSON array on its last line, specials recognised by default', () => {
  const r = k3('tokenize', '--tok', dir, '--prompt', 'The capital of France is<|end_of_msg|>');
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(lastLine(r.stdout)), [1008, 10484, 318, 15383, 387, 163586]);
  const plain = k3('tokenize', '--tok', dir, '--prompt', '<|end_of_msg|>', '--no-special');
  assert.equal(plain.status, 0, plain.stderr);
  assert.ok((JSON.parse(lastLine(plain.stdout)) as number[]).every((id) => id < 163584));
});

test('k3 tokenize reads a prompt file, and k3 detokenize gives its bytes back', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-cli-tok-'));
  try {
    const text = 'def f(x):\r\n\treturn "中文 😀" + x\n';
    const file = path.join(tmp, 'prompt.py');
    fs.writeFileSync(file, text);
    const r = k3('tokenize', '--tok', dir, '--prompt-file', file);
    assert.equal(r.status, 0, r.stderr);
    const ids = lastLine(r.stdout);
    const back = spawnSync(k3Cli, ['detokenize', '--tok', dir, '--ids', ids]);
    assert.equal(back.status, 0, back.stderr.toString());
    assert.equal(back.stdout.toString('utf8'), text);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('k3 detokenize refuses an id outside the vocabulary with exit 1 and the detail', () => {
  const r = k3('detokenize', '--tok', dir, '--ids', '1,163840');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /token: ids\[1\] = 163840 is outside the vocabulary/);
  const missing = k3('tokenize', '--tok', '/nonexistent-k3-dir', '--prompt', 'x');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /io: \/nonexistent-k3-dir\/tiktoken\.model/);
});

test('k3 tokenize and detokenize refuse bad command lines with exit 2 and the usage', () => {
  for (const args of [['tokenize', '--tok', dir], ['tokenize', '--prompt', 'x'], ['detokenize', '--tok', dir, '--ids', '1,x']]) {
    const r = k3(...args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /k3 tokenize --tok DIR/);
  }
});
