// completion-multiline.test.ts - ghost text of several lines from the embedded k3-mini
// through the language server, with the settings the extension sends by default
// (`multiline: auto`): at the end of `def circumference(r):` there is a suggestion (issue
// 34's reproduction: a line break and the body, which the client used to drop); a method's
// body stays inside the method and a function's after `{` ends at its `}` (and between `{`
// and an auto-closed `}` goes on lines of its own), and generation stops there, not at the
// token limit; `never` gives the next line only; a suggestion
// accepted a line at a time is served from the cache. Properties, not strings: they hold
// for any weights worth shipping.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { type StatusResult, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { repoRoot } from '../support/paths';

const MINI = path.join(repoRoot, 'media/models/k3-mini');
const MAX_TOKENS = 128;
let server: ServerHandle;

before(
  async () => {
    server = await startServer({ modelPath: MINI, settings: { engine: { threads: 1 }, completions: { multiline: 'auto', maxLines: 8, maxTokens: MAX_TOKENS } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => server.shutdown());

const CIRCLE = 'import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\ndef circumference(r):';
const LIST = 'import os\n\n\ndef list_files(root):\n    result = []\n    for name in os.listdir(root):';
const ADD = 'export function add(a: number, b: number): number {';

let docs = 0;
/** Completes at the end of `text` in a new document. */
async function completeAtEnd(text: string, languageId = 'python') {
  const uri = `file:///w/m${docs++}.${languageId === 'python' ? 'py' : 'ts'}`;
  await server.open(uri, languageId, text);
  const lines = text.split('\n');
  const list = await server.complete(uri, lines.length - 1, lines[lines.length - 1].length);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  return { uri, text: list?.items.length ? String(list.items[0].insertText) : undefined, stats: s.lastCompletion };
}

const indentOf = (l: string) => /^[ \t]*/.exec(l)![0].length;

test('at the end of `def circumference(r):` there is a suggestion: a line break and the body', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const { text } = await completeAtEnd(CIRCLE);
  t.diagnostic(`answer ${JSON.stringify(text)}`);
  assert.ok(text !== undefined, 'a suggestion');
  assert.match(text, /^\n[ \t]+\S/);
});

test("a block's suggestion stays inside it and generation stops where it ends", { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const { text, stats } = await completeAtEnd(LIST);
  t.diagnostic(`answer ${JSON.stringify(text)}; ${stats?.generatedTokens} tokens`);
  assert.ok(text !== undefined && text.startsWith('\n'));
  const body = text.split('\n').slice(1);
  assert.ok(body.length >= 2 && body.length <= 8, `${body.length} lines: several, at most maxLines`);
  for (const l of body) if (l.trim() !== '') assert.ok(indentOf(l) > 4, `inside the loop: ${JSON.stringify(l)}`);
  assert.equal(stats?.filtered, undefined, 'nothing for the junk filter: the block rule ended it');
  assert.ok((stats?.generatedTokens ?? MAX_TOKENS) < MAX_TOKENS, `stopped at the block end, before the ${MAX_TOKENS}-token limit`);
});

test('after `{` the suggestion ends at the matching `}`, and generation with it', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const { text, stats } = await completeAtEnd(ADD, 'typescript');
  t.diagnostic(`answer ${JSON.stringify(text)}; ${stats?.generatedTokens} tokens`);
  assert.ok(text !== undefined);
  const lines = text.split('\n');
  assert.equal(lines[lines.length - 1], '}', 'the last line closes the function at its indentation');
  for (const l of lines.slice(1, -1)) if (l.trim() !== '') assert.ok(indentOf(l) > 0, `inside the function: ${JSON.stringify(l)}`);
  assert.ok((stats?.generatedTokens ?? MAX_TOKENS) < MAX_TOKENS);
});

test('between `{` and the `}` VS Code closed it with, the body goes on its own lines and the `}` below it', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const line = 'export function isEmpty(s: string): boolean {';
  const uri = `file:///w/m${docs++}.ts`;
  await server.open(uri, 'typescript', `${line}}\n`);
  const list = await server.complete(uri, 0, line.length);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  const item = list?.items[0];
  t.diagnostic(`answer ${JSON.stringify(item)}; ${s.lastCompletion?.generatedTokens} tokens`);
  assert.ok(item);
  const text = String(item.insertText);
  assert.match(text, /^\n[ \t]+\S[^]*\n$/, 'a line break, the indented body, a line break before the `}`');
  assert.ok(!text.includes('}'), 'the model\'s own `}` is not added to the one in the document');
  assert.deepEqual(item.range?.start, item.range?.end, 'inserted at the cursor: the `}` stays');
  assert.ok((s.lastCompletion?.generatedTokens ?? MAX_TOKENS) < MAX_TOKENS);
});

test('with multiline `never` the end of `def f():` gets the next line only', { timeout: TEST_TIMEOUT_MS }, async () => {
  await server.connection.sendNotification('workspace/didChangeConfiguration', { settings: { k3: { completions: { multiline: 'never' } } } });
  try {
    const { text } = await completeAtEnd(LIST);
    assert.ok(text !== undefined);
    assert.match(text, /^\n[ \t]+\S[^\n]*$/, `one line after the line break: ${JSON.stringify(text)}`);
  } finally {
    await server.connection.sendNotification('workspace/didChangeConfiguration', { settings: { k3: { completions: { multiline: 'auto' } } } });
  }
});

test('a suggestion accepted a line at a time: the rest comes from the cache, with no engine work', { timeout: TEST_TIMEOUT_MS }, async () => {
  const first = await completeAtEnd(LIST);
  assert.ok(first.text !== undefined);
  const lines = LIST.split('\n');
  const [, line1, ...more] = first.text.split('\n');
  assert.ok(more.length >= 1, 'a suggestion of two lines or more');
  // Ctrl+Down takes the line break (the empty rest of the cursor's line), then line by line.
  await server.type(first.uri, 2, lines.length - 1, lines[lines.length - 1].length, '\n');
  const second = await server.complete(first.uri, lines.length, 0);
  let s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  assert.equal(s.lastCompletion?.source, 'cache', 'served from the cache');
  assert.equal(String(second?.items[0]?.insertText), [line1, ...more].join('\n'));
  await server.type(first.uri, 3, lines.length, 0, `${line1}\n`);
  const third = await server.complete(first.uri, lines.length + 1, 0);
  s = await server.connection.sendRequest(StatusRequest.type);
  assert.equal(s.lastCompletion?.source, 'cache');
  assert.equal(String(third?.items[0]?.insertText), more.join('\n'), 'the rest of the suggestion, unchanged');
});
