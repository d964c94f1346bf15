// completion-filters.test.ts - the junk filter and the closer-aware replace ranges of
// docs/PROMPTS.md on real cases: the raw answers below are what k3-mini wrote through the
// language server on held-out code and on this project's sources (npm run bench --
// quality, before the filter existed), and the closers are what VS Code's auto-closing
// leaves after the cursor.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type FilterContext, filterJunk, loopStart, maxLineLength } from '../../server/completion/filters';
import { mergeClosers, openAtEnd } from '../../server/completion/range';

const ctx = (over: Partial<FilterContext> = {}): FilterContext => ({
  linePrefix: '    ',
  lineAbove: '',
  maxLineLength: 120,
  asciiFile: true,
  ...over,
});

test('line-loop: a unit repeating in the line is cut where the loop starts, or dropped when nothing is before it', () => {
  // k3-mini after `    ` in a Python file of the standard library.
  const cut = filterJunk(['_check_all_all = _get_and_all_all(Tr, _MASK, _MASK, _MASK, _MASK, _MASK, _MASK, _MASK, _MASK'], ctx());
  assert.deepEqual(cut.lines, ['_check_all_all = _get_and_all_all(Tr']);
  assert.equal(cut.note?.rule, 'line-loop');
  assert.equal(cut.note?.action, 'cut');
  // After `(` in this project's server/completion/range.ts.
  const afterParen = filterJunk(['V, _a, _a, _a, _a, _a, _a, _a, _a, _a, _b, _b'], ctx({ linePrefix: 'foo(' }));
  assert.deepEqual(afterParen.lines, ['V']);
  // A doc comment that loses its way: "of the end of the end of ...".
  const prose = filterJunk([' * @param {number} endIndex The number of the end of the end of the end of the end of the end of'], ctx());
  assert.equal(prose.note?.rule, 'line-loop');
  assert.deepEqual(prose.lines, [' * @param {number} endIndex The number']);
  const zeros = filterJunk(['0, 0, 0, 0, 0, 0, 0, 0, 0'], ctx({ linePrefix: 'x = [' }));
  assert.deepEqual(zeros.lines, []);
  assert.equal(zeros.note?.action, 'dropped');
});

test('line-loop: a number whose fraction repeats one digit is cut where the repeat starts', () => {
  const cut = filterJunk(['0.5777777777'], ctx({ linePrefix: 'ratio = ' }));
  assert.deepEqual(cut.lines, ['0.5']);
  assert.equal(cut.note?.rule, 'line-loop');
  assert.equal(cut.note?.action, 'cut');
  assert.equal(loopStart('  return x * 1.0999999999;'), '  return x * 1.0'.length);
  // Trailing zeros and short repeats are numbers a developer writes.
  for (const line of ['x = 1.000000000', 'y = 0.333', 'z = 1111111111', 'v = "1.2.3"']) assert.equal(loopStart(line), -1, line);
});

test('line-loop leaves rules, literals and short repeats alone', () => {
  for (const line of ['// ----------------------------------------', "x = 0x00000000", 'a, b, c = 1, 2, 3', "assert.deepEqual([1, 1], [1, 1]);", '    ']) {
    assert.equal(loopStart(line), -1, line);
  }
});

test('long-line: a line longer than the file allows is dropped, or cut before it in a multi-line answer', () => {
  const line = 'EventListener(event: string, ...args: string, options?: PropertyBagOptions): Promise<HttpHeaders | null> | undefined | Array<string>';
  const r = filterJunk([line], ctx({ linePrefix: 'server.connection.onDid', maxLineLength: maxLineLength(['a'.repeat(80), 'b'.repeat(100)]) }));
  assert.equal(r.note?.rule, 'long-line');
  assert.equal(r.note?.action, 'dropped');
  assert.match(r.note?.detail ?? '', /would be 155 characters, over the 120 this file allows/);
  const multi = filterJunk(['x = 1', line], ctx({ linePrefix: '', maxLineLength: 120 }));
  assert.deepEqual(multi.lines, ['x = 1']);
  // A file with long lines of its own allows them.
  assert.equal(filterJunk([line], ctx({ linePrefix: 'server.connection.onDid', maxLineLength: maxLineLength(['c'.repeat(180)]) })).note, undefined);
});

test('repeated-lines: three identical lines in a row keep only the first', () => {
  const r = filterJunk(['', '    self.assertEqual(a, b)', '    self.assertEqual(a, b)', '    self.assertEqual(a, b)', '    return'], ctx({ linePrefix: '' }));
  assert.deepEqual(r.lines, ['', '    self.assertEqual(a, b)']);
  assert.equal(r.note?.rule, 'repeated-lines');
});

