// warmup-remote.test.ts - warm-up against remote servers, driven as the editor drives the
// bundled language server: the prompt-only request each server gets on a context change
// (llama-server: max_tokens 0 with cache_prompt; vLLM and others: max_tokens 1; k3 serve:
// max_tokens 0 with the layout's checkpoints), the same prompt the completion at that cursor
// then sends, k3 serve's prefix held so that completion computes nothing, and nothing sent
// with k3.completions.warmup off. Awaits recorded requests and log lines, never time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ContextDidChangeNotification, type InitializationOptions, StatusRequest } from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, TEST_TIMEOUT_MS } from '../support/lsp';
import type { FakeServer, Recorded } from './fakes/core';
import { startLlamaServer } from './fakes/llama-server';
import { startVllm } from './fakes/vllm';
import { longFile, remoteInit, withLanguageServer } from './remote-client';
import { startServe } from './support';

const T = { timeout: TEST_TIMEOUT_MS };
const dir = ensureFixture({ gate: 'lowerbound' });
const TEXT = longFile(30);
const LINE = TEXT.split('\n').length - 1;
const URI = 'file:///w/warm.py';

/** Opens the file, sends a context change at its end, then completes there; returns the
 * POST /v1/completions bodies the server got from then on. */
async function warmThenComplete(ls: ServerHandle, fake: FakeServer): Promise<Recorded[]> {
  await ls.waitForStatus((x) => x.phase === 'ready');
  await ls.open(URI, 'python', TEXT);
  const from = fake.requests.length;
  await ls.connection.sendNotification(ContextDidChangeNotification.type, { uri: URI, version: 1, position: { line: LINE, character: 9 } });
  // The server handles the notification before the request (one connection, in order).
  await ls.complete(URI, LINE, 9);
  return fake.requests.filter((r) => fake.requests.indexOf(r) >= from && r.method === 'POST' && r.path === '/v1/completions');
}

function withWarmup(init: InitializationOptions, warmup: boolean): InitializationOptions {
  return { ...init, settings: { completions: { ...init.settings?.completions, warmup } } };
}

test('llama-server: a context change sends the prompt with max_tokens 0 and cache_prompt, the very prompt the completion then sends', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      await ls.open(URI, 'python', TEXT);
      const from = fake.requests.length;
      await ls.connection.sendNotification(ContextDidChangeNotification.type, { uri: URI, version: 1, position: { line: LINE, character: 9 } });
      await ls.waitFor(ls.logs, (l) => l.startsWith('warm-up: prefilled'));
      await ls.complete(URI, LINE, 9);
      const posts = fake.requests.filter((r) => fake.requests.indexOf(r) >= from && r.method === 'POST');
      assert.deepEqual(posts.map((r) => [r.path, r.body?.max_tokens, r.body?.cache_prompt]), [
        ['/v1/completions', 0, true],
        ['/v1/completions', 16, undefined],
      ]);
      assert.equal(typeof posts[0].body?.prompt, 'string');
      assert.equal(posts[0].body?.prompt, posts[1].body?.prompt, 'the warm-up sent the prompt the completion sent');
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).warmup?.prefills, 1);
    },
    fake,
  );
});

test('vLLM: the prompt-only request asks for one token (vLLM refuses 0) and no llama-server fields', T, async () => {
  const fake = await startVllm();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      await ls.open(URI, 'python', TEXT);
      await ls.connection.sendNotification(ContextDidChangeNotification.type, { uri: URI, version: 1, position: { line: LINE, character: 9 } });
      const r = await fake.waitForRequest((x) => x.method === 'POST' && x.path === '/v1/completions');
      assert.equal(r.body?.max_tokens, 1);
      assert.equal('cache_prompt' in (r.body ?? {}), false);
    },
    fake,
  );
});

test('with k3.completions.warmup off a context change sends nothing: the completion is the only request', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    withWarmup(remoteInit(fake.base), false),
    async (ls) => {
      const posts = await warmThenComplete(ls, fake);
      assert.deepEqual(posts.map((r) => r.body?.max_tokens), [16]);
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).warmup, undefined);
    },
    fake,
  );
});

test('k3 serve: the prefill-only request stores the prefix, so the completion at that cursor computes no prompt token', T, async () => {
  const serve = await startServe(dir, { args: ['--ctx', '4096'] });
  await withLanguageServer(
    { modelPath: dir, settings: { engine: { threads: 1 }, completions: { maxTokens: 16, filter: false } }, backend: 'remote', remote: { endpoint: serve.base, timeoutMs: 30_000 } },
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.prompts === 'ids');
      await ls.open(URI, 'python', TEXT);
      await ls.connection.sendNotification(ContextDidChangeNotification.type, { uri: URI, version: 1, position: { line: LINE, character: 9 } });
      const log = await ls.waitFor(ls.logs, (l) => l.startsWith('warm-up: prefilled'));
      const [, prefilled, total] = /prefilled (\d+) tokens of (\d+)/.exec(log)!.map(Number);
      assert.equal(prefilled, total, 'k3 serve held none of it before');
      await ls.complete(URI, LINE, 9);
      const s = (await ls.connection.sendRequest(StatusRequest.type)).lastCompletion;
      assert.equal(s?.promptTokens, total);
      assert.equal(s?.prefilledTokens, 0, `k3 serve reused the warmed prompt: ${JSON.stringify(s)}`);
    },
    { close: async () => void (await serve.stop()) },
  );
});
