// completion-rules.test.ts - the completion pieces that need no engine, as docs/PROMPTS.md
// specifies them: the prompt layout (stable parts first, each encoded alone, a prefix
// window that moves in steps), post-processing (single line, multi-line, suffix and next
// line, indentation kept) and the type-through cache (within a line and across lines).
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { CompletionCache } from '../../server/completion/cache';
import { ContextRing } from '../../server/completion/context';
import { header, layoutPrompt, WINDOW_STEP } from '../../server/completion/layout';
import { postprocess, type PostprocessInput } from '../../server/completion/postprocess';
import { Tokenizer } from '../../server/engine/tokenizer';
import { DEFAULT_SETTINGS, mergeSettings } from '../../server/settings';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const tok = Tokenizer.open(path.join(repoRoot, 'test/data/kimi-tokenizer'));
const enc = (s: string): number[] => Array.from(tok.encode(s, false));

const pp = (raw: string, over: Partial<PostprocessInput> = {}) =>
  postprocess(raw, { linePrefix: 'x = ', lineSuffix: '', nextLines: [], languageId: 'python', multiline: 'never', maxLines: 8, lineAbove: '', maxLineLength: 1000, asciiFile: true, ...over });

test('the prompt is extra context, then the file above the cursor line, then the line: each encoded on its own', () => {
  const text = 'import os\n\ndef f():\n    return 1\nresult = f(\nprint(result)\n';
  const offset = text.indexOf('f(\n') + 2;
  const chunks = [{ key: 'file:///w/util.py#0', path: 'util.py', languageId: 'python', text: 'def g():\n    pass' }];
  const l = layoutPrompt(tok, { path: 'main.py', languageId: 'python', text, offset, chunks, maxPromptTokens: 2048, maxContextTokens: 512 });
  const context = enc('# util.py\ndef g():\n    pass\n\n');
  const file = enc('# main.py\nimport os\n\ndef f():\n    return 1\n');
  const line = enc('result = f(');
  assert.deepEqual(l.ids, [...context, ...file, ...line]);
  assert.equal(l.contextEnd, context.length);
  assert.equal(l.stableEnd, context.length + file.length);
  assert.equal(l.linePrefix, 'result = f(');
  assert.equal(l.lineSuffix, '');
  assert.deepEqual(l.nextLines, ['print(result)', '']);
  assert.deepEqual(l.draftIds.slice(0, enc('\nprint(result)\n').length), enc('\nprint(result)\n'));
});

test('typing on the cursor line leaves the tokens before it unchanged', () => {
  const base = 'a = 1\nb = 2\n';
  const input = { path: 'x.ts', languageId: 'typescript', chunks: [], maxPromptTokens: 2048, maxContextTokens: 512 };
  const before = layoutPrompt(tok, { ...input, text: `${base}retur`, offset: base.length + 5 });
  const after = layoutPrompt(tok, { ...input, text: `${base}return`, offset: base.length + 6 });
  assert.equal(before.stableEnd, after.stableEnd);
  assert.deepEqual(before.ids.slice(0, before.stableEnd), after.ids.slice(0, after.stableEnd));
  assert.equal(header('x.ts', 'typescript'), '// x.ts\n');
});

test('a long file keeps the lines nearest the cursor, from a window start on a multiple of the step', () => {
  const lines = Array.from({ length: 400 }, (_, i) => `const value${i} = ${i} * ${i};`);
  const text = `${lines.join('\n')}\n`;
  const l = layoutPrompt(tok, { path: 'big.ts', languageId: 'typescript', text, offset: text.length, chunks: [], maxPromptTokens: 1024, maxContextTokens: 0 });
  assert.ok(l.ids.length <= 1024, `${l.ids.length} tokens`);
  const firstLine = l.fileText.split('\n')[1];
  const start = lines.indexOf(firstLine);
  assert.ok(start > 0 && start % WINDOW_STEP === 0, `window starts at line ${start}`);
  assert.ok(l.fileText.endsWith(`${lines[399]}\n`));
  // One more line typed at the end moves the window only if it must, and then by whole steps.
  const l2 = layoutPrompt(tok, { path: 'big.ts', languageId: 'typescript', text: `${text}x`, offset: text.length + 1, chunks: [], maxPromptTokens: 1024, maxContextTokens: 0 });
  assert.deepEqual(l2.ids.slice(0, l2.stableEnd), l.ids.slice(0, l.stableEnd));
});

test('extra context stops at its token budget, oldest chunks first', () => {
  const chunk = (i: number) => ({ key: `k${i}`, path: `f${i}.ts`, languageId: 'typescript', text: `export const c${i} = ${i};` });
  const one = enc('// f0.ts\nexport const c0 = 0;\n\n').length;
  const l = layoutPrompt(tok, { path: 'x.ts', languageId: 'typescript', text: '', offset: 0, chunks: [chunk(0), chunk(1), chunk(2)], maxPromptTokens: 2048, maxContextTokens: 2 * one + 1 });
  assert.deepEqual(l.chunkKeys, ['k0', 'k1']);
});

