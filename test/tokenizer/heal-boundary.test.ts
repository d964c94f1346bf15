// heal-boundary.test.ts - the back-off point of token healing (k3_tokenizer_last_piece) is
// a boundary typing cannot move: for every cursor position in real code (the 32 code cases
// of the real tokenizer and this project's own sources, line by line), the tokens of the
// line up to the back-off point are a prefix of the tokens of the whole line, whatever the
// developer goes on to type; and the point is never after the cursor.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { Tokenizer } from '../../server/engine/tokenizer';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = path.join(repoRoot, 'test/data/kimi-tokenizer');

function lines(): string[] {
  const { cases } = JSON.parse(fs.readFileSync(path.join(dir, 'k3-tokenizer-code-cases.json'), 'utf8')) as { cases: Array<{ text: string }> };
  const sources = ['server/completion/layout.ts', 'server/chat/render.ts', 'training/corpus.py', 'native/src/heal.c'].map((f) =>
    fs.readFileSync(path.join(repoRoot, f), 'utf8'),
  );
  return [...cases.map((c) => c.text), ...sources].flatMap((t) => t.split('\n')).filter((l) => l.trim() !== '');
}

test('for every cursor in real code, the tokens before the back-off point begin the tokens of the finished line', () => {
  const tok = Tokenizer.open(dir);
  let checked = 0;
  let moved = 0;
  try {
    for (const line of lines()) {
      const full = Array.from(tok.encode(line, false));
      for (let i = 1; i <= line.length; i++) {
        if (line.charCodeAt(i - 1) >= 0xd800 && line.charCodeAt(i - 1) <= 0xdbff) continue; // inside a surrogate pair
        const b = tok.lastPiece(line.slice(0, i));
        assert.ok(b >= 0 && b <= i, `back-off ${b} for a cursor at ${i}`);
        const before = Array.from(tok.encode(line.slice(0, b), false));
        assert.deepEqual(full.slice(0, before.length), before, `${JSON.stringify(line.slice(0, i))} backs off to ${b} in ${JSON.stringify(line)}`);
        if (b < i) moved++;
        checked++;
      }
    }
  } finally {
    tok.close();
  }
  assert.ok(checked > 5000, `${checked} cursor positions`);
  assert.ok(moved > checked / 2, `${moved} of ${checked} cursors back off`);
});
