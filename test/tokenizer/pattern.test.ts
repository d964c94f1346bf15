// pattern.test.ts - the JavaScript translation of the checkpoint's split pattern
// (pattern.ts) means what the Rust original means, and the reference's long-input cuts
// (reference.ts releaseCuts) are the release's.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/paths';
import { generatedTexts, randomCodePointTexts } from './corpus';
import { caseVariants, patternRegExp, translatePattern } from './pattern';
import { releaseCuts } from './reference';

const pat = fs.readFileSync(path.join(repoRoot, 'test/data/kimi-tokenizer/pat_str.txt'), 'utf8');
const split = (re: RegExp, text: string) => [...text.matchAll(re)].map((m) => m[0]);
const v = patternRegExp(pat, 'v');
const u = patternRegExp(pat, 'u');

test('the K3 pattern translates to this JavaScript source (v flag)', () => {
  const letters = '[[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]&&[^\\p{Script=Han}]]';
  const lower = '[[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]&&[^\\p{Script=Han}]]';
  const contraction = "(?:'[Ss\u017f]|'[Tt]|'[Rr][Ee]|'[Vv][Ee]|'[Mm]|'[Ll][Ll]|'[Dd])?";
  const lead = '[^\\r\\n\\p{L}\\p{N}]?';
  assert.equal(
    translatePattern(pat, 'v'),
    [
      '[\\p{Script=Han}]+',
      `${lead}${letters}*${lower}+${contraction}`,
      `${lead}${letters}+${lower}*${contraction}`,
      '\\p{N}{1,3}',
      ' ?[^\\p{White_Space}\\p{L}\\p{N}]+[\\r\\n]*',
      '\\p{White_Space}*[\\r\\n]+',
      '\\p{White_Space}+(?!\\P{White_Space})',
      '\\p{White_Space}+',
    ].join('|'),
  );
});

test('the v-flag and u-flag translations split every text the same way', () => {
  for (const text of [...generatedTexts(2_000, 5), ...randomCodePointTexts(1_000, 6)]) {
    assert.deepEqual(split(u, text), split(v, text), JSON.stringify(text));
  }
});

test('the translation keeps the semantics JavaScript would otherwise change', () => {
  // \s is Unicode White_Space: U+0085 is space, U+FEFF is not (JavaScript's \s is the reverse).
  assert.deepEqual(split(v, 'a\u0085\u0085b'), ['a', '\u0085', '\u0085b']);
  assert.deepEqual(split(v, 'a\ufeffb'), ['a', '\ufeffb']);
  // Han is not a letter for the word alternatives; 〇 (Nl, Han) goes with Han.
  assert.deepEqual(split(v, 'ab中文cd〇1'), ['ab', '中文', 'cd', '〇', '1']);
  // (?i:...) is case-insensitive with Unicode folding: 'ſ is 's.
  assert.deepEqual(split(v, "dog's DOG'S dog'\u017f dog'x"), ["dog's", " DOG'S", " dog'\u017f", ' dog', "'x"]);
  assert.deepEqual(caseVariants('s'), ['S', 's', '\u017f']);
  assert.deepEqual(caseVariants('k'), ['K', 'k', '\u212a']);
  // The lookahead trap: a run of spaces before a word leaves its last space to the word.
  assert.deepEqual(split(v, 'a   b   '), ['a', '  ', ' b', '   ']);
  assert.deepEqual(split(v, 'x  \n\n  y'), ['x', '  \n\n', ' ', ' y']);
  assert.deepEqual(split(v, '12345'), ['123', '45']);
});

test('the translation refuses constructs it does not know instead of guessing', () => {
  assert.throws(() => translatePattern('\\w+', 'v'), /unsupported escape/);
  assert.throws(() => translatePattern('(?x)a', 'v'), /unsupported group/);
  assert.throws(() => translatePattern('[a&&b]', 'v'), /intersection with something other than a class/);
  assert.throws(() => translatePattern('(?i:a+)', 'v'), /unsupported character/);
});

test('the release cuts runs of more than the limit of spaces or non-spaces, counting code points', () => {
  assert.deepEqual(releaseCuts('aaaa  bb', 3), ['aaa', 'a  bb']);
  assert.deepEqual(releaseCuts('ab     c', 3), ['ab   ', '  c']);
  assert.deepEqual(releaseCuts('😀😀😀😀', 3), ['😀😀😀', '😀']);
  // Python's isspace counts U+001C..U+001F as spaces.
  assert.deepEqual(releaseCuts('\x1c\x1d\x1e\x1fa', 3), ['\x1c\x1d\x1e', '\x1fa']);
  // Chunks of maxChars first; each chunk's runs count from zero.
  assert.deepEqual(releaseCuts('abcdefg', 100, 3), ['abc', 'def', 'g']);
  assert.deepEqual(releaseCuts('', 3), []);
});
