// llama-server.test.ts - the language server's remote backend against the llama-server fake
// (fakes/llama-server.ts), driven as the editor drives it (the bundled server over stdio),
// one test per row of docs/REMOTE.md's server table: the key checked on /props because
// /v1/models needs none; the context from meta.n_ctx laying completions out; its
// exceed_context_size_error as context-full; "Loading model" shown as loading and polled
// promptly; an error event mid-reply kept with the server's message; a wrong model id
// reported the same way by status and requests though the server ignores it; reasoning
// and cached tokens; keep-alive pings that are not progress. Tests await events (status
// notifications, recorded requests), never time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ChatSendRequest,
  ChatStopRequest,
  K3ErrorCodes,
  RemoteApiKeyRequest,
  StatusRequest,
} from '../../protocol/lsp';
import { startServer, TEST_TIMEOUT_MS } from '../support/lsp';
import { promptTokens } from './fakes/core';
import { isInfillProbe, startLlamaServer } from './fakes/llama-server';
import { failure, longFile, remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };

test('llama-server row "key": /v1/models needs no key but /props does, so a wrong key is reported at start and after setApiKey, without a generation', T, async () => {
  const fake = await startLlamaServer({ apiKey: 'right-key-71' });
  await withLanguageServer(
    remoteInit(fake.base, { apiKey: 'wrong-key-72' }),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-unauthorized');
      assert.equal(s.error?.action.kind, 'set-api-key');
      assert.match(s.error?.detail ?? '', /^GET http:\/\/127\.0\.0\.1:\d+\/props was refused \(HTTP 401\): the API key is missing or wrong: Invalid API Key$/);
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'right-key-71' }), { phase: 'ready' });
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'wrong-key-73' }), { phase: 'error' });
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: '' }), { phase: 'error' });
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).error?.kind, 'remote-unauthorized');
      assert.deepEqual(
        fake.requests.filter((r) => r.method === 'POST' && !isInfillProbe(r)),
        [],
        'no generation was asked for',
      );
      const everything = [...ls.logs, JSON.stringify(ls.statuses)].join('\n');
      for (const key of ['right-key-71', 'wrong-key-72', 'wrong-key-73']) assert.ok(!everything.includes(key), `${key} is not in the logs or status`);
    },
    fake,
  );
});

test('llama-server row "context": meta.n_ctx bounds the completion layout, so a completion in a long file fits a 300-token slot', T, async () => {
  const fake = await startLlamaServer({ nCtx: 300 });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.server, 'llama-server');
      assert.equal(s.remote?.contextTokens, 300);
      const text = longFile(400);
      await ls.open('file:///w/long.py', 'python', text);
      const lines = text.split('\n');
      const got = await ls.complete('file:///w/long.py', lines.length - 1, lines[lines.length - 1].length);
      assert.ok(got !== null, 'the completion answered');
      const sent = await fake.waitForRequest((r) => r.path === '/v1/completions');
      assert.equal(sent.status, 200, 'the server accepted the prompt');
      const n = promptTokens(sent.body ?? {});
      assert.ok(n + Number(sent.body?.max_tokens) <= 300, `prompt ${n} + max_tokens ${String(sent.body?.max_tokens)} fit 300`);
      assert.ok(n > 150, `the prompt uses the context (${n} tokens)`);
    },
    fake,
  );
});

test('llama-server row "overflow": exceed_context_size_error is context-full, with the server\'s words in the message and the log', T, async () => {
  // Without the model's tokenizer the language server estimates a turn at 4 bytes a token and
  // refuses one that cannot fit before sending it (docs/PROMPTS.md); this one fits that
  // estimate, and the server, counting more tokens, refuses it.
  const fake = await startLlamaServer({ nCtx: 1000 });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'x'.repeat(3200), maxTokens: 8 }));
      assert.equal(e.code, K3ErrorCodes.ContextFull);
      assert.equal(e.data?.kind, 'context-full');
      assert.match(e.message, /exceeds the available context size \(1000 tokens\)/);
      await ls.waitFor(ls.logs, (l) => /remote backend: .*request \(\d+ tokens\) exceeds the available context size \(1000 tokens\)/.test(l));
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).phase, 'ready', 'an overflow leaves the server usable');
    },
    fake,
  );
});

test('llama-server row "loading": 503 "Loading model" is shown as loading, polled every second, and ready without a restart', T, async () => {
  const fake = await startLlamaServer({ loading: true });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'loading' && x.remote?.loading === 'model');
      assert.equal(s.error?.kind, 'remote-loading');
      assert.match(s.error?.detail ?? '', /the server is loading its model \(HTTP 503\): Loading model/);
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
      assert.equal(e.code, K3ErrorCodes.NoModel);
      assert.equal(e.data?.kind, 'remote-loading');
      const polls = () => fake.requests.filter((r) => r.path === '/v1/models' && r.status === 503).length;
      await fake.waitForRequest(() => polls() >= 3);
      const loadingLines = ls.logs.filter((l) => l.includes('is loading its model') && l.includes('GET '));
      assert.equal(loadingLines.length, 1, `the polls log the loading once: ${loadingLines.join(' | ')}`);
      fake.options.loading = false;
      await ls.waitForStatus((x) => x.phase === 'ready');
      const ok = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 });
      assert.equal(ok.message.content, 'Hello there.');
    },
    fake,
  );
});

