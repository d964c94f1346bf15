// agreement.test.ts - the engine's tokenizer (through the addon and the server's facade)
// gives exactly js-tiktoken's ids, configured as the release is (reference.ts), on tens of
// thousands of texts: generated ones in many scripts, random code points, and every
// source file of two real trees (TypeScript's lib/ and the vscode-languageserver
// packages). And decoding gives every valid text back.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { Tokenizer } from '../../server/engine/tokenizer';
import { addonFile, repoRoot } from '../support/paths';
import { generatedTexts, hasLoneSurrogate, randomCodePointTexts, rng, sourceFiles } from './corpus';
import { loadReference, releaseCuts } from './reference';

process.env.K3_ADDON ??= addonFile;
const dir = path.join(repoRoot, 'test/data/kimi-tokenizer');
const tok = Tokenizer.open(dir);
const ref = loadReference(dir, fs.readFileSync(path.join(dir, 'pat_str.txt'), 'utf8'));

function sameIds(a: Int32Array, b: readonly number[]): boolean {
  return a.length === b.length && b.every((x, i) => a[i] === x);
}

/** Compares engine and reference on texts, with special tokens allowed for the texts
 * allowSpecial(i) picks; returns labels of the texts that differ. */
function mismatches(texts: readonly string[], allowSpecial: (i: number) => boolean, label: (i: number) => string): string[] {
  const bad: string[] = [];
  texts.forEach((text, i) => {
    if (!sameIds(tok.encode(text, allowSpecial(i)), ref.encode(text, allowSpecial(i)))) bad.push(label(i));
  });
  return bad;
}

const always = () => true;
const alternate = (i: number) => i % 2 === 0;

/** Every text whose decode(encode(x)) is not x (for a lone surrogate: not x with U+FFFD). */
function roundTripFailures(texts: readonly string[]): number[] {
  const bad: number[] = [];
  texts.forEach((text, i) => {
    const want = hasLoneSurrogate(text) ? text.replace(/[\ud800-\udfff]/gu, '\ufffd') : text;
    if (tok.decode(tok.encode(text, true)) !== want || tok.decode(tok.encode(text, false)) !== want) bad.push(i);
  });
  return bad;
}

const generated = generatedTexts(10_000);
const longRuns = generatedTexts(40, 9, 3_000);
const codePoints = randomCodePointTexts(3_000);

test('engine and js-tiktoken agree on 10,000 generated texts, half with specials allowed', (t) => {
  const bad = mismatches(generated, alternate, (i) => `generated[${i}] ${JSON.stringify(generated[i]!.slice(0, 80))}`);
  t.diagnostic(`${generated.length} texts, ${bad.length} mismatches`);
  assert.deepEqual(bad.slice(0, 10), []);
  assert.deepEqual(roundTripFailures(generated), []);
});

test('engine and js-tiktoken agree on texts with whitespace runs of up to 3,000 characters', (t) => {
  const bad = mismatches(longRuns, alternate, (i) => `longRuns[${i}]`);
  t.diagnostic(`${longRuns.length} texts, ${bad.length} mismatches`);
  assert.deepEqual(bad, []);
  assert.deepEqual(roundTripFailures(longRuns), []);
});

test('engine and js-tiktoken agree on 3,000 texts of random code points', (t) => {
  const bad = mismatches(codePoints, always, (i) => `codePoints[${i}] ${JSON.stringify(codePoints[i])}`);
  t.diagnostic(`${codePoints.length} texts, ${bad.length} mismatches`);
  assert.deepEqual(bad.slice(0, 10), []);
  assert.deepEqual(roundTripFailures(codePoints), []);
});

test('the engine cuts long inputs where the release does', () => {
  // Runs over 25,000 characters and inputs over 400,000: too long for js-tiktoken's
  // quadratic merge, so the engine's ids are checked against its own ids for each of the
  // release's cuts (reference.ts), which tiktoken encodes independently.
  const texts = [
    ' '.repeat(60_000),
    'x'.repeat(30_000) + '\n'.repeat(26_000) + 'end',
    'x.'.repeat(20_000) + ' <|open|> ' + '中'.repeat(25_001),
    'é'.repeat(25_000) + ' ' + 'é'.repeat(25_001),
    'ab cd '.repeat(75_000),
  ];
  for (const text of texts) {
    const cuts = releaseCuts(text);
    assert.ok(cuts.length > 1);
    const want = cuts.flatMap((c) => [...tok.encode(c)]);
    assert.ok(sameIds(tok.encode(text), want), `cut of ${text.length} characters`);
    assert.equal(tok.decode(tok.encode(text)), text);
  }
});

test('engine and js-tiktoken agree on every file of two real source trees, whole and in windows', (t) => {
  const files = [
    ...sourceFiles(path.join(repoRoot, 'node_modules/typescript/lib')),
    ...['vscode-languageserver', 'vscode-languageserver-protocol', 'vscode-languageserver-types', 'vscode-languageserver-textdocument']
      .flatMap((p) => sourceFiles(path.join(repoRoot, 'node_modules', p))),
  ];
  const texts = files.map((f) => fs.readFileSync(f, 'utf8'));
  const bad = mismatches(texts, () => false, (i) => path.relative(repoRoot, files[i]!));
  // Windows at arbitrary UTF-16 offsets: the cut can leave half of a surrogate pair.
  const r = rng(3);
  const windows = Array.from({ length: 2_000 }, () => {
    const text = texts[Math.floor(r() * texts.length)]!;
    const at = Math.floor(r() * text.length);
    return text.slice(at, at + 1 + Math.floor(r() * 600));
  });
  bad.push(...mismatches(windows, alternate, (i) => `window[${i}]`));
  const bytes = texts.reduce((n, s) => n + Buffer.byteLength(s), 0);
  t.diagnostic(`${files.length} files (${(bytes / 1e6).toFixed(1)} MB) and ${windows.length} windows, ${bad.length} mismatches`);
  assert.ok(files.length > 200, `only ${files.length} files found`);
  assert.deepEqual(bad.slice(0, 10), []);
  assert.deepEqual(roundTripFailures([...texts, ...windows]), []);
});
