// model.test.ts - the model's lifecycle and the workspace's files through the bundled
// server over stdio: a load reports work-done progress and status phases with the
// checkpoint's size, and the next load an estimate from the last one; presets are listed
// from the engine's table, and the chosen one is saved for the workspace and reloads the
// model; unload frees it; conversations and the whole workspace state can be cleared.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { WorkDoneProgress, type WorkDoneProgressBegin, type WorkDoneProgressEnd } from 'vscode-languageserver-protocol/node';
import {
  ChatSendRequest,
  ConversationClearRequest,
  ConversationListRequest,
  ModelLoadRequest,
  ModelUnloadRequest,
  PresetsListRequest,
  PresetsSetRequest,
  StateClearRequest,
  StatusRequest,
} from '../../protocol/lsp';
import { engine } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';

const dir = ensureFixture({ gate: 'lowerbound' });
const settings = { engine: { threads: 1 } };
const shardBytes = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.safetensors'))
  .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);

test('a load reports work-done progress and loading status with the shard bytes; the next one an estimate', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-model-'));
  const server = await startServer({ storagePath: store, settings });
  try {
    const progress: (WorkDoneProgressBegin | WorkDoneProgressEnd | { kind: 'report' })[] = [];
    server.connection.onProgress(WorkDoneProgress.type, 'load-1', (p) => void progress.push(p));
    const r = await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: dir, workDoneToken: 'load-1' });
    assert.equal(r.modelPath, dir);
    const loading = server.statuses.find((s) => s.phase === 'loading');
    assert.equal(loading?.load?.bytesTotal, shardBytes);
    assert.equal(loading?.load?.estimateMs, undefined, 'no estimate before the first load');
    // $/progress end goes out before the response.
    assert.equal(progress[progress.length - 1]?.kind, 'end');
    assert.equal(progress[0].kind, 'begin');
    assert.equal((progress[0] as WorkDoneProgressBegin).cancellable, true);
    assert.equal((await server.connection.sendRequest(StatusRequest.type)).phase, 'ready');

    const from = server.statuses.length;
    await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: dir });
    const again = server.statuses.slice(from).find((s) => s.phase === 'loading');
    assert.equal(typeof again?.load?.estimateMs, 'number', 'the last load gives an estimate');
    assert.equal(JSON.parse(fs.readFileSync(path.join(store, 'workspace.json'), 'utf8')).lastLoad.bytes, shardBytes);
  } finally {
    await server.shutdown();
  }
});

test("the preset list carries the engine's seconds-per-token and first-token forecasts where this machine has a profile, and none without", { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-model-'));
  const profile = path.join(store, 'machine-profile.json');
  const kind = { seconds: 0.1, ffn_seconds: 0.05, bytes: 1e9 };
  fs.writeFileSync(profile, JSON.stringify({
    format: 'k3-machine-profile', version: 3, source: 'test', threads: 2, io_threads: 2, memory_bandwidth: 2e10,
    memory_bandwidth_reading: 2e10, disk_sequential: 1e9, disk_expert: 1e9,
    kinds: { dense: kind, kda_moe: kind, mla_moe: kind, lm_head: { ...kind, ffn_seconds: 0 } }, verify: [{ positions: 1, factor: 1 }],
  }));
  const before = process.env.K3_MACHINE_PROFILE;
  try {
    for (const [file, expected] of [[profile, true], [path.join(store, 'none.json'), false]] as const) {
      process.env.K3_MACHINE_PROFILE = file; // the server process inherits it
      const server = await startServer({ storagePath: store, preset: 'auto', settings });
      try {
        const list = await server.connection.sendRequest(PresetsListRequest.type);
        for (const p of list.presets.filter((x) => x.trunkBytes !== undefined)) {
          assert.equal(p.secondsPerToken !== undefined && p.secondsPerToken > 0, expected, `${p.id}: ${p.secondsPerToken}`);
          const first = p.firstTokenSeconds;
          assert.equal(first !== undefined, expected, `${p.id}: first token`);
          if (first) {
            assert.deepEqual(first.map((t) => t.tokens), [512, 2048]);
            assert.ok(first[0].seconds > 0 && first[1].seconds > first[0].seconds, `${p.id}: ${JSON.stringify(first)}`);
          }
        }
      } finally {
        await server.shutdown();
      }
    }
  } finally {
    if (before === undefined) delete process.env.K3_MACHINE_PROFILE;
    else process.env.K3_MACHINE_PROFILE = before;
  }
});

