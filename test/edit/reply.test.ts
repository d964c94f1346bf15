// reply.test.ts - an edit reply read as code or as a message (server/edit/reply.ts): the
// first code block's body, with or without a language or a path after the fence, with text
// around it; a streamed reply gives only finished lines and never a half-written closing
// fence; a reply without a block, or cut off inside one, is a message and never code.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEditReply, partialEditCode } from '../../server/edit/reply';

test('the first fenced block is the rewrite, whatever its info string and the prose around it', () => {
  assert.deepEqual(parseEditReply('```python\ndef f(x: int) -> int:\n    return x\n```', false), {
    kind: 'code',
    code: 'def f(x: int) -> int:\n    return x',
    language: 'python',
  });
  assert.deepEqual(parseEditReply('Here it is:\n\n```\na = 1\n```\nThat adds nothing else.\n```js\nb\n```\n', false), {
    kind: 'code',
    code: 'a = 1',
    language: '',
  });
  assert.deepEqual(parseEditReply('~~~~ts src/a.ts\nconst s = "```";\n~~~~\n', false), {
    kind: 'code',
    code: 'const s = "```";',
    language: 'ts',
  });
  // A longer fence holds a shorter one; blank lines and CRLF inside are kept as lines.
  assert.deepEqual(parseEditReply('````md\n```\nx\n```\n\n````', false), { kind: 'code', code: '```\nx\n```\n', language: 'md' });
  assert.deepEqual(parseEditReply('```\r\nx\r\n\r\ny\r\n```\r\n', false), { kind: 'code', code: 'x\n\ny', language: '' });
  // An empty block deletes the selection: it is code, shown as a diff to accept or reject.
  assert.deepEqual(parseEditReply('```py\n```', false), { kind: 'code', code: '', language: 'py' });
});

test('a reply without a code block is a message, never code', () => {
  assert.deepEqual(parseEditReply('I cannot add types to a shell script.', false), { kind: 'message', text: 'I cannot add types to a shell script.' });
  assert.deepEqual(parseEditReply('def f(x):\n    return x\n', false), { kind: 'message', text: 'def f(x):\n    return x' });
  assert.deepEqual(parseEditReply('  ', false), { kind: 'message', text: 'The model replied with nothing.' });
  assert.deepEqual(parseEditReply('', true), { kind: 'message', text: 'The reply was stopped before it said anything.' });
  // Inline backticks are not a fence.
  assert.equal(parseEditReply('Use ``` to fence code.', false).kind, 'message');
});

test('a reply cut off inside its block is a message; one the model ended without closing the fence is code', () => {
  assert.deepEqual(parseEditReply('```py\nline one\nline tw', true), {
    kind: 'message',
    text: 'The reply was cut off inside its code block (2 lines arrived), so nothing was applied.',
  });
  assert.deepEqual(parseEditReply('```py\nline one\nline two', false), { kind: 'code', code: 'line one\nline two', language: 'py' });
  // Cut after the fence closed: the block is whole.
  assert.deepEqual(parseEditReply('```\nx\n```\nAnd then I wo', true), { kind: 'code', code: 'x', language: '' });
});

test('while streaming, only finished lines show and a half-written fence is held back', () => {
  const reply = 'Sure.\n```python\ndef f():\n    return 1\n```\n';
  const seen: (string | undefined)[] = [];
  for (let i = 0; i <= reply.length; i++) seen.push(partialEditCode(reply.slice(0, i)));
  // Nothing before the fence line is finished.
  assert.equal(seen[reply.indexOf('```python') + 9], undefined);
  assert.equal(seen[reply.indexOf('def')], '');
  assert.equal(seen[reply.indexOf('    return')], 'def f():');
  // The closing fence arriving a backtick at a time never shows as code.
  for (let i = reply.lastIndexOf('```'); i <= reply.length; i++) assert.equal(seen[i], 'def f():\n    return 1', `at ${i}`);
  // Every snapshot is a prefix of the final code: the editor only grows.
  const final = 'def f():\n    return 1';
  for (const s of seen) if (s !== undefined) assert.ok(final.startsWith(s), JSON.stringify(s));
});
