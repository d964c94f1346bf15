// storage-degrade.test.ts - the per-workspace state through the bundled server over stdio,
// where it goes wrong: k3/conversation/clear deletes nothing unless asked exactly (one id,
// or `all: true`), and storage that cannot be written (a file where the folder should be)
// costs the history, never the model: the load succeeds, completions and chat answer, the
// status and the chat turn say why history is not kept.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import {
  ChatSendRequest,
  ConversationClearRequest,
  ConversationListRequest,
  StatusRequest,
  type K3ErrorData,
} from '../../protocol/lsp';
import { WorkspaceStore } from '../../server/state/store';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';

const dir = ensureFixture({ gate: 'lowerbound' });
const settings = { engine: { threads: 1 }, completions: { maxTokens: 8 } };

test('k3/conversation/clear with malformed params is InvalidParams and deletes nothing; { all: true } deletes all', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-clear-'));
  const seed = new WorkspaceStore(store, () => assert.fail('no problem expected'));
  for (const id of ['c1', 'c2', 'c3']) {
    await seed.put({ id, title: id, createdAt: 1, updatedAt: 1, thinking: false, messages: [], state: null });
  }
  const server = await startServer({ storagePath: store, settings });
  try {
    const malformed: unknown[] = [42, null, [], {}, { id: 'c1' }, { conversationID: 'c1' }, { conversationId: 7 }, { conversationId: '' }, { all: 'yes' }, { all: true, conversationId: 'c1' }];
    for (const params of malformed) {
      let error: unknown;
      try {
        await server.connection.sendRequest(ConversationClearRequest.method, params);
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof ResponseError, `${JSON.stringify(params)} was accepted`);
      assert.equal(error.code, ErrorCodes.InvalidParams, JSON.stringify(params));
      assert.equal((error.data as K3ErrorData).kind, 'invalid-request');
      const left = await server.connection.sendRequest(ConversationListRequest.type);
      assert.equal(left.conversations.length, 3, `${JSON.stringify(params)} deleted something`);
    }
    assert.deepEqual(await server.connection.sendRequest(ConversationClearRequest.type, { conversationId: 'c2' }), { removed: 1 });
    assert.deepEqual(await server.connection.sendRequest(ConversationClearRequest.type, { all: true }), { removed: 2 });
  } finally {
    await server.shutdown();
  }
});

test('storage that cannot be written degrades: the model loads, completions and chat answer, and both say history is not kept', { timeout: TEST_TIMEOUT_MS }, async () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-nostore-'));
  const store = path.join(parent, 'state');
  fs.writeFileSync(store, 'a file where the state folder should be');
  const server = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    const ready = await waitReady(server);
    assert.equal(ready.storage.path, store);
    assert.equal(ready.storage.problem?.kind, 'storage-unavailable');
    assert.match(ready.storage.problem?.message ?? '', /cannot be saved: a file is in the way of the folder .*Completions and chat still work/);
    await server.open('file:///w/a.py', 'python', 'def add(a, b):\n    return ');
    await server.complete('file:///w/a.py', 1, 11);
    // The fixture's random text may be filtered out as junk; the engine's work is what counts.
    const done = (await server.connection.sendRequest(StatusRequest.type)).lastCompletion;
    assert.equal(done?.source, 'engine', 'ghost text is still computed');
    assert.equal(done?.outcome, 'done');
    assert.ok((done?.generatedTokens ?? 0) > 0);
    const turn = await server.connection.sendRequest(ChatSendRequest.type, { message: 'hello', maxTokens: 8 });
    assert.equal(turn.stats.generatedTokens, 8, 'the reply is there');
    assert.deepEqual([...new Set(turn.warnings.map((w) => w.kind))], ['storage-unavailable']);
    // This window keeps the conversation until it closes.
    const list = await server.connection.sendRequest(ConversationListRequest.type);
    assert.deepEqual(list.conversations.map((c) => c.id), [turn.conversationId]);
    const status = await server.connection.sendRequest(StatusRequest.type);
    assert.equal(status.phase, 'ready');
    assert.equal(fs.readFileSync(store, 'utf8'), 'a file where the state folder should be', 'nothing was written over it');
    assert.deepEqual(fs.readdirSync(parent), ['state'], 'no temporary files left beside it');
  } finally {
    await server.shutdown();
  }
});
