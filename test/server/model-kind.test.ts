// model-kind.test.ts - what a model folder says about itself, through the bundled server:
// the status names the model with its size and whether it was trained for chat (config.json
// `k3_code.chat`; absent: yes); the embedded k3-mini says no, and a chat message to it gets a
// short plain continuation, without a think channel, labelled with its name; a malformed key
// is refused naming file and field; what k3-mini's continuation shows passes ghost text's
// junk rules. And the first moments of a window: the status says
// `loading` from its first notification (never `no-model` first), and a completion asked
// while the model loads waits for it instead of answering nothing.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ResponseError } from 'vscode-languageserver-protocol/node';
import { COMPLETION_MODEL_REPLY_TOKENS } from '../../server/chat/service';
import { filterJunk, maxLineLength } from '../../server/completion/filters';
import { Tokenizer } from '../../server/engine/tokenizer';
import {
  ChatSendRequest,
  ConversationListRequest,
  K3ErrorCodes,
  ModelLoadRequest,
  StatusRequest,
  type K3ErrorData,
} from '../../protocol/lsp';
import { linkCopy, rewrite } from '../support/checkpoint-edit';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;

const fixture = ensureFixture({ gate: 'lowerbound' });
const k3mini = path.join(repoRoot, 'media/models/k3-mini');
const settings = { engine: { threads: 1 }, completions: { maxTokens: 8 } };

function weightBytes(dir: string): number {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
}

test('the status names the model, its size and whether it chats: the fixture (no k3_code key) does, k3-mini does not', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: fixture, settings });
  try {
    const ready = await waitReady(server);
    assert.deepEqual(ready.model, { name: path.basename(fixture), path: fixture, bytes: weightBytes(fixture), chat: true });
    await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: k3mini });
    const mini = await server.connection.sendRequest(StatusRequest.type);
    assert.deepEqual(mini.model, { name: 'k3-mini', path: k3mini, bytes: weightBytes(k3mini), chat: false });
  } finally {
    await server.shutdown();
  }
});

test('a chat message to k3-mini gets a short continuation of the message itself, no think channel, labelled as from a completion model', { timeout: TEST_TIMEOUT_MS }, async () => {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-mini-chat-'));
  const server = await startServer({ modelPath: k3mini, storagePath: storage, settings: { ...settings, chat: { maxTokens: 4096 } } });
  const message = 'def fibonacci(n):';
  try {
    await waitReady(server);
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message });
    assert.equal(r.message.completionModel, 'k3-mini');
    assert.equal(r.message.reasoning, '');
    assert.ok(r.stats.generatedTokens <= COMPLETION_MODEL_REPLY_TOKENS, `${r.stats.generatedTokens} tokens`);
    const tok = Tokenizer.open(k3mini);
    assert.equal(r.stats.promptTokens, tok.encode(`${message}\n`, false).length, 'the prompt is the message as text, no chat format around it');
    tok.close();
    const list = await server.connection.sendRequest(ConversationListRequest.type);
    assert.equal(list.conversations[0].thinking, false);
    assert.notEqual(r.message.content.trim(), '', 'the continuation is shown as the reply');
    const streamed = server.streams.filter((s) => s.messageId === r.message.id);
    assert.deepEqual([...new Set(streamed.map((s) => s.channel))], ['content'], 'it streams as text, never as reasoning');
  } finally {
    await server.shutdown();
  }
});

test('k3-mini asked to write a function shows only what passes the junk filter, not its doc-comment loop', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: k3mini, settings: { ...settings, chat: { maxTokens: 4096 } } });
  try {
    await waitReady(server);
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message: 'Write a TypeScript function that reverses a string' });
    assert.equal(r.message.completionModel, 'k3-mini');
    assert.equal(r.message.stopReason, 'stop-token', 'ended by the filter, not shown as stopped by the user');
    const lines = r.message.content.split('\n');
    const verdict = filterJunk(lines, { linePrefix: '', lineAbove: '', maxLineLength: maxLineLength(lines), asciiFile: true });
    assert.equal(verdict.note, undefined, `the shown reply passes the filter: ${JSON.stringify(r.message.content)}`);
    const counts = new Map<string, number>();
    for (const l of lines.map((x) => x.trim()).filter((x) => x.length >= 10)) counts.set(l, (counts.get(l) ?? 0) + 1);
    const worst = Math.max(0, ...counts.values());
    assert.ok(worst < 3, `a line is shown ${worst} times: ${JSON.stringify(r.message.content)}`);
    const streamed = server.streams.filter((s) => s.messageId === r.message.id).map((s) => s.text).join('');
    assert.equal(streamed, r.message.content, 'what streamed is what the history keeps');
    assert.match(server.logs.join('\n'), /chat turn \(continuation\): filter repeated-lines cut it/);
  } finally {
    await server.shutdown();
  }
});

test('a malformed k3_code key in config.json is refused naming the file and the field', { timeout: TEST_TIMEOUT_MS }, async () => {
  const copy = linkCopy(fixture);
  const config = JSON.parse(fs.readFileSync(path.join(copy, 'config.json'), 'utf8'));
  rewrite(path.join(copy, 'config.json'), JSON.stringify({ ...config, k3_code: { chat: 'no' } }));
  const server = await startServer({ settings });
  try {
    let error: unknown;
    try {
      await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: copy });
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof ResponseError);
    assert.equal(error.code, K3ErrorCodes.ModelInvalid);
    assert.match(error.message, /config\.json: k3_code\.chat is "no", expected true or false/);
    assert.equal((error.data as K3ErrorData).action.kind, 'choose-model-folder');
  } finally {
    await server.shutdown();
  }
});

test('the first status says loading, never no-model, and a completion asked during the load waits for it', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: fixture, settings });
  try {
    // Sent right after `initialized`: the server handles them while the model loads.
    const first = server.connection.sendRequest(StatusRequest.type);
    await server.open('file:///w/a.py', 'python', 'def add(a, b):\n    return ');
    await server.complete('file:///w/a.py', 1, 11);
    assert.equal((await first).phase, 'loading');
    // Answered by the engine once it loaded (the fixture's random text may then be filtered
    // out as junk: what counts is that it was computed, not an empty answer at once).
    const done = (await server.connection.sendRequest(StatusRequest.type)).lastCompletion;
    assert.equal(done?.source, 'engine', 'the completion waited for the model');
    assert.equal(done?.outcome, 'done');
    assert.ok((done?.generatedTokens ?? 0) > 0);
    await waitReady(server);
    assert.equal(server.statuses[0]?.phase, 'loading', `notifications: ${server.statuses.map((s) => s.phase).join(', ')}`);
    assert.ok(!server.statuses.some((s) => s.phase === 'no-model'), 'no no-model flash');
  } finally {
    await server.shutdown();
  }
});
