// fuzzy.test.ts - the `@file` popup's matching (extension/fuzzy.ts): a query matches a path
// whose characters it takes in order, case-insensitively; the file name, word starts and
// runs rank first, shorter paths before longer ones.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fuzzyRank, fuzzyScore } from '../../extension/fuzzy';

test('a query matches when its characters appear in order, and ranks the file name and word starts first', () => {
  const paths = ['server/chat/service.ts', 'server/chat/render.ts', 'docs/SERVICE.md', 'test/server/chat.test.ts', 'README.md'];
  assert.equal(fuzzyScore('xyz', 'server/chat/service.ts'), undefined);
  assert.equal(fuzzyScore('', 'a'), 0);
  assert.deepEqual(fuzzyRank('srvc', paths, (p) => p).slice(0, 2), ['docs/SERVICE.md', 'server/chat/service.ts']);
  assert.deepEqual(fuzzyRank('render', paths, (p) => p), ['server/chat/render.ts']);
  assert.equal(fuzzyRank('chat', paths, (p) => p)[0], 'test/server/chat.test.ts', 'the name itself before a folder of that name');
  assert.equal(fuzzyRank('READ', paths, (p) => p)[0], 'README.md', 'case does not matter');
});
