// definitions.test.ts - the definitions near the cursor that the extension sends before a
// completion (extension/definitions.ts), with an editor played by functions: the identifiers
// looked up, what is sent (other documents only, a few lines each, at most a few), once per
// document version and line, nothing when the request is cancelled or the language has no
// language server, and the policy waiting for it before it asks the server.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ContextDefinitionsParams } from '../../protocol/lsp';
import { CompletionPolicy } from '../../extension/completions';
import { LinkedCancellation } from '../../extension/debounce';
import { DEFINITION_LINES, DefinitionGatherer, type DefinitionSource, identifiersNear, MAX_DEFINITIONS, waitAtMost } from '../../extension/definitions';
import { readSettings } from '../../extension/settings';

const lines = ['from shapes import area_of, Circle', '', 'c = Circle(radius)', 'total = area_of(c) + perim'];
const doc = (version = 1) => ({ uri: 'file:///w/main.py', version, lineAt: (l: number) => lines[l] });
const shapes = Array.from({ length: 40 }, (_, i) => `line_${i} = ${i}`);
shapes[10] = 'def area_of(shape):';
shapes[20] = 'class Circle:';

/** An editor whose language server knows `area_of` and `Circle` in shapes.py and `radius` in
 * main.py itself; records the lookups. */
function editor(known = true) {
  const asked: string[] = [];
  const source: DefinitionSource = {
    async locate(_uri, at) {
      const word = /[A-Za-z_$][A-Za-z0-9_$]*/.exec(lines[at.line].slice(at.character - 1))?.[0] ?? '';
      asked.push(word);
      if (!known) return [];
      if (word === 'area_of') return [{ uri: 'file:///w/shapes.py', line: 10 }];
      if (word === 'Circle') return [{ uri: 'file:///w/shapes.py', line: 20 }];
      if (word === 'radius') return [{ uri: 'file:///w/main.py', line: 0 }];
      return [];
    },
    async read(uri) {
      return uri === 'file:///w/shapes.py' ? { languageId: 'python', lines: shapes } : undefined;
    },
  };
  return { asked, source };
}

test('the identifiers looked up are those of the line above and of the cursor line before the word being typed, nearest first', () => {
  const spots = identifiersNear(doc(), { line: 3, character: lines[3].length });
  const words = spots.map((s) => /[A-Za-z_$][A-Za-z0-9_$]*/.exec(lines[s.line].slice(s.character - 1))?.[0]);
  assert.deepEqual(words, ['area_of', 'total', 'radius', 'Circle'], '`perim` is being typed; `c` is too short');
});

test('definitions in other documents are sent, a few lines each; one in the same document is not', async () => {
  const { source } = editor();
  const sent: ContextDefinitionsParams[] = [];
  const g = new DefinitionGatherer(source, (p) => sent.push(p));
  await g.gather(doc(), { line: 3, character: lines[3].length }, () => false);
  assert.equal(sent.length, 1);
  assert.deepEqual(
    sent[0].definitions.map((d) => [d.uri, d.line, d.text.split('\n').length]),
    [['file:///w/shapes.py', 10, DEFINITION_LINES], ['file:///w/shapes.py', 20, DEFINITION_LINES]],
  );
  assert.ok(sent[0].definitions[0].text.startsWith('def area_of(shape):'));
  assert.ok(sent[0].definitions.length <= MAX_DEFINITIONS);
  assert.equal(sent[0].uri, 'file:///w/main.py');
});

test('once per document version and line; unchanged definitions are not sent again', async () => {
  const { asked, source } = editor();
  const sent: ContextDefinitionsParams[] = [];
  const g = new DefinitionGatherer(source, (p) => sent.push(p));
  await g.gather(doc(1), { line: 3, character: lines[3].length }, () => false);
  const lookups = asked.length;
  await g.gather(doc(1), { line: 3, character: 10 }, () => false);
  assert.equal(asked.length, lookups, 'the same version and line asks nothing');
  await g.gather(doc(2), { line: 3, character: lines[3].length }, () => false);
  assert.ok(asked.length > lookups, 'a new version asks again');
  assert.equal(sent.length, 1, 'the same definitions are not sent twice');
});

test('a cancelled request sends nothing, and a language without a language server sends nothing', async () => {
  const sent: ContextDefinitionsParams[] = [];
  await new DefinitionGatherer(editor().source, (p) => sent.push(p)).gather(doc(), { line: 3, character: 20 }, () => true);
  await new DefinitionGatherer(editor(false).source, (p) => sent.push(p)).gather(doc(), { line: 3, character: 20 }, () => false);
  assert.deepEqual(sent, []);
});

test('the policy gathers the context before it asks the server, and a request cancelled meanwhile never reaches it', async () => {
  const config = { get: () => undefined, inspect: () => undefined };
  const settings = readSettings(config as never, true).completions;
  const order: string[] = [];
  let cancel: (() => void) | undefined;
  const policy = new CompletionPolicy({
    settings: () => ({ ...settings, debounceMs: 0, warmup: false }), // no accept command on the items
    thinking: () => undefined,
    now: () => 0,
    context: async () => {
      order.push('context');
      cancel?.();
    },
  });
  const vdoc = { uri: { toString: () => 'file:///w/main.py' }, version: 2, languageId: 'python' };
  policy.documentChanged({ document: vdoc, contentChanges: [{ range: { start: { line: 3, character: 5 } }, text: 'x' }], reason: undefined } as never);
  const next = async () => {
    order.push('request');
    return [{ insertText: 'y' }];
  };
  const ask = (token: LinkedCancellation) => policy.provide(vdoc as never, { line: 3, character: 6 } as never, { triggerKind: 1 } as never, token.token as never, next as never);
  assert.deepEqual(await ask(new LinkedCancellation()), [{ insertText: 'y' }]);
  assert.deepEqual(order, ['context', 'request']);
  const source = new LinkedCancellation();
  cancel = () => source.cancel();
  assert.equal(await ask(source), null);
  assert.deepEqual(order, ['context', 'request', 'context'], 'cancelled while gathering: no request');
});

test('the request waits for the gathering at most a while: a provider that never answers does not hold it', async () => {
  let finished = false;
  await waitAtMost(new Promise<void>(() => undefined), 1);
  await waitAtMost(Promise.resolve().then(() => { finished = true; }), 60_000);
  assert.ok(finished, 'a gathering that ends is waited for');
  await waitAtMost(Promise.reject(new Error('provider failed')), 60_000);
});
