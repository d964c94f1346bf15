// errors.test.ts - each failure the protocol documents (docs/PROTOCOL.md, "Errors"), from
// the bundled server over stdio, and the server serving on afterwards: a wrong model path,
// a truncated shard, a corrupted saved state (cleared, said so, the turn re-read from the
// history), a corrupted history file (set aside, the other conversations kept), malformed
// requests; and the engine's out-of-memory failures asking for a smaller preset.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import { EngineError } from '../../server/engine/engine';
import { modelLoadFailure } from '../../server/errors';
import {
  ChatSendRequest,
  ConversationListRequest,
  type K3ErrorData,
  K3ErrorCodes,
  ModelLoadRequest,
  StatusRequest,
} from '../../protocol/lsp';
import { linkCopy, rewrite } from '../support/checkpoint-edit';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';

const dir = ensureFixture({ gate: 'lowerbound' });
const settings = { engine: { threads: 1 } };

function storage(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'k3-errors-'));
}

/** The rejection of `p` as a ResponseError carrying K3ErrorData. */
async function failure(p: Promise<unknown>): Promise<ResponseError<K3ErrorData>> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ResponseError, `a ResponseError, not ${String(e)}`);
    return e as ResponseError<K3ErrorData>;
  }
  return assert.fail('the request succeeded');
}

async function stillServing(server: ServerHandle): Promise<void> {
  const s = await server.connection.sendRequest(StatusRequest.type);
  assert.match(s.engineVersion, /^\d+\.\d+\.\d+$/);
}

test('a wrong model path is reported as model-missing with the choose-folder action, and the server keeps serving', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: '/nonexistent/k3-model', settings });
  try {
    const s = await server.waitForStatus((x) => x.error?.kind === 'model-missing');
    assert.equal(s.phase, 'no-model');
    assert.equal(s.error?.action.kind, 'choose-model-folder');
    const e = await failure(server.connection.sendRequest(ModelLoadRequest.type, { modelPath: '/nonexistent/k3-model' }));
    assert.equal(e.code, K3ErrorCodes.ModelMissing);
    assert.equal(e.data?.kind, 'model-missing');
    assert.equal(e.data?.action.kind, 'choose-model-folder');
    assert.match(e.message, /\/nonexistent\/k3-model does not exist/);
    // Completions answer with nothing while there is no model; chat says why.
    await server.open('file:///w/a.py', 'python', 'x = ');
    assert.deepEqual(await server.complete('file:///w/a.py', 0, 4), { items: [] });
    const chat = await failure(server.connection.sendRequest(ChatSendRequest.type, { message: 'hi' }));
    assert.equal(chat.data?.action.kind, 'choose-model-folder');
    await stillServing(server);
  } finally {
    await server.shutdown();
  }
});

test('a truncated shard is reported as model-invalid naming the engine status, and a good model loads afterwards', { timeout: TEST_TIMEOUT_MS }, async () => {
  const broken = linkCopy(dir);
  const shard = fs.readdirSync(broken).filter((f) => f.endsWith('.safetensors')).sort()[2];
  const bytes = fs.readFileSync(path.join(broken, shard));
  rewrite(path.join(broken, shard), bytes.subarray(0, Math.floor(bytes.length / 2)));
  const server = await startServer({ settings });
  try {
    const e = await failure(server.connection.sendRequest(ModelLoadRequest.type, { modelPath: broken }));
    assert.equal(e.code, K3ErrorCodes.ModelInvalid);
    assert.equal(e.data?.action.kind, 'choose-model-folder');
    assert.ok(['io', 'format', 'tensor'].includes(e.data?.status ?? ''), `engine status ${e.data?.status}`);
    assert.match(e.data?.detail ?? '', new RegExp(shard.replace(/\./g, '\\.')));
    const s = await server.connection.sendRequest(StatusRequest.type);
    assert.equal(s.phase, 'error');
    assert.equal(s.error?.kind, 'model-invalid');
    const ok = await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: dir });
    assert.equal(ok.vocabSize, 163840);
    assert.equal((await server.connection.sendRequest(StatusRequest.type)).phase, 'ready');
  } finally {
    await server.shutdown();
  }
});