test('repeated-lines: a block of two lines three times in a row keeps up to its first end; closing braces in turn are not a loop', () => {
  // k3-mini continuing "Write a TypeScript function that reverses a string" in the chat panel.
  const doc = [
    '    /// of the error.',
    '    ///',
    '    /// If the error is called with the error, the error is called.',
    '    ///',
    '    /// If the error is called with the error, the error is called.',
    '    ///',
    '    /// If the error is called with the error, the error is called.',
    '    ///',
    '    /// If the error is called with',
  ];
  const r = filterJunk(doc, ctx({ linePrefix: '' }));
  // The block found first is `///` then the sentence (lines 2-3), so the cut ends with the sentence.
  assert.deepEqual(r.lines, doc.slice(0, 3));
  assert.equal(r.note?.rule, 'repeated-lines');
  assert.match(r.note?.detail ?? '', /lines 2-3 repeat 3 times/);
  const braces = ['      }', '    }', '', '  }', '}', '', '}', '}', ''];
  assert.equal(filterJunk(braces, ctx({ linePrefix: '' })).note, undefined);
});

test('repeats-line-above: a completed line equal to the line above is dropped, short ones are not', () => {
  const r = filterJunk(['onst util_1 = require("./utils");'], ctx({ linePrefix: 'c', lineAbove: 'const util_1 = require("./utils");' }));
  assert.equal(r.note?.rule, 'repeats-line-above');
  assert.deepEqual(r.lines, []);
  assert.equal(filterJunk(['}'], ctx({ linePrefix: '    ', lineAbove: '    }' })).note, undefined);
});

test('non-code: invalid UTF-8, control characters, or mostly non-ASCII text in an ASCII file', () => {
  assert.equal(filterJunk(['x = "\ufffd\ufffd"'], ctx()).note?.rule, 'non-code');
  assert.equal(filterJunk(['x = \u0007'], ctx()).note?.rule, 'non-code');
  // What the random-weight fixture writes, and Unicode-table text.
  const table = '宣布了Kapuloan红绿灯{Locode穿梭在斜视公司';
  assert.equal(filterJunk([table], ctx()).note?.rule, 'non-code');
  // In a file that is itself written in another script, it is text like the file's.
  assert.equal(filterJunk([table], ctx({ asciiFile: false })).note, undefined);
  // A few accented letters in a string are fine.
  assert.equal(filterJunk(['name = "Zoë Müller"'], ctx()).note, undefined);
});

test('the filter is off when asked (measurements, raw output of a random model)', () => {
  assert.equal(filterJunk(['0, 0, 0, 0, 0, 0, 0, 0'], ctx({ filter: false })).note, undefined);
});

test('closers after the cursor that the completion writes again are replaced, never doubled or lost', () => {
  // VS Code auto-closed `(` in `items.findIndex((item) => |)`; the model writes `0);`.
  const a = mergeClosers('0);', 'const i = items.findIndex((item) => ', ')');
  assert.deepEqual(a, { insertText: '0);', coversSuffix: true, merged: 1 });
  // `foo(|);` and the model stops at `)`: the `;` stays.
  assert.deepEqual(mergeClosers('1)', 'foo(', ');'), { insertText: '1);', coversSuffix: true, merged: 1 });
  // A string and its call, both auto-closed.
  assert.deepEqual(mergeClosers('lo")', 'print("hel', '")'), { insertText: 'lo")', coversSuffix: true, merged: 2 });
  assert.deepEqual(mergeClosers('1, 2]', 'xs = [', ']'), { insertText: '1, 2]', coversSuffix: true, merged: 1 });
  // A closer of the completion's own bracket is not the user's.
  assert.deepEqual(mergeClosers('bar(1)', 'foo(', ')'), { insertText: 'bar(1)', coversSuffix: false, merged: 0 });
  assert.deepEqual(mergeClosers('bar(1))', 'foo(', ')'), { insertText: 'bar(1))', coversSuffix: true, merged: 1 });
  // Text after the cursor that is not only closers: insert at the cursor.
  assert.equal(mergeClosers('a, b)', 'foo(', 'x)').coversSuffix, false);
  // Escapes inside strings do not close them.
  assert.deepEqual(mergeClosers('a\\"b")', 'f("', '")'), { insertText: 'a\\"b")', coversSuffix: true, merged: 2 });
  // Whatever is replaced, the user's characters stay in order.
  for (const [c, p, s] of [['0);', 'f((x) => ', ')'], ['x]', 'a[b[', ']]'], ["'", "s = f('", "')"]]) {
    const m = mergeClosers(c, p, s);
    let k = 0;
    for (const ch of m.insertText) if (ch === s[k]) k++;
    assert.equal(k, m.coversSuffix ? s.length : 0, `${c} over ${s}`);
  }
});

test('openAtEnd tracks brackets and an open string, honouring escapes', () => {
  assert.deepEqual(openAtEnd('items.findIndex((item) => '), ['(']);
  assert.deepEqual(openAtEnd('print("a\\"b'), ['(', '"']);
  assert.deepEqual(openAtEnd('x = {a: [1, 2], b: ('), ['{', '(']);
});
