// chat.test.ts - chat turns against the bundled server on the tiny fixture over stdio: a
// reply streams as k3/chat/didStream and is recorded; after the server is killed and
// started again the next turn resumes from the saved engine state and prefills only the
// new message; a stop token ends a reply (the fixture's random weights never choose
// [EOS] or <|end_of_msg|>, so the test renames, in a copy of the tokenizer config, an id
// greedy decoding does emit to [EOS]); and k3/status is answered while a reply is
// generated (its latency is printed, not asserted: timing belongs in benchmarks); a turn
// whose saved state another window removed re-reads the history instead of failing.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ChatRenderer, generationPromptSegments, messageSegments } from '../../server/chat/render';
import { Tokenizer } from '../../server/engine/tokenizer';
import { WorkspaceStore } from '../../server/state/store';
import {
  ChatSendRequest,
  ChatStopRequest,
  ConversationGetRequest,
  ConversationListRequest,
  StatusRequest,
} from '../../protocol/lsp';
import { linkCopy, rewrite } from '../support/checkpoint-edit';
import { engine, greedyIncremental } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
const settings = { engine: { threads: 1, speculation: 4 } };

function storage(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'k3-chat-'));
}

test('a chat reply streams as k3/chat/didStream, in order, and ends at the token limit when the model does not stop', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({ modelPath: dir, storagePath: storage(), settings });
  try {
    await waitReady(server);
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message: 'hello', maxTokens: 24 });
    assert.equal(r.message.stopReason, 'length');
    assert.equal(r.stats.generatedTokens, 24);
    const mine = server.streams.filter((s) => s.messageId === r.message.id);
    assert.ok(mine.length > 1, `${mine.length} stream notifications`);
    const text = (channel: string): string => mine.filter((s) => s.channel === channel).map((s) => s.text).join('');
    assert.notEqual(text('reasoning'), '', 'a thinking conversation starts in the think channel');
    // The fixture's random weights never close the think channel within 24 tokens: the
    // reasoning that never ended is the reply's answer, not a folded block over nothing.
    assert.equal(text('content'), '');
    assert.equal(r.message.content, text('reasoning'));
    assert.equal(r.message.reasoning, '');
    assert.equal(r.message.completionModel, undefined, 'the fixture declares no k3_code key: a chat model');
    const tokens = mine.map((s) => s.tokens);
    assert.deepEqual(tokens, [...tokens].sort((a, b) => a - b), 'pieces arrive in order');
    const list = await server.connection.sendRequest(ConversationListRequest.type);
    assert.deepEqual(list.conversations.map((c) => [c.id, c.messageCount]), [[r.conversationId, 2]]);
  } finally {
    await server.shutdown();
  }
});

test('after the server is killed and restarted, the next turn prefills only the new message and the history is intact', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const store = storage();
  const first = await startServer({ modelPath: dir, storagePath: store, settings });
  await waitReady(first);
  const turn1 = await first.connection.sendRequest(ChatSendRequest.type, { message: 'What is 2 + 2?', maxTokens: 16 });
  const saved = (await first.connection.sendRequest(ConversationListRequest.type)).conversations[0];
  await first.kill();

  const second = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(second);
    const history = await second.connection.sendRequest(ConversationGetRequest.type, { conversationId: turn1.conversationId });
    assert.deepEqual(history.messages, [turn1.userMessage, turn1.message]);
    const turn2 = await second.connection.sendRequest(ChatSendRequest.type, {
      conversationId: turn1.conversationId,
      message: 'And times 3?',
      maxTokens: 8,
    });
    // The new message, encoded as the format says, plus the reply's opening: nothing else.
    const tok = Tokenizer.open(dir);
    const newPart = new ChatRenderer(tok).encode([...messageSegments('user', 'And times 3?'), ...generationPromptSegments(true)]);
    tok.close();
    t.diagnostic(`turn 2 after a restart: prompt ${turn2.stats.promptTokens}, reused ${turn2.stats.reusedTokens}, prefilled ${turn2.stats.prefilledTokens}`);
    assert.equal(turn2.stats.resumedFrom, 'saved-state');
    assert.equal(turn2.stats.reusedTokens, saved.savedTokens);
    assert.equal(turn2.stats.prefilledTokens, newPart.length);
    assert.equal(turn2.stats.promptTokens, saved.savedTokens + newPart.length);
    const after = await second.connection.sendRequest(ConversationGetRequest.type, { conversationId: turn1.conversationId });
    assert.deepEqual(after.messages, [turn1.userMessage, turn1.message, turn2.userMessage, turn2.message]);
  } finally {
    await second.shutdown();
  }
});