test('a corrupted saved state is cleared and said so; the turn is re-read from the history, which stays intact', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = storage();
  const first = await startServer({ modelPath: dir, storagePath: store, settings });
  await waitReady(first);
  const turn1 = await first.connection.sendRequest(ChatSendRequest.type, { message: 'first', maxTokens: 8 });
  await first.shutdown();
  const convDir = path.join(store, 'conversations');
  const stateFile = fs.readdirSync(convDir).find((f) => f.endsWith('.k3state'))!;
  const state = fs.readFileSync(path.join(convDir, stateFile));
  state[state.length - 5] ^= 0xff; // a flipped payload byte breaks its checksum
  fs.writeFileSync(path.join(convDir, stateFile), state);

  const second = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(second);
    const turn2 = await second.connection.sendRequest(ChatSendRequest.type, { conversationId: turn1.conversationId, message: 'second', maxTokens: 8 });
    assert.deepEqual(turn2.warnings.map((w) => w.kind), ['state-incompatible']);
    assert.match(turn2.warnings[0].message, /could not be used, so it was cleared/);
    assert.equal(turn2.stats.resumedFrom, 'none');
    assert.equal(turn2.stats.prefilledTokens, turn2.stats.promptTokens, 'the whole conversation was read again');
    assert.ok(second.problems.some((p) => p.kind === 'state-incompatible'), 'reported as k3/didReportProblem too');
    assert.equal(fs.readdirSync(path.join(store, 'corrupt')).filter((f) => f.startsWith(stateFile)).length, 1, 'moved aside');
    const list = await second.connection.sendRequest(ConversationListRequest.type);
    assert.equal(list.conversations[0].messageCount, 4);
  } finally {
    await second.shutdown();
  }
});

test('a corrupted history file is set aside and reported; the other conversations are kept', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = storage();
  const first = await startServer({ modelPath: dir, storagePath: store, settings });
  await waitReady(first);
  const a = await first.connection.sendRequest(ChatSendRequest.type, { message: 'keep me', maxTokens: 4 });
  const b = await first.connection.sendRequest(ChatSendRequest.type, { message: 'break me', maxTokens: 4 });
  await first.shutdown();
  fs.writeFileSync(path.join(store, 'conversations', `${b.conversationId}.json`), '{"format":"k3-conversation","versi');

  const second = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    const list = await second.connection.sendRequest(ConversationListRequest.type);
    assert.deepEqual(list.conversations.map((c) => c.id), [a.conversationId]);
    const problem = await second.waitFor(second.problems, (p) => p.kind === 'file-corrupt');
    assert.match(problem.message, new RegExp(`${b.conversationId}\\.json could not be read`));
    await stillServing(second);
  } finally {
    await second.shutdown();
  }
});

test('malformed requests are InvalidParams with the invalid-request kind, and the server keeps serving', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: dir, settings });
  try {
    await waitReady(server);
    const cases: [string, unknown][] = [
      [ChatSendRequest.method, { message: 42 }],
      [ChatSendRequest.method, { message: 'x', maxTokens: -1 }],
      [ModelLoadRequest.method, { modelPath: 7 }],
      ['textDocument/inlineCompletion', { textDocument: {}, position: { line: 'a' } }],
      ['k3/presets/set', { preset: 'enormous' }],
    ];
    for (const [method, params] of cases) {
      const e = await failure(server.connection.sendRequest(method, params));
      assert.equal(e.code, ErrorCodes.InvalidParams, `${method} ${JSON.stringify(params)}`);
      assert.equal(e.data?.kind, 'invalid-request');
    }
    await stillServing(server);
  } finally {
    await server.shutdown();
  }
});

test('an engine out-of-memory or budget failure while loading asks for a smaller preset', () => {
  for (const code of ['out-of-memory', 'budget'] as const) {
    const f = modelLoadFailure(new EngineError(code, code === 'budget' ? 7 : 6, 'plan 9 GB > available 4 GB'), '/m');
    assert.equal(f.code, K3ErrorCodes.OutOfMemory);
    assert.equal(f.data.action.kind, 'choose-smaller-preset');
    assert.equal(f.data.detail, 'plan 9 GB > available 4 GB');
  }
});
