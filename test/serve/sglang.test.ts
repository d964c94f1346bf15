// sglang.test.ts - the language server's remote backend against the SGLang fake
// (fakes/sglang.ts), driven as the editor drives it, one test per row of docs/REMOTE.md's
// server table: the key checked by GET /v1/models (only /health*, /ready*, /metrics* are
// open); max_model_len as the context; both overflow wordings, in SGLang's top-level error
// body, as context-full; a model id it ignores reported alike by status and requests;
// `reasoning_content` deltas and usage without cached tokens; an error event before [DONE].
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChatSendRequest, K3ErrorCodes, RemoteApiKeyRequest } from '../../protocol/lsp';
import { TEST_TIMEOUT_MS } from '../support/lsp';
import { startSglang } from './fakes/sglang';
import { failure, remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };

test('SGLang row "key": GET /v1/models needs the key, so it checks a wrong key at start and after setApiKey, without a generation', T, async () => {
  const fake = await startSglang({ apiKey: 'sgl-key-91' });
  await withLanguageServer(
    remoteInit(fake.base, { apiKey: 'wrong-key-92' }),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-unauthorized');
      assert.match(s.error?.detail ?? '', /\/v1\/models was refused \(HTTP 401\): the API key is missing or wrong: Unauthorized$/);
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'sgl-key-91' }), { phase: 'ready' });
      assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 0, 'no generation was asked for');
    },
    fake,
  );
});

test('SGLang row "context" and "overflow": max_model_len is the context; both of its overflow wordings are context-full', T, async () => {
  const fake = await startSglang({ contextLength: 1000 });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.server, 'sglang');
      assert.equal(s.remote?.contextTokens, 1000);
      // Fits the language server's estimate of 4 bytes a token (a turn past it is refused
      // before it is sent); the server counts more and refuses it.
      const longer = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'z'.repeat(3200), maxTokens: 8 }));
      assert.equal(longer.code, K3ErrorCodes.ContextFull);
      assert.match(longer.message, /The input \(\d+ tokens\) is longer than the model's context length \(1000 tokens\)/);
      const total = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'z'.repeat(2400), maxTokens: 500 }));
      assert.equal(total.code, K3ErrorCodes.ContextFull);
      assert.match(total.message, /Requested token count exceeds the model's maximum context length of 1000 tokens/);
    },
    fake,
  );
});

test('SGLang row "model": it ignores the request\'s model, so a wrong k3.remote.model is reported by the status and by every request alike', T, async () => {
  const fake = await startSglang({ servedName: 'kimi-k3' });
  await withLanguageServer(
    remoteInit(fake.base, { model: 'default' }),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-model-missing');
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
      assert.equal(e.data?.kind, 'remote-model-missing');
      assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 0);
    },
    fake,
  );
});

test('SGLang row "reasoning and usage": reasoning_content deltas are the think channel; usage without cached tokens reuses nothing', T, async () => {
  const fake = await startSglang();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'Why?', maxTokens: 20, thinking: true });
      assert.equal(r.message.reasoning, 'Think. ');
      assert.equal(r.message.content, 'Hello there.');
      assert.ok(r.stats.promptTokens > 0);
      assert.equal(r.stats.reusedTokens, 0);
      assert.equal(r.stats.generatedTokens, 3);
    },
    fake,
  );
});

test('SGLang row "mid-stream error": an error event before [DONE] keeps the reply so far and shows the server\'s message', T, async () => {
  const fake = await startSglang();
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      fake.scripts.push({ pieces: [{ content: 'Half' }], end: { error: 'The request was aborted: out of memory in the KV pool.' } });
      const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 50 });
      assert.equal(r.message.content, 'Half');
      assert.match(r.warnings[0]?.message ?? '', /out of memory in the KV pool/);
      assert.ok(ls.logs.some((l) => l.includes('out of memory in the KV pool')));
    },
    fake,
  );
});
