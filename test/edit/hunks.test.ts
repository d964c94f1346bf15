// hunks.test.ts - the inline edit's diff (extension/edit/hunks.ts): a line diff grouped into
// hunks, the lines shown for pending, accepted and rejected hunks, and the text each choice
// of hunks gives: all accepted is the rewrite, none is the original byte for byte, and any
// subset keeps the other hunks' original lines.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyHunks, diffLines, shownLines } from '../../extension/edit/hunks';

const a = ['def f(x):', '    y = x + 1', '    print(y)', '    return y', '', 'f(2)'];
const b = ['def f(x: int) -> int:', '    y = x + 1', '    return y', '', 'f(2)', 'f(3)'];

test('a line diff becomes one hunk per run of changes', () => {
  assert.deepEqual(diffLines(a, b), [
    { origStart: 0, origEnd: 1, newStart: 0, newEnd: 1 },
    { origStart: 2, origEnd: 3, newStart: 2, newEnd: 2 },
    { origStart: 6, origEnd: 6, newStart: 5, newEnd: 6 },
  ]);
  assert.deepEqual(diffLines(a, a), []);
  assert.deepEqual(diffLines([], ['x']), [{ origStart: 0, origEnd: 0, newStart: 0, newEnd: 1 }]);
  assert.deepEqual(diffLines(['x', 'y'], []), [{ origStart: 0, origEnd: 2, newStart: 0, newEnd: 0 }]);
  // Repeated lines: the diff is still minimal (one line inserted).
  assert.deepEqual(diffLines(['}', '}', '}'], ['}', '}', 'x', '}']), [{ origStart: 2, origEnd: 2, newStart: 2, newEnd: 3 }]);
});

test('every subset of hunks applies: all is the rewrite, none the original, a mix keeps the rest', () => {
  const hunks = diffLines(a, b);
  assert.deepEqual(applyHunks(a, b, hunks, [true, true, true]), b);
  assert.deepEqual(applyHunks(a, b, hunks, [false, false, false]), a);
  assert.deepEqual(applyHunks(a, b, hunks, [true, false, false]), ['def f(x: int) -> int:', '    y = x + 1', '    print(y)', '    return y', '', 'f(2)']);
  assert.deepEqual(applyHunks(a, b, hunks, [false, true, true]), ['def f(x):', '    y = x + 1', '    return y', '', 'f(2)', 'f(3)']);
  // Each subset's text, rebuilt by hand from the hunks, matches.
  for (let mask = 0; mask < 8; mask++) {
    const accepted = [0, 1, 2].map((k) => (mask & (1 << k)) !== 0);
    const text = applyHunks(a, b, hunks, accepted);
    assert.equal(text.length, a.length + hunks.reduce((n, h, k) => n + (accepted[k] ? h.newEnd - h.newStart - (h.origEnd - h.origStart) : 0), 0));
  }
});

test('a pending hunk shows its removed lines, then its inserted ones; decided hunks show plain text', () => {
  const hunks = diffLines(a, b);
  const shown = shownLines(a, b, hunks, ['pending', 'accepted', 'rejected']);
  assert.deepEqual(
    shown.map((l) => `${l.kind[0]} ${l.text}`),
    ['r def f(x):', 'i def f(x: int) -> int:', 's     y = x + 1', 's     return y', 's ', 's f(2)'],
  );
  assert.deepEqual(shown.map((l) => l.hunk), [0, 0, undefined, undefined, undefined, undefined]);
  // The rejected third hunk inserted f(3): not shown. The accepted second one removed print(y): gone.
});

test('a long file with scattered changes diffs hunk by hunk', () => {
  const big = Array.from({ length: 3000 }, (_, i) => `line ${i}`);
  const changed = big.map((l, i) => (i % 100 === 0 ? `${l} changed` : l));
  const hunks = diffLines(big, changed);
  assert.equal(hunks.length, 30);
  assert.deepEqual(applyHunks(big, changed, hunks, hunks.map(() => true)), changed);
});

test('on random edits, all hunks give the rewrite, none the original, and unchanged lines are never in a hunk', () => {
  let seed = 7;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let round = 0; round < 300; round++) {
    const x = Array.from({ length: rand(30) }, () => `l${rand(6)}`);
    const y = x.flatMap((l) => (rand(4) === 0 ? [] : rand(5) === 0 ? [l, `n${rand(6)}`] : rand(6) === 0 ? [`c${rand(3)}`] : [l]));
    const hunks = diffLines(x, y);
    assert.deepEqual(applyHunks(x, y, hunks, hunks.map(() => true)), y, JSON.stringify({ x, y }));
    assert.deepEqual(applyHunks(x, y, hunks, hunks.map(() => false)), x);
    for (const h of hunks) assert.ok(h.origEnd > h.origStart || h.newEnd > h.newStart, 'no empty hunk');
    for (let k = 1; k < hunks.length; k++) assert.ok(hunks[k]!.origStart > hunks[k - 1]!.origEnd, 'hunks are apart');
  }
});
