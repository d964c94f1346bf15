// prompt.test.ts - the user message of an inline edit (server/edit/prompt.ts): the
// instruction, the path and language, the selection in a fence its own backticks cannot
// close, and the surrounding code cut at line boundaries to the stated budget.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONTEXT_LINES_BEFORE, editMessage, fenceFor, headLines, tailLines } from '../../server/edit/prompt';

test('the message names the file, language and instruction, and fences each part', () => {
  const m = editMessage({
    editId: 'e',
    languageId: 'python',
    path: 'src/fib.py',
    before: 'import os\n',
    selection: 'def f(x):\n    return x',
    after: '\nprint(f(1))\n',
    instruction: '  add type hints ',
  });
  assert.equal(
    m,
    [
      'Rewrite the selected code of the file src/fib.py (python) as the instruction says.',
      'Reply with the rewritten selection only, in one fenced code block: the whole selection, changed where the instruction asks, ' +
        'with the indentation of the surrounding code. Do not repeat the code before or after it. ' +
        'If the instruction cannot be done as code, say why in a sentence and write no code block.',
      '',
      'Instruction: add type hints',
      '',
      'Code before the selection:',
      '```python\nimport os\n```',
      '',
      'The selection:',
      '```python\ndef f(x):\n    return x\n```',
      '',
      'Code after the selection:',
      '```python\n\nprint(f(1))\n```',
    ].join('\n'),
  );
});

test('a selection with backticks gets a longer fence; context is cut at whole lines', () => {
  assert.equal(fenceFor('a ``` b'), '````');
  assert.equal(fenceFor('plain'), '```');
  const many = Array.from({ length: 200 }, (_, i) => `l${i}\n`).join('');
  const kept = tailLines(many, CONTEXT_LINES_BEFORE, 100_000);
  assert.equal(kept.split('\n').length - 1, CONTEXT_LINES_BEFORE);
  assert.ok(kept.startsWith(`l${200 - CONTEXT_LINES_BEFORE}\n`));
  assert.equal(tailLines(many, 1000, 12), 'l198\nl199\n', 'the character budget cuts at a line start');
  assert.equal(headLines(many, 2, 100), 'l0\nl1\n');
  assert.equal(headLines(many, 1000, 7), 'l0\nl1\n', 'the character budget cuts at a line end');
});