test("presets come from the engine's table; the chosen one is saved for the workspace and reloads the model", { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-model-'));
  const server = await startServer({ modelPath: dir, storagePath: store, preset: 'auto', settings });
  try {
    await waitReady(server);
    const list = await server.connection.sendRequest(PresetsListRequest.type);
    assert.deepEqual(list.presets.map((p) => p.id), ['auto', ...engine.presets().map((p) => p.name), 'mapped']);
    const laptop = list.presets.find((p) => p.id === 'laptop');
    assert.ok(laptop?.trunkBytes && laptop.expertCacheBytes && laptop.peakBytes, 'budgets and peak memory for the picker');
    assert.ok(laptop.peakBytes > laptop.trunkBytes + laptop.expertCacheBytes, 'the peak counts more than the two budgets');
    assert.equal(list.presets.find((p) => p.id === 'auto')?.peakBytes, undefined, 'auto sizes itself');
    assert.equal(list.current, 'auto');
    const set = await server.connection.sendRequest(PresetsSetRequest.type, { preset: 'laptop' });
    assert.deepEqual(set, { preset: 'laptop', reloaded: true });
    const s = await server.connection.sendRequest(StatusRequest.type);
    assert.equal(s.preset, 'laptop');
    assert.equal(s.phase, 'ready');
  } finally {
    await server.shutdown();
  }
  const again = await startServer({ storagePath: store, preset: 'auto', settings });
  try {
    assert.equal((await again.connection.sendRequest(PresetsListRequest.type)).current, 'laptop', 'the workspace keeps its choice');
  } finally {
    await again.shutdown();
  }
});

test('unload frees the model: completions answer nothing and chat says no model is loaded', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: dir, settings });
  try {
    await waitReady(server);
    await server.connection.sendRequest(ModelUnloadRequest.type);
    const s = await server.connection.sendRequest(StatusRequest.type);
    assert.equal(s.phase, 'no-model');
    await server.open('file:///w/u.py', 'python', 'x = ');
    assert.deepEqual(await server.complete('file:///w/u.py', 0, 4), { items: [] });
    await assert.rejects(server.connection.sendRequest(ChatSendRequest.type, { message: 'hi' }), (e: { data?: { kind?: string } }) => e.data?.kind === 'no-model');
  } finally {
    await server.shutdown();
  }
});

test("clearing a conversation removes its files; clearing the state removes the workspace's files", { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-model-'));
  const server = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(server);
    const a = await server.connection.sendRequest(ChatSendRequest.type, { message: 'one', maxTokens: 4 });
    await server.connection.sendRequest(ChatSendRequest.type, { message: 'two', maxTokens: 4 });
    const files = (): string[] => fs.readdirSync(path.join(store, 'conversations'));
    assert.equal(files().length, 4, 'a history and a saved state each');
    assert.deepEqual(await server.connection.sendRequest(ConversationClearRequest.type, { conversationId: a.conversationId }), { removed: 1 });
    assert.equal(files().filter((f) => f.startsWith(a.conversationId)).length, 0);
    assert.equal((await server.connection.sendRequest(ConversationListRequest.type)).conversations.length, 1);
    const cleared = await server.connection.sendRequest(StateClearRequest.type);
    assert.ok(cleared.removedFiles >= 2);
    assert.deepEqual(fs.readdirSync(store), []);
    assert.deepEqual((await server.connection.sendRequest(ConversationListRequest.type)).conversations, []);
  } finally {
    await server.shutdown();
  }
});
