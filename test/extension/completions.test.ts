// completions.test.ts - what the ghost-text policy (extension/completions.ts) passes on from
// the server with the settings users have: the server shapes the text (single line, the
// next line, or a block: server/completion/postprocess.ts), so a suggestion that starts with
// a line break, as at the end of `def f():`, reaches the editor whole, and the policy shows
// nothing only when the server offers nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompletionPolicy } from '../../extension/completions';
import { LinkedCancellation } from '../../extension/debounce';
import { readSettings } from '../../extension/settings';

/** The settings a user who changed nothing has (package.json's defaults, read as the extension reads them). */
function defaultSettings() {
  const config = { get: () => undefined, inspect: () => undefined };
  return readSettings(config as never, true).completions;
}

function policyAnswering(items: Array<{ insertText: string }>, warmup = true) {
  const policy = new CompletionPolicy({ settings: () => ({ ...defaultSettings(), debounceMs: 0, warmup }), thinking: () => undefined, now: () => 0 });
  const doc = { uri: { toString: () => 'file:///w/circle.py' }, version: 2, languageId: 'python' };
  // The user typed the `:` that ends `def circumference(r):` on line 3.
  policy.documentChanged({ document: doc, contentChanges: [{ range: { start: { line: 3, character: 20 } }, text: ':' }], reason: undefined } as never);
  const next = async () => items.map((i) => ({ ...i }));
  const ask = () => policy.provide(doc as never, { line: 3, character: 21 } as never, { triggerKind: 1 } as never, new LinkedCancellation().token as never, next as never);
  return ask;
}

/** What an accept runs with k3.completions.warmup on: the server computes the next one ahead. */
const ACCEPT = { command: 'k3.completionAccepted', title: 'K3: suggestion accepted' };

test('at the end of `def f():` the server offers the next line, and the editor gets it with the default settings', async () => {
  const offered = '\n    """Return the circumference of a circle of radius r."""';
  assert.deepEqual(await policyAnswering([{ insertText: offered }])(), [{ insertText: offered, command: ACCEPT }]);
});

test('a block of several lines the server offers reaches the editor whole', async () => {
  const offered = '\n    c = 2 * math.pi * r\n    return c';
  assert.deepEqual(await policyAnswering([{ insertText: offered }])(), [{ insertText: offered, command: ACCEPT }]);
});

test('with k3.completions.warmup off a suggestion carries no accept command', async () => {
  const offered = 'return c';
  assert.deepEqual(await policyAnswering([{ insertText: offered }], false)(), [{ insertText: offered }]);
});

test('the policy shows nothing only when the server offers nothing', async () => {
  assert.deepEqual(await policyAnswering([])(), []);
});
