// remote-budget.test.ts - the bound on what a remote reply may hold (server/remote/budget.ts):
// max_tokens plus a quarter (at least 16) pieces, 256 bytes of text each; a piece past either
// bound is cut and says why, a cut never splits a character, and nothing is kept after it.
// The streams that need it are in test/serve/remote-hostile.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReplyBudget } from '../../server/remote/budget';

test('the budget is max_tokens plus a quarter, at least 16 pieces, and 256 bytes a piece', () => {
  assert.deepEqual([new ReplyBudget(8).maxPieces, new ReplyBudget(8).maxBytes], [24, 24 * 256]);
  assert.deepEqual([new ReplyBudget(400).maxPieces, new ReplyBudget(400).maxBytes], [500, 500 * 256]);
});

test('pieces past the budget are refused and say why; nothing is kept after', () => {
  const b = new ReplyBudget(8);
  for (let i = 0; i < 24; i++) assert.deepEqual(b.take('tok', ''), ['tok', '']);
  assert.equal(b.exceeded, undefined);
  assert.deepEqual(b.take('tok', 'more'), ['', '']);
  assert.equal(b.exceeded, 'the server sent more than 24 pieces for max_tokens 8');
  assert.deepEqual(b.take('x'), ['']);
});

test('the piece that crosses the byte bound is cut on a character, and the rest refused', () => {
  const b = new ReplyBudget(1); // 17 pieces, 4352 bytes
  assert.deepEqual(b.take('a'.repeat(4350)), ['a'.repeat(4350)]);
  // Two bytes of room left: the 3-byte character that would cross the bound goes whole.
  assert.deepEqual(b.take('b', '\u65e5\u672c'), ['b', '']);
  assert.match(b.exceeded ?? '', /more than 4352 bytes of text for max_tokens 1/);
  assert.equal(b.bytes, 4352);
  assert.deepEqual(b.take('c'), ['']);
});
