// vllm.test.ts - the language server's remote backend against the vLLM fake (fakes/vllm.ts),
// driven as the editor drives it, one test per row of docs/REMOTE.md's server table: the
// key checked by GET /v1/models (every /v1 route needs it); max_model_len as the context
// and its overflow wording as context-full; a model it does not serve reported alike by
// status and requests; `reasoning` deltas, and earlier reasoning sent back under that
// name; unknown fields only warned about; an error event before [DONE]; nothing listening
// while it loads, then ready with no restart.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChatSendRequest, K3ErrorCodes, RemoteApiKeyRequest, StatusRequest } from '../../protocol/lsp';
import { Tokenizer } from '../../server/engine/tokenizer';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS } from '../support/lsp';
import { startVllm } from './fakes/vllm';
import { closedPort, failure, remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };

test('vLLM row "key": GET /v1/models needs the key, so it checks a wrong key at start and after setApiKey, without a generation', T, async () => {
  const fake = await startVllm({ apiKey: 'vllm-key-81' });
  await withLanguageServer(
    remoteInit(fake.base, { apiKey: 'wrong-key-82' }),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-unauthorized');
      assert.match(s.error?.detail ?? '', /^GET http:\/\/127\.0\.0\.1:\d+\/v1\/models was refused \(HTTP 401\): the API key is missing or wrong: Unauthorized$/);
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'vllm-key-81' }), { phase: 'ready' });
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'wrong-key-83' }), { phase: 'error' });
      assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 0, 'no generation was asked for');
      assert.equal(fake.requests.filter((r) => r.path !== '/v1/models').length, 0, 'GET /v1/models is the whole check');
    },
    fake,
  );
});

test('vLLM row "context" and "overflow": max_model_len is the context; "the model\'s context length is only N tokens" is context-full', T, async () => {
  const fake = await startVllm({ maxModelLen: 1000 });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.server, 'vllm');
      assert.equal(s.remote?.contextTokens, 1000);
      // Fits the language server's estimate of 4 bytes a token (a turn past it is refused
      // before it is sent); the server counts more and refuses it.
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'y'.repeat(3200), maxTokens: 8 }));
      assert.equal(e.code, K3ErrorCodes.ContextFull);
      assert.match(e.message, /the model's context length is only 1000 tokens/);
    },
    fake,
  );
});

test('vLLM row "model": a model it does not serve is reported by the status and by every request alike, none of them sent', T, async () => {
  const fake = await startVllm({ servedName: 'kimi-k3' });
  await withLanguageServer(
    remoteInit(fake.base, { model: 'Kimi-K3' }),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-model-missing');
      assert.match(s.error?.detail ?? '', /the server lists kimi-k3, not Kimi-K3/);
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
      assert.equal(e.code, K3ErrorCodes.ModelMissing);
      assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 0);
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).error?.kind, 'remote-model-missing');
    },
    fake,
  );
});

test('vLLM row "reasoning": `reasoning` deltas are the think channel, and earlier reasoning goes back as `reasoning` (which vLLM reads)', T, async () => {
  const fake = await startVllm();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const first = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'Why?', maxTokens: 20, thinking: true });
      assert.equal(first.message.reasoning, 'Think. ');
      assert.equal(first.message.content, 'Hello there.');
      assert.ok(first.stats.promptTokens > 0, 'continuous usage counts the prompt');
      assert.equal(first.stats.reusedTokens, 0, 'no cached tokens without --enable-prompt-tokens-details');
      await ls.connection.sendRequest(ChatSendRequest.type, { conversationId: first.conversationId, message: 'And?', maxTokens: 20 });
      const sent = await fake.waitForRequest((r) => r.path === '/v1/chat/completions' && (r.body?.messages as unknown[]).length === 3);
      assert.equal((sent.body?.messages as Array<Record<string, unknown>>)[1].reasoning, 'Think. ');
    },
    fake,
  );
});

test('vLLM row "unknown fields": k3_checkpoints is only warned about, and a completion with token-id prompts answers', T, async (t) => {
  const dir = ensureFixture({ gate: 'lowerbound' });
  const tok = Tokenizer.open(dir);
  const fake = await startVllm({ tokenize: (t) => Array.from(tok.encode(t, false)) });
  t.after(() => tok.close());
  await withLanguageServer(
    remoteInit(fake.base, {}, dir),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.prompts, 'ids');
      await ls.open('file:///w/c.py', 'python', 'import os\n\ndef main():\n    return ');
      const got = await ls.complete('file:///w/c.py', 3, 11);
      assert.equal(got?.items[0]?.insertText, 'Hello there.');
      const sent = await fake.waitForRequest((r) => r.path === '/v1/completions');
      assert.ok(Array.isArray(sent.body?.prompt), 'the prompt went as token ids');
      assert.deepEqual(fake.ignored.at(-1), ['k3_checkpoints']);
    },
    fake,
  );
});

test('vLLM row "mid-stream error": an error event before [DONE] keeps the reply so far and shows the server\'s message', T, async () => {
  const fake = await startVllm();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      fake.scripts.push({ pieces: [{ content: 'Partial' }], end: { error: 'EngineCore encountered an issue. See stack trace for the root cause.' } });
      const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 50 });
      assert.equal(r.message.content, 'Partial');
      assert.match(r.warnings[0]?.message ?? '', /failed \(the server says: EngineCore encountered an issue/);
      assert.ok(ls.logs.some((l) => l.includes('(500 InternalServerError): EngineCore encountered an issue')), ls.logs.join('\n'));
    },
    fake,
  );
});

test('vLLM row "loading": nothing listens while it loads (unreachable), then ready once it listens, without a restart', T, async () => {
  const port = await closedPort();
  const ls = await startServer(remoteInit(`http://127.0.0.1:${port}`));
  let fake: Awaited<ReturnType<typeof startVllm>> | undefined;
  try {
    const s = await ls.waitForStatus((x) => x.phase === 'error');
    assert.equal(s.error?.kind, 'remote-unreachable');
    fake = await startVllm({ port });
    await ls.waitForStatus((x) => x.phase === 'ready');
    assert.ok(ls.logs.some((l) => l.includes('answers again')));
  } finally {
    await ls.shutdown();
    await fake?.close();
  }
});
