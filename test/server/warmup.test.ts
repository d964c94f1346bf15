// warmup.test.ts - warm-up through the bundled server on the tiny fixture, driven as the
// editor drives it (k3/context/didChange, k3/completion/didAccept over stdio): a context
// change prefills the prompt, so the completion at that cursor reuses it; a completion
// request that arrives while the prefill runs cancels it and is answered; after an accept
// the next suggestion is computed ahead and the request there is answered from the cache; a
// context change while no model is loaded is warmed once the model is.
// Tests await log lines and status, never time.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CompletionDidAcceptNotification, ContextDidChangeNotification, ModelLoadRequest, ModelUnloadRequest, type StatusResult, StatusRequest } from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
const T = { timeout: TEST_TIMEOUT_MS };

let server: ServerHandle;

before(async () => {
  // Random weights write junk: the filter is off, as in completion.test.ts.
  server = await startServer({ modelPath: dir, settings: { engine: { threads: 1 }, completions: { multiline: 'never', maxTokens: 16, filter: false } } });
  await waitReady(server);
}, T);

after(() => server.shutdown());

const status = (): Promise<StatusResult> => server.connection.sendRequest(StatusRequest.type);

/** A file of `n` functions: a prompt of a few hundred tokens, prefilled in several slices. */
function file(n: number, tag: string): string {
  return Array.from({ length: n }, (_, i) => `def ${tag}_${i}(value):\n    return value * ${i} + len("${tag}")\n`).join('\n') + '\nresult = ';
}

test('a context change prefills the prompt: the completion at that cursor reuses all of it', T, async () => {
  const uri = 'file:///w/warm_a.py';
  const text = file(12, 'alpha');
  const line = text.split('\n').length - 1;
  await server.open(uri, 'python', text);
  const from = server.logs.length;
  await server.connection.sendNotification(ContextDidChangeNotification.type, { uri, version: 1, position: { line, character: 9 } });
  const log = await server.waitFor(server.logs, (l) => server.logs.indexOf(l) >= from && l.startsWith('warm-up: prefilled'));
  const [, prefilled, total] = /prefilled (\d+) tokens of (\d+)/.exec(log)!.map(Number);
  assert.equal(prefilled, total, 'nothing of this new file was held before');
  await server.complete(uri, line, 9);
  const s = await status();
  assert.equal(s.lastCompletion?.source, 'engine');
  assert.equal(s.lastCompletion?.promptTokens, total);
  assert.equal(s.lastCompletion?.reusedTokens, total, 'the request reused the whole prefilled prompt');
  assert.equal(s.lastCompletion?.prefilledTokens, 0);
  assert.equal(s.warmup?.prefills, 1);
});

test('a completion request that arrives while the prefill runs cancels it and is answered', T, async () => {
  const a = 'file:///w/warm_b.py';
  const b = 'file:///w/warm_c.py';
  const textA = file(40, 'beta');
  const textB = file(3, 'gamma');
  await server.open(a, 'python', textA);
  await server.open(b, 'python', textB);
  const before = (await status()).warmup!;
  await server.connection.sendNotification(ContextDidChangeNotification.type, { uri: a, version: 1, position: { line: textA.split('\n').length - 1, character: 9 } });
  const list = await server.complete(b, textB.split('\n').length - 1, 9);
  assert.ok(list, 'the request was answered');
  const s = await server.waitForStatus((x) => (x.warmup?.prefillsCancelled ?? 0) > before.prefillsCancelled);
  assert.equal(s.warmup?.prefills, before.prefills + 1);
  assert.equal(s.lastCompletion?.outcome, 'done');
  assert.ok(!server.logs.some((l) => l.startsWith('warm-up: prefilled') && l.includes(a)), 'the warm-up never finished');
});

test('after an accept the next suggestion is computed ahead, and the request there is answered from the cache', T, async () => {
  const uri = 'file:///w/warm_d.py';
  const text = file(4, 'delta');
  const line = text.split('\n').length - 1;
  await server.open(uri, 'python', text);
  const first = await server.complete(uri, line, 9);
  const shown = first?.items[0]?.insertText;
  assert.equal(typeof shown, 'string');
  const accepted = (shown as string).split('\n')[0];
  assert.ok(accepted.length > 0, `the fixture suggested text on this line: ${JSON.stringify(shown)}`);
  // The editor inserts the suggestion (version 2), then runs the accept command.
  await server.type(uri, 2, line, 9, accepted);
  const from = server.logs.length;
  const was = (await status()).warmup!;
  await server.connection.sendNotification(CompletionDidAcceptNotification.type, { uri, version: 2, position: { line, character: 9 + accepted.length } });
  await server.waitFor(server.logs, (l) => server.logs.indexOf(l) >= from && l.startsWith('warm-up: the next suggestion'));
  await server.complete(uri, line, 9 + accepted.length);
  const s = await status();
  assert.equal(s.lastCompletion?.source, 'cache');
  assert.equal(s.warmup?.ahead, was.ahead + 1);
  assert.equal(s.warmup?.aheadServed, was.aheadServed + 1);
});

test('a context change while no model is loaded is warmed once the model loads', T, async () => {
  const uri = 'file:///w/warm_e.py';
  const text = file(6, 'epsilon');
  const line = text.split('\n').length - 1;
  await server.open(uri, 'python', text);
  await server.connection.sendRequest(ModelUnloadRequest.type);
  const was = (await status()).warmup!;
  const from = server.logs.length;
  await server.connection.sendNotification(ContextDidChangeNotification.type, { uri, version: 1, position: { line, character: 9 } });
  await server.waitFor(server.logs, (l) => server.logs.indexOf(l) >= from && l.startsWith('warm-up waits'));
  assert.equal((await status()).warmup?.prefills, was.prefills, 'nothing to warm without a model');
  await server.connection.sendRequest(ModelLoadRequest.type, {});
  const log = await server.waitFor(server.logs, (l) => server.logs.indexOf(l) >= from && l.startsWith('warm-up: prefilled') && l.includes(uri));
  const [, prefilled, total] = /prefilled (\d+) tokens of (\d+)/.exec(log)!.map(Number);
  assert.equal(prefilled, total, 'the new model held nothing of it');
  assert.equal((await status()).warmup?.prefills, was.prefills + 1);
});
