// chat-context.test.ts - chat turns with editor context and past the context, against the
// bundled server on the tiny fixture: an attachment is carried into the prompt (the prompt's
// tokens are those of the message laid out as docs/PROMPTS.md spells it) and kept with the
// history across a restart; k3/chat/budget says beforehand what the turn uses; a
// conversation longer than the context goes on, its oldest turns left out (notSent) and the
// prompt re-prefilled from the kept ones; regenerate replaces the last reply.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ChatRenderer, generationPromptSegments, messageSegments, thinkingEffortSegments } from '../../server/chat/render';
import { Tokenizer } from '../../server/engine/tokenizer';
import { ChatBudgetRequest, ChatSendRequest, ConversationGetRequest, type ChatAttachment } from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });

function storage(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'k3-chat-context-'));
}

const selection: ChatAttachment = {
  kind: 'selection',
  path: 'src/add.ts',
  uri: 'file:///w/src/add.ts',
  lines: { start: 3, end: 4 },
  languageId: 'typescript',
  text: 'function add(a: number, b: number) {\n  return a + b;',
};

test('a turn with an attachment carries it into the prompt, as laid out, and keeps it with the history across a restart', { timeout: TEST_TIMEOUT_MS }, async () => {
  const store = storage();
  const settings = { engine: { threads: 1, speculation: 4 } };
  const server = await startServer({ modelPath: dir, storagePath: store, settings });
  let conversationId: string;
  let userMessage;
  try {
    await waitReady(server);
    const budget = await server.connection.sendRequest(ChatBudgetRequest.type, { message: 'What does it do?', attachments: [selection] });
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message: 'What does it do?', attachments: [selection], maxTokens: 8 });
    conversationId = r.conversationId;
    userMessage = r.userMessage;
    // The user message as docs/PROMPTS.md spells it, encoded here from the spelled-out text.
    const content =
      'Selection from src/add.ts, lines 3-4:\n```typescript\nfunction add(a: number, b: number) {\n  return a + b;\n```\n\nWhat does it do?';
    const tok = Tokenizer.open(dir);
    const expected = new ChatRenderer(tok).encode([...thinkingEffortSegments('max'), ...messageSegments('user', content), ...generationPromptSegments(true)]);
    const bare = new ChatRenderer(tok).encode([...thinkingEffortSegments('max'), ...messageSegments('user', 'What does it do?'), ...generationPromptSegments(true)]);
    tok.close();
    assert.equal(r.stats.promptTokens, expected.length, 'the prompt is the message with its attachment laid out');
    assert.ok(expected.length > bare.length + 20, 'and the attachment is a real part of it');
    assert.equal(budget.totalTokens, expected.length, 'k3/chat/budget said beforehand what the turn would send');
    assert.deepEqual(budget.attachments, [{ tokens: budget.attachments[0].tokens, sentTokens: budget.attachments[0].tokens, fate: 'whole' }]);
    assert.equal(budget.notSent, 0);
    assert.equal(budget.estimated, false);
    assert.deepEqual(
      r.userMessage.attachments?.map((a) => [a.path, a.fate, a.text]),
      [['src/add.ts', 'whole', selection.text]],
    );
  } finally {
    await server.kill();
  }
  const again = await startServer({ modelPath: dir, storagePath: store, settings });
  try {
    await waitReady(again);
    const history = await again.connection.sendRequest(ConversationGetRequest.type, { conversationId });
    assert.deepEqual(history.messages[0], userMessage, 'the attachment survives the restart with its message');
  } finally {
    await again.shutdown();
  }
});

test('a conversation longer than the context goes on: its oldest turns are left out, said in notSent, and regenerate replaces the last reply', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  // 256 positions (the smallest chat context), 16 tokens a reply: a few turns fill it.
  const settings = { engine: { threads: 1, speculation: 4 }, chat: { maxContext: 256, maxTokens: 16 } };
  const server = await startServer({ modelPath: dir, storagePath: storage(), settings });
  try {
    await waitReady(server);
    let conversationId: string | undefined;
    let notSent = 0;
    let turns = 0;
    const tok = Tokenizer.open(dir);
    const effortTokens = new ChatRenderer(tok).encode(thinkingEffortSegments('max')).length;
    tok.close();
    for (; turns < 12 && notSent === 0; turns++) {
      const r = await server.connection.sendRequest(ChatSendRequest.type, {
        conversationId,
        message: `Turn ${turns}: tell me more about the adder, please, in detail.`,
      });
      conversationId = r.conversationId;
      assert.ok(r.stats.promptTokens + 16 <= 256, `turn ${turns}: prompt ${r.stats.promptTokens} leaves the reply its room`);
      const c = await server.connection.sendRequest(ConversationGetRequest.type, { conversationId });
      assert.equal(c.messages.length, 2 * (turns + 1), 'every message is kept in the history');
      notSent = c.notSent;
      if (notSent > 0) {
        assert.equal(notSent % 2, 0, 'whole turns are left out');
        assert.equal(r.stats.resumedFrom, 'none', 'the held context no longer starts the prompt: re-prefilled from the kept turns');
        t.diagnostic(`turn ${turns}: prompt ${r.stats.promptTokens}, reused ${r.stats.reusedTokens}, prefilled ${r.stats.prefilledTokens}`);
        assert.ok(r.stats.reusedTokens <= effortTokens, 'at most what precedes the first kept message is reused');
      }
    }
    t.diagnostic(`the context filled after ${turns} turns; ${notSent} messages left out`);
    assert.ok(notSent > 0, 'the conversation outgrew the context');
    assert.ok(conversationId);

    // One more turn still works, and keeps out what was left out.
    const more = await server.connection.sendRequest(ChatSendRequest.type, { conversationId, message: 'And then?' });
    const after = await server.connection.sendRequest(ConversationGetRequest.type, { conversationId });
    assert.ok(after.notSent >= notSent);
    assert.ok(more.stats.promptTokens + 16 <= 256);

    // Regenerate: the last user message again, its reply replaced.
    const last = after.messages[after.messages.length - 2];
    const regen = await server.connection.sendRequest(ChatSendRequest.type, { conversationId, message: last.content, replaceFrom: last.id });
    const final = await server.connection.sendRequest(ConversationGetRequest.type, { conversationId });
    assert.equal(final.messages.length, after.messages.length, 'the turn was replaced, not added');
    assert.equal(final.messages[final.messages.length - 1].id, regen.message.id);
    assert.ok(!final.messages.some((m) => m.id === more.message.id || m.id === last.id));
    // Edit an earlier message: it and everything after it go.
    const earlier = final.messages[final.notSent];
    await server.connection.sendRequest(ChatSendRequest.type, { conversationId, message: 'Edited.', replaceFrom: earlier.id });
    const edited = await server.connection.sendRequest(ConversationGetRequest.type, { conversationId });
    assert.equal(edited.messages.length, final.notSent + 2);
    assert.equal(edited.messages[final.notSent].content, 'Edited.');
    await assert.rejects(
      server.connection.sendRequest(ChatSendRequest.type, { conversationId, message: 'x', replaceFrom: edited.messages[1].id }),
      /replaceFrom: .* is not a message the user wrote/,
    );
  } finally {
    await server.shutdown();
  }
});