test('single line: the rest of the cursor line, trailing space dropped, final at the line break', () => {
  assert.deepEqual(pp('foo(bar)'), { text: 'foo(bar)', final: false });
  assert.deepEqual(pp('foo(bar)  \nnext'), { text: 'foo(bar)', final: true });
  // The model ends the line at once and nothing follows the cursor: the next line instead.
  assert.deepEqual(pp('\n    return x\n'), { text: '\n    return x', final: true });
  assert.deepEqual(pp('   \n'), { text: '', final: false });
});

test('text after the cursor keeps the completion to one line and is not repeated', () => {
  assert.deepEqual(pp('a, b)\n', { lineSuffix: ')' }), { text: 'a, b', final: true });
  assert.deepEqual(pp('a, b\nmore', { lineSuffix: ')', multiline: 'always' }), { text: 'a, b', final: true });
});

test('multi-line: up to maxLines, indentation as generated, stopping before a copy of the next line', () => {
  const input = { multiline: 'always' as const, linePrefix: 'def f():', nextLines: ['', 'def g():', '    pass'] };
  assert.deepEqual(pp('\n    x = 1\n    return x\ndef g():\n', input), { text: '\n    x = 1\n    return x', final: true });
  // maxLines counts the lines the user sees: not the empty rest of the cursor's line.
  assert.deepEqual(pp('\n  a\n    b\n      c\n        d\n', { ...input, maxLines: 3 }), { text: '\n  a\n    b\n      c', final: true });
  // A partial line that may still become the next line waits.
  assert.deepEqual(pp('\n    x = 1\n    ret', { ...input, nextLines: ['    return x'] }), { text: '\n    x = 1', final: false });
});

test('a completion that only retypes the line below is dropped', () => {
  assert.deepEqual(pp('print(x)\n', { linePrefix: '', nextLines: ['print(x)'] }), { text: '', final: true });
});

test('the cache serves the rest of a completion whose start the user has typed since', () => {
  const cache = new CompletionCache(2);
  cache.put('base', 'x = ', 'compute(1)');
  assert.equal(cache.get('base', 'x = '), 'compute(1)');
  assert.equal(cache.get('base', 'x = comp'), 'ute(1)');
  assert.equal(cache.get('base', 'x = compare'), undefined, 'typed text that leaves the completion');
  assert.equal(cache.get('base', 'x = compute(1)'), undefined, 'nothing left to offer');
  assert.equal(cache.get('other', 'x = '), undefined, 'another prompt');
  cache.put('b2', '', 'two');
  cache.put('b3', '', 'three');
  assert.equal(cache.size, 2);
  assert.equal(cache.get('b2', ''), 'two');
  assert.equal(cache.get('base', 'x = '), undefined, 'least recently used went first');
});

test('the cache serves the rest of a suggestion of several lines accepted a line at a time', () => {
  const cache = new CompletionCache();
  const before = '# f.py\nimport math\ndef f(r):';
  cache.put('base', before, '\n    a = math.pi * r\n    return a');
  // Ctrl+Down took the line break, then the first line: the cursor is on the next line.
  assert.equal(cache.get('base', `${before}\n`), '    a = math.pi * r\n    return a');
  assert.equal(cache.get('base', `${before}\n    a = math.pi * r\n`), '    return a');
  assert.equal(cache.get('base', `${before}\n    a = 2\n`), undefined, 'a line that is not the suggestion');
  assert.equal(cache.get('base', `# g.py\nimport math\ndef f(r):\n`), undefined, 'other text before the suggestion');
});

test('extra context changes only at a quiet moment, never between two keystrokes in one document', () => {
  const docs = new Map([
    ['file:///w/a.ts', { uri: 'file:///w/a.ts', languageId: 'typescript', getText: () => 'export const a = 1;' }],
    ['file:///w/b.ts', { uri: 'file:///w/b.ts', languageId: 'typescript', getText: () => 'export const b = 2;' }],
    ['file:///w/c.ts', { uri: 'file:///w/c.ts', languageId: 'typescript', getText: () => 'export const c = 3;' }],
  ]);
  const ring = new ContextRing((u) => docs.get(u), () => ['/w']);
  ring.opened('file:///w/a.ts');
  ring.opened('file:///w/b.ts');
  const first = ring.snapshot('file:///w/a.ts', 1000);
  assert.deepEqual(first.map((c) => c.path), ['b.ts']);
  ring.opened('file:///w/c.ts');
  assert.deepEqual(ring.snapshot('file:///w/a.ts', 1100).map((c) => c.path), ['b.ts'], 'typing on: unchanged');
  assert.deepEqual(ring.snapshot('file:///w/a.ts', 5000).map((c) => c.path), ['b.ts', 'c.ts'], 'after a pause: c.ts joins at the end');
});

test('the server reads completions.multiline as a mode; the boolean of earlier clients as always (true) or auto (false)', () => {
  const mode = (v: unknown) => mergeSettings(DEFAULT_SETTINGS, { completions: { multiline: v } }).completions.multiline;
  assert.equal(DEFAULT_SETTINGS.completions.multiline, 'auto');
  assert.equal(mode('never'), 'never');
  assert.equal(mode('always'), 'always');
  assert.equal(mode(true), 'always');
  assert.equal(mode(false), 'auto');
  assert.equal(mode('sometimes'), 'auto', 'anything else keeps the default');
});
