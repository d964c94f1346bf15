// input-shapes.test.ts - LSP messages of the wrong shape, against the bundled server on the
// tiny fixture: a didOpen whose text is not a string is refused (logged) instead of breaking
// every later completion with a misleading "engine failed"; an out-of-range position is
// refused with InvalidParams naming it (a character past the line's end means the end, as
// LSP says) instead of being echoed back; a change that cannot be applied forgets the
// document; null params get InvalidParams, never an internal error, whether the client
// library wraps them (`[null]`, by position) or the wire carries `"params": null` itself.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
let server: ServerHandle;

before(
  async () => {
    // The fixture's random weights write junk; the filter would hide it, and these tests
    // look at what is shown.
    server = await startServer({ modelPath: dir, settings: { engine: { threads: 1 }, completions: { maxTokens: 8, filter: false, heal: false } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await server.shutdown();
});

function complete(uri: string, line: number, character: number): Promise<{ items: Array<{ insertText: string; range: unknown }> }> {
  return server.connection.sendRequest('textDocument/inlineCompletion', { textDocument: { uri }, position: { line, character }, context: { triggerKind: 1 } });
}

async function failure(p: Promise<unknown>): Promise<ResponseError<unknown>> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ResponseError, String(e));
    return e;
  }
  assert.fail('the request succeeded');
}

test('a didOpen whose text is not a string is refused, and completions in other documents still work', { timeout: TEST_TIMEOUT_MS }, async () => {
  await server.connection.sendNotification('textDocument/didOpen', { textDocument: { uri: 'file:///w/bad.py', languageId: 'python', version: 1, text: 42 } });
  await server.waitFor(server.logs, (l) => /textDocument\/didOpen refused/.test(l));
  await server.open('file:///w/good.py', 'python', 'def add(a, b):\n    return ');
  const good = await complete('file:///w/good.py', 1, 11);
  assert.equal(good.items.length, 1, 'a completion, not "engine failed"');
  assert.deepEqual(await complete('file:///w/bad.py', 0, 0), { items: [] }, 'the refused document is not open');
});

test('an out-of-range position is refused naming it; a character past the end of its line means the end', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/range.py';
  await server.open(uri, 'python', 'x = 1\n');
  for (const [line, character] of [
    [9999, 0],
    [-1, -5],
    [0, -1],
  ]) {
    const e = await failure(complete(uri, line, character));
    assert.equal(e.code, ErrorCodes.InvalidParams);
    assert.match(e.message, new RegExp(`position ${line}:${character} is outside file:///w/range.py, which has 2 lines`));
  }
  const past = await complete(uri, 0, 77);
  assert.deepEqual(past.items[0]?.range, { start: { line: 0, character: 5 }, end: { line: 0, character: 5 } });
});

test('a change that cannot be applied forgets the document instead of guessing its text', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/change.py';
  await server.open(uri, 'python', 'y = 2\n');
  await server.connection.sendNotification('textDocument/didChange', {
    textDocument: { uri, version: 2 },
    contentChanges: [{ range: { start: { line: 'a' }, end: null }, text: 5 }],
  });
  await server.waitFor(server.logs, (l) => l.includes(`textDocument/didChange for ${uri} refused (contentChanges[0].text is not a string)`));
  assert.deepEqual(await complete(uri, 0, 5), { items: [] });
});

test('null params get InvalidParams or an answer, never an internal error, and null notifications are refused', { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const method of ['textDocument/inlineCompletion', 'k3/chat/send', 'k3/chat/stop', 'k3/conversation/get', 'k3/presets/set', 'k3/remote/setApiKey']) {
    const e = await failure(server.connection.sendRequest(method, null));
    assert.equal(e.code, ErrorCodes.InvalidParams, `${method}: ${e.code} ${e.message}`);
  }
  for (const method of ['k3/status', 'k3/presets/list', 'k3/conversation/list']) await server.connection.sendRequest(method, null);
  for (const method of ['textDocument/didOpen', 'textDocument/didChange', 'textDocument/didClose']) {
    const from = server.logs.length;
    await server.connection.sendNotification(method, null);
    // The protocol library refuses null params itself (by name, not by position); a handler
    // that saw them would refuse them too.
    await server.waitFor(server.logs, (l) => server.logs.indexOf(l) >= from && l.includes(method) && /refused|received parameters by position/.test(l));
  }
});

test('"params": null on the wire gets InvalidParams from every method, inline completion included', { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const method of ['textDocument/inlineCompletion', 'k3/chat/send', 'k3/chat/stop', 'k3/conversation/get', 'k3/presets/set', 'k3/remote/setApiKey']) {
    const r = await server.rawRequest(method, `raw-null-${method}`, null);
    assert.equal(r.error?.code, ErrorCodes.InvalidParams, `${method}: ${JSON.stringify(r.error)}`);
  }
});
