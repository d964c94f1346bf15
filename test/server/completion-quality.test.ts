// completion-quality.test.ts - what a developer sees from the embedded k3-mini through the
// language server, with token healing and the junk filter on (the defaults): after a
// line's indentation the answer does not start with another space; inside a word it goes
// on with the word and never repeats what was typed; a `)` that VS Code auto-closed is
// replaced rather than doubled when the answer writes it again; a loop the model falls into
// is not shown. Properties, not strings: they hold for any weights worth shipping.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { loopStart } from '../../server/completion/filters';
import { type StatusResult, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { repoRoot } from '../support/paths';

const MINI = path.join(repoRoot, 'media/models/k3-mini');
let server: ServerHandle;

before(
  async () => {
    server = await startServer({ modelPath: MINI, settings: { engine: { threads: 1 } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => server.shutdown());

let docs = 0;
async function completeAt(text: string, languageId: string, line: number, character: number) {
  const uri = `file:///w/q${docs++}.${languageId === 'python' ? 'py' : 'ts'}`;
  await server.open(uri, languageId, text);
  const list = await server.complete(uri, line, character);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  return { item: list?.items[0], stats: s.lastCompletion };
}

const PY = 'import os\n\n\ndef list_files(root):\n    result = []\n    for name in os.listdir(root):\n        ';
const TS = 'export class Stack<T> {\n  private items: T[] = [];\n\n  push(item: T): void {\n    ';

test('after the indentation the answer starts with code, not another space', { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const [text, lang] of [[PY, 'python'], [TS, 'typescript']]) {
    const lines = text.split('\n');
    const { item, stats } = await completeAt(text, lang, lines.length - 1, lines[lines.length - 1].length);
    assert.ok(item, `an answer for ${lang}`);
    const shown = String(item.insertText);
    assert.match(shown, /^\S/, `${lang}: ${JSON.stringify(shown)}`);
    assert.equal(stats?.healedText, lines[lines.length - 1], 'the indentation was healed');
  }
});

test('inside a word the answer goes on with the word, without repeating what was typed', { timeout: TEST_TIMEOUT_MS }, async () => {
  const text = `${TS}this.ite`;
  const lines = text.split('\n');
  const { item, stats } = await completeAt(text, 'typescript', lines.length - 1, lines[lines.length - 1].length);
  assert.equal(stats?.healedText, '.ite');
  const shown = String(item?.insertText ?? '');
  assert.ok(shown !== '' && !shown.startsWith('.ite') && !/^\s/.test(shown), JSON.stringify(shown));
});

test('an auto-closed `)` the answer writes again is replaced, not doubled', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const line = '    const i = this.items.findIndex((item) => ';
  const text = `${TS.slice(0, TS.lastIndexOf('\n'))}\n${line})\n  }\n}\n`;
  const at = TS.split('\n').length - 1;
  const { item } = await completeAt(text, 'typescript', at, line.length);
  assert.ok(item, 'an answer');
  const shown = String(item.insertText);
  const covers = item.range !== undefined && item.range.end.character > item.range.start.character;
  // What the line becomes when the item is accepted: never two `)` where the answer wrote one.
  const accepted = line + shown + (covers ? '' : ')');
  t.diagnostic(`answer ${JSON.stringify(shown)}, covering the ")": ${covers}`);
  let depth = 0;
  for (const ch of accepted) depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
  assert.ok(depth >= 0, `accepting ${JSON.stringify(shown)} (covers the ")": ${covers}) gives ${JSON.stringify(accepted)}`);
  assert.ok(accepted.includes(')', line.length), 'the user\'s ")" is kept');
});

test('a loop the model falls into is never shown', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  // A prompt that draws k3-mini into repeating itself: a long run of the same argument.
  const text = 'values = f(_MASK, _MASK, _MASK, _MASK, _MASK, _MASK, _MASK,\n    _MASK, _MASK, ';
  const { item, stats } = await completeAt(text, 'python', 1, '    _MASK, _MASK, '.length);
  const shown = String(item?.insertText ?? '');
  t.diagnostic(`answer ${JSON.stringify(shown)}, filter: ${JSON.stringify(stats?.filtered)}`);
  // k3-mini v1 loops here and the filter drops it; weights that do not loop show a line.
  if (stats?.filtered) assert.equal(stats.filtered.rule, 'line-loop');
  assert.equal(loopStart('    _MASK, _MASK, ' + shown), -1, JSON.stringify(shown));
});
