// edit-request.test.ts - k3/edit/start through the bundled server over stdio, as the editor
// sends it. Remote (the llama-server fake replaying scripted streams): a fenced rewrite split
// at awkward places streams as finished lines only and ends as code; a reply with no code
// block ends as a message; a stream that fails midway fails the edit (nothing to apply); the
// chat history is untouched. Local: the embedded k3-mini, not trained for chat, is refused
// before anything runs, with the way out; on the tiny fixture an edit between two chat turns
// runs and the conversation's next turn still resumes from its saved state.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import {
  ChatSendRequest,
  ConversationListRequest,
  EditStartRequest,
  EditStreamNotification,
  K3ErrorCodes,
  type EditStartParams,
  type EditStreamParams,
} from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady, type ServerHandle } from '../support/lsp';
import { addonFile, repoRoot } from '../support/paths';
import { startLlamaServer } from '../serve/fakes/llama-server';
import { failure, remoteInit, withLanguageServer } from '../serve/remote-client';

process.env.K3_ADDON ??= addonFile;
const T = { timeout: TEST_TIMEOUT_MS };

const params = (editId: string, extra: Partial<EditStartParams> = {}): EditStartParams => ({
  editId,
  languageId: 'python',
  path: 'src/fib.py',
  before: 'import sys\n',
  selection: 'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)',
  after: '\nprint(fib(int(sys.argv[1])))\n',
  instruction: 'add type hints',
  ...extra,
});

function streamsOf(ls: ServerHandle): EditStreamParams[] {
  const seen: EditStreamParams[] = [];
  ls.connection.onNotification(EditStreamNotification.type, (p) => void seen.push(p));
  return seen;
}

const REWRITE = 'def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)';

test('remote: a fenced rewrite streams as finished lines and ends as code; the chat history is untouched', T, async () => {
  const fake = await startLlamaServer();
  // The fence, the lines and the closing fence arrive cut at arbitrary places.
  const reply = `Here you go:\n\`\`\`python\n${REWRITE}\n\`\`\`\nDone.`;
  const cuts = [3, 15, 17, 30, 41, 60, 95, 100, 104];
  const pieces = [0, ...cuts].map((at, i) => ({ content: reply.slice(at, cuts[i] ?? reply.length) }));
  fake.scripts.push({ pieces, end: { done: true } });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((s) => s.phase === 'ready');
      const seen = streamsOf(ls);
      const r = await ls.connection.sendRequest(EditStartRequest.type, params('e1'));
      assert.deepEqual(r.reply, { kind: 'code', code: REWRITE, language: 'python' });
      assert.equal(r.stopReason, 'stop-token');
      assert.ok(seen.length >= 2, `${seen.length} stream notifications`);
      for (const s of seen) {
        assert.equal(s.editId, 'e1');
        assert.ok(`${REWRITE}\n`.startsWith(s.code === '' ? '' : `${s.code}\n`), `a finished-lines prefix: ${JSON.stringify(s.code)}`);
      }
      assert.equal(seen[seen.length - 1]?.code, REWRITE);
      const sent = await fake.waitForRequest((q) => q.path === '/v1/chat/completions');
      const messages = sent.body?.messages as { role: string; content: string }[];
      assert.equal(messages.length, 1);
      assert.match(messages[0]!.content, /Instruction: add type hints/);
      assert.match(messages[0]!.content, /The selection:\n```python\ndef fib\(n\):/);
      assert.deepEqual((await ls.connection.sendRequest(ConversationListRequest.type)).conversations, [], 'an edit is not a conversation');
    },
    fake,
  );
});

test('remote: a reply without a code block is a message, and a stream that fails midway fails the edit', T, async () => {
  const fake = await startLlamaServer();
  fake.scripts.push({ pieces: [{ content: 'I would need to see ' }, { content: 'the caller first.' }], end: { done: true } });
  fake.scripts.push({ pieces: [{ content: '```python\ndef fib(n: int)' }], end: { error: 'the slot was released' } });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((s) => s.phase === 'ready');
      const r = await ls.connection.sendRequest(EditStartRequest.type, params('e2'));
      assert.deepEqual(r.reply, { kind: 'message', text: 'I would need to see the caller first.' });
      const e = await failure(ls.connection.sendRequest(EditStartRequest.type, params('e3')));
      assert.equal(e.data?.kind, 'remote-failed');
      assert.match(e.message, /the slot was released/);
      const bad = await failure(ls.connection.sendRequest(EditStartRequest.type, params('e4', { instruction: '  ' })));
      assert.equal(bad.message, 'k3/edit/start: instruction must say what to do; it is empty');
    },
    fake,
  );
});

test('local: k3-mini, not trained for chat, is refused before anything runs, with the way out', T, async () => {
  const ls = await startServer({ modelPath: path.join(repoRoot, 'media/models/k3-mini'), storagePath: fs.mkdtempSync(path.join(os.tmpdir(), 'k3-edit-')) });
  try {
    await waitReady(ls);
    const e = await failure(ls.connection.sendRequest(EditStartRequest.type, params('m1')));
    assert.equal(e.code, K3ErrorCodes.NoModel);
    assert.equal(e.data?.kind, 'model-cannot-chat');
    assert.equal(e.data?.action.kind, 'choose-model-folder');
    assert.match(e.message, /^k3-mini is a code-completion model, not trained for chat: it cannot follow an edit instruction\./);
  } finally {
    await ls.shutdown();
  }
});

test('local: an edit between two chat turns runs on the chat model, and the next turn still resumes from the saved state', T, async () => {
  const ls = await startServer({
    modelPath: ensureFixture({ gate: 'lowerbound' }),
    storagePath: fs.mkdtempSync(path.join(os.tmpdir(), 'k3-edit-')),
    settings: { engine: { threads: 1, speculation: 4 } },
  });
  try {
    await waitReady(ls);
    const seen = streamsOf(ls);
    const turn1 = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hello', maxTokens: 8 });
    const r = await ls.connection.sendRequest(EditStartRequest.type, params('f1', { maxTokens: 12 }));
    assert.equal(r.generatedTokens, 12);
    assert.equal(r.stopReason, 'length');
    // The fixture's random weights write no code block; a reply cut short is never code.
    assert.equal(r.reply.kind, 'message');
    for (const s of seen) assert.equal(s.editId, 'f1');
    const turn2 = await ls.connection.sendRequest(ChatSendRequest.type, { conversationId: turn1.conversationId, message: 'again', maxTokens: 4 });
    assert.equal(turn2.stats.resumedFrom, 'saved-state', 'the edit took the session; the saved state brought the conversation back');
    const list = await ls.connection.sendRequest(ConversationListRequest.type);
    assert.deepEqual(list.conversations.map((c) => c.messageCount), [4]);
  } finally {
    await ls.shutdown();
  }
});