test('a reply ends at a stop token: greedy decoding emits id X, which a copy of the tokenizer config names [EOS]', { timeout: TEST_TIMEOUT_MS }, async () => {
  // Find a first message after which greedy decoding emits a special-slot id the chat
  // format does not use; renaming it [EOS] changes no prompt token, so greedy is unchanged.
  const tok = Tokenizer.open(dir);
  const renderer = new ChatRenderer(tok);
  const used = new Set([163585, 163586, 163587, 163588, 163589]);
  const model = new engine.Model(dir);
  let found: { message: string; index: number; id: number } | undefined;
  for (let k = 0; k < 32 && !found; k++) {
    const message = `Question ${k}: what is ${k} + ${k}?`;
    const ctx = new engine.Context(model, { maxContext: 4096 });
    const ids = greedyIncremental(ctx, renderer.render([{ role: 'user', content: message }], { thinking: true, generationPrompt: true }), 200).ids;
    ctx.close();
    const index = ids.findIndex((id) => id >= 163584 && !used.has(id));
    if (index >= 0) found = { message, index, id: ids[index] };
  }
  model.close();
  tok.close();
  assert.ok(found, 'greedy decoding emits an unused special id within 200 tokens for one of the messages');

  const copy = linkCopy(dir);
  const config = JSON.parse(fs.readFileSync(path.join(copy, 'tokenizer_config.json'), 'utf8'));
  const decoder = config.added_tokens_decoder as Record<string, { content: string }>;
  decoder[String(found.id)] = { ...decoder['163585'], content: '[EOS]' };
  decoder['163585'] = { ...decoder['163585'], content: '<|reserved_token_163585|>' };
  rewrite(path.join(copy, 'tokenizer_config.json'), JSON.stringify(config));

  const server = await startServer({ modelPath: copy, storagePath: storage(), settings });
  try {
    await waitReady(server);
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message: found.message, maxTokens: 200 });
    assert.equal(r.message.stopReason, 'stop-token');
    assert.equal(r.stats.generatedTokens, found.index + 1, `the reply ends with the token greedy emits at ${found.index}`);
    const streamed = server.streams.filter((s) => s.messageId === r.message.id);
    assert.equal(streamed.map((s) => s.text).join(''), r.message.reasoning + r.message.content);
    assert.ok(!r.message.reasoning.includes('[EOS]'), 'the stop token is not shown');
  } finally {
    await server.shutdown();
  }
});

test('k3/status is answered while a reply is generated', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const server = await startServer({ modelPath: dir, storagePath: storage(), settings });
  try {
    await waitReady(server);
    const reply = server.connection.sendRequest(ChatSendRequest.type, { message: 'Tell me a long story.', maxTokens: 3000 });
    const piece = await server.waitFor(server.streams, () => true);
    const latencies: number[] = [];
    let duringGeneration = 0;
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      const s = await server.connection.sendRequest(StatusRequest.type);
      latencies.push(performance.now() - t0);
      if (s.job?.kind === 'chat' && s.job.stage === 'generate') duringGeneration++;
    }
    // The reply ends when the test says so, not after a token count that a busy machine
    // might or might not outlast; the latency is a figure, not a pass mark (that is a
    // benchmark's job).
    await server.connection.sendRequest(ChatStopRequest.type, { conversationId: piece.conversationId });
    const r = await reply;
    t.diagnostic(`status latency during generation: max ${Math.max(...latencies).toFixed(1)} ms, median ${latencies.sort((a, b) => a - b)[10].toFixed(1)} ms`);
    assert.equal(r.message.stopReason, 'stopped');
    assert.equal(duringGeneration, 20, 'every status request was answered while the reply was being generated');
  } finally {
    await server.shutdown();
  }
});

test('a history whose stored ids lie outside the vocabulary is read from its text, said once, and every turn works', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = storage();
  const id = '0b7e2c1a-0000-4000-8000-000000000001';
  const now = Date.now();
  const message = (role: 'user' | 'assistant', content: string, ids?: number[]) => ({ id: `${role}-${content}`, role, content, reasoning: '', createdAt: now, ...(ids ? { ids } : {}) });
  fs.mkdirSync(path.join(store, 'conversations'), { recursive: true });
  fs.writeFileSync(
    path.join(store, 'conversations', `${id}.json`),
    JSON.stringify({
      format: 'k3-conversation',
      version: 1,
      id,
      title: 'edited by hand',
      createdAt: now,
      updatedAt: now,
      thinking: false,
      messages: [message('user', 'hi'), message('assistant', 'hello there', [5, 9_999_999, 7])],
      state: null,
    }),
  );
  const server = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(server);
    const first = await server.connection.sendRequest(ChatSendRequest.type, { conversationId: id, message: 'again?', maxTokens: 4 });
    assert.equal(first.stats.generatedTokens, 4);
    assert.equal(first.warnings.length, 1, JSON.stringify(first.warnings));
    assert.equal(first.warnings[0].kind, 'file-corrupt');
    assert.match(first.warnings[0].detail ?? '', /ids up to 9999999, the vocabulary has 163840/);
    const second = await server.connection.sendRequest(ChatSendRequest.type, { conversationId: id, message: 'and now?', maxTokens: 4 });
    assert.equal(second.stats.generatedTokens, 4);
    assert.deepEqual(second.warnings, [], 'said once: the ids are gone from the history');
  } finally {
    await server.shutdown();
  }
});

test('a turn whose saved state another window removed prefills the history instead of failing', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = storage();
  const server = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(server);
    const send = (p: { message: string; conversationId?: string }) => server.connection.sendRequest(ChatSendRequest.type, { ...p, maxTokens: 4 });
    const a = await send({ message: 'What is 2 + 2?' });
    await send({ message: 'Something else.' }); // the session now holds the other conversation
    // Another window of the workspace (its own store on the folder) removes a's saved state,
    // as its clear or its limits do, without this window's store having seen it go.
    const other = new WorkspaceStore(store, () => undefined);
    const file = other.stateFile(other.get(a.conversationId)!);
    assert.ok(file && fs.existsSync(file), 'the first turn saved a state');
    fs.rmSync(file);
    const a2 = await send({ conversationId: a.conversationId, message: 'And times 3?' });
    assert.equal(a2.stats.resumedFrom, 'none');
    assert.equal(a2.stats.generatedTokens, 4);
    const history = await server.connection.sendRequest(ConversationGetRequest.type, { conversationId: a.conversationId });
    assert.deepEqual(history.messages, [a.userMessage, a.message, a2.userMessage, a2.message]);
    await server.waitFor(server.logs, (l) => l.includes('was removed by another window'));
    const a3 = await send({ conversationId: a.conversationId, message: 'And minus 1?' });
    assert.equal(a3.stats.resumedFrom, 'context', 'the turn after resumes as usual');
  } finally {
    await server.shutdown();
  }
});