test('llama-server row "mid-stream error": the reply so far is kept, and the server\'s message reaches the user and the log', T, async () => {
  const fake = await startLlamaServer();
  const ls = await startServer(remoteInit(fake.base));
  const utf8 = '[json.exception.type_error.316] invalid UTF-8 byte at index 3: 0x9F';
  try {
    await ls.waitForStatus((x) => x.phase === 'ready');
    fake.scripts.push({ pieces: [{ reasoning: 'Hmm. ' }, { content: 'Hello' }, { content: ' wor' }], end: { error: utf8 } });
    const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 50 });
    assert.equal(r.message.stopReason, 'stopped');
    assert.equal(r.message.reasoning, 'Hmm. ');
    assert.equal(r.message.content, 'Hello wor');
    assert.equal(r.warnings[0]?.kind, 'remote-failed');
    assert.ok(r.warnings[0]?.message.includes(utf8), r.warnings[0]?.message);
    assert.ok(ls.problems.some((p) => p.message.includes(utf8)), 'the user is told');
    assert.ok(ls.logs.some((l) => l.includes(utf8) && l.includes('/v1/chat/completions')), 'the log has the server\'s message and the route');

    fake.scripts.push({ pieces: [{ content: 'x' }], end: { error: utf8 } });
    await ls.open('file:///w/a.py', 'python', 'def f():\n    return ');
    const e = await failure(ls.complete('file:///w/a.py', 1, 11));
    assert.equal(e.code, K3ErrorCodes.EngineFailed);
    assert.ok(e.message.includes(utf8), e.message);
    assert.ok(ls.logs.some((l) => l.includes(utf8) && l.includes('/v1/completions')));
  } finally {
    await ls.shutdown();
    await fake.close();
  }
});

test('llama-server row "model": it ignores the request\'s model, so a wrong k3.remote.model is reported by the status and by every request alike', T, async () => {
  const fake = await startLlamaServer();
  const wrong = await startServer(remoteInit(fake.base, { model: 'kimi-k3-nope' }));
  const alias = await startServer(remoteInit(fake.base, { model: 'small-bf16.gguf' }));
  try {
    const s = await wrong.waitForStatus((x) => x.phase === 'error');
    assert.equal(s.error?.kind, 'remote-model-missing');
    assert.match(s.error?.detail ?? '', /the server lists kimi-k3, not kimi-k3-nope/);
    for (let i = 0; i < 2; i++) {
      const e = await failure(wrong.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
      assert.equal(e.code, K3ErrorCodes.ModelMissing);
      assert.equal(e.data?.kind, 'remote-model-missing');
    }
    await wrong.open('file:///w/b.py', 'python', 'x = ');
    assert.equal((await failure(wrong.complete('file:///w/b.py', 0, 4))).data?.kind, 'remote-model-missing');
    assert.equal((await wrong.connection.sendRequest(StatusRequest.type)).error?.kind, 'remote-model-missing', 'still reported');
    assert.deepEqual(
      fake.requests.filter((r) => r.method === 'POST' && !isInfillProbe(r)),
      [],
      'nothing was sent under the wrong name',
    );
    const a = await alias.waitForStatus((x) => x.phase === 'ready');
    assert.equal(a.remote?.model, 'kimi-k3', 'an alias the server lists names its model');
  } finally {
    await Promise.all([wrong.shutdown(), alias.shutdown()]);
    await fake.close();
  }
});

test('llama-server row "reasoning and usage": reasoning_content deltas are the think channel, go back as reasoning_content, and cached_tokens are the reuse', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const first = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'What is a monad?', maxTokens: 20, thinking: true });
      assert.equal(first.message.reasoning, 'Think. ');
      assert.equal(first.message.content, 'Hello there.');
      const second = await ls.connection.sendRequest(ChatSendRequest.type, { conversationId: first.conversationId, message: 'And a functor?', maxTokens: 20 });
      const sent = await fake.waitForRequest((r) => r.path === '/v1/chat/completions' && (r.body?.messages as unknown[]).length === 3);
      const assistant = (sent.body?.messages as Array<Record<string, unknown>>)[1];
      assert.equal(assistant.reasoning_content, 'Think. ');
      assert.ok(second.stats.reusedTokens > 0 && second.stats.reusedTokens < second.stats.promptTokens, JSON.stringify(second.stats));
      assert.equal(second.stats.prefilledTokens, second.stats.promptTokens - second.stats.reusedTokens);
    },
    fake,
  );
});

test('llama-server row "stream": keep-alive pings are not progress, so a stall past timeoutMs keeps the reply so far as a timeout', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    remoteInit(fake.base, { timeoutMs: 800 }),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      fake.scripts.push({ pieces: [{ content: 'Par' }], end: { stall: true } });
      const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 50 });
      assert.equal(r.message.content, 'Par');
      assert.equal(r.warnings[0]?.kind, 'remote-timeout');
      assert.match(r.warnings[0]?.detail ?? '', /\/v1\/chat\/completions: nothing arrived for 800 ms/);
    },
    fake,
  );
});

test('llama-server row "usage": a chat stopped before the usage arrived says so in the log instead of "prompt 0 tokens"', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      fake.scripts.push({ pieces: [{ content: 'One' }, { content: ' two' }], end: { stall: true } });
      const reply = ls.connection.sendRequest(ChatSendRequest.type, { message: 'count', maxTokens: 50 });
      const piece = await ls.waitFor(ls.streams, (p) => p.text === ' two');
      await ls.connection.sendRequest(ChatStopRequest.type, { conversationId: piece.conversationId });
      assert.equal((await reply).message.stopReason, 'stopped');
      const line = await ls.waitFor(ls.logs, (l) => l.startsWith('chat turn (remote)'));
      assert.match(line, /2 pieces generated \(stopped\); the server sent no usage/);
    },
    fake,
  );
});
