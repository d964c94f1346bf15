// range.test.ts - which lines K3: Edit rewrites with nothing selected (extension/edit/range.ts):
// the innermost function-like document symbol around the cursor, else the indentation block.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { enclosingSymbol, indentationBlock } from '../../extension/edit/range';

test('the innermost function-like symbol holds the cursor; variables do not count', () => {
  const symbols = [
    {
      start: 0,
      end: 20,
      kind: 'Class',
      children: [
        { start: 2, end: 8, kind: 'Method', children: [{ start: 3, end: 3, kind: 'Variable', children: [] }] },
        { start: 10, end: 18, kind: 'Method', children: [] },
      ],
    },
  ];
  assert.deepEqual(enclosingSymbol(symbols, 3), { start: 2, end: 8 });
  assert.deepEqual(enclosingSymbol(symbols, 9), { start: 0, end: 20 });
  assert.equal(enclosingSymbol(symbols, 25), undefined);
});

test('without symbols the indentation block decides: the block a line opens, or the one it sits in', () => {
  const py = ['import os', '', 'def f(x):', '    y = x', '', '    if y:', '        return y', '    return 0', '', 'print(f(1))'];
  assert.deepEqual(indentationBlock(py, 2), { start: 2, end: 7 }, 'a def line opens its body');
  assert.deepEqual(indentationBlock(py, 3), { start: 2, end: 7 }, 'a body line sits in the def');
  assert.deepEqual(indentationBlock(py, 6), { start: 5, end: 6 }, 'the innermost block');
  assert.deepEqual(indentationBlock(py, 4), { start: 2, end: 7 }, 'a blank line inside counts as the line above it');
  assert.deepEqual(indentationBlock(py, 9), { start: 9, end: 9 }, 'a top-level line alone');
  const js = ['function g() {', '  return 1;', '}', 'g();'];
  assert.deepEqual(indentationBlock(js, 1), { start: 0, end: 2 }, 'the closing brace belongs to the block');
});
