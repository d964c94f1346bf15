// chat-budget.test.ts - how a chat turn fits the context (server/chat/budget.ts, plan.ts;
// docs/PROMPTS.md, "Attachments" and "Long conversations"): an attachment's layout in the
// user message, the cut rule (whole in order, the first that does not fit cut to the lines
// that do, the rest left out), the oldest turns left out whole and never sent again, a
// regenerate or edit that replaces a message and what follows, a message that cannot fit
// refused with its numbers, and the conversation file's new fields (old files still read).
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import type { ChatAttachment } from '../../protocol/lsp';
import { attachmentBlock, messagesLeftOut, planAttachments, replyReserve, userContent } from '../../server/chat/budget';
import { planTurn, remoteCounter, renderable, rendererCounter } from '../../server/chat/plan';
import { remoteMessages } from '../../server/remote/chat';
import { ChatRenderer } from '../../server/chat/render';
import { Tokenizer } from '../../server/engine/tokenizer';
import { conversationText, isParseFailure, parseConversation, type StoredConversation } from '../../server/state/format';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;

const selection = (text: string, start = 10): ChatAttachment => ({
  kind: 'selection',
  path: 'src/a.ts',
  uri: 'file:///w/src/a.ts',
  lines: { start, end: start + text.split('\n').length - 1 },
  languageId: 'typescript',
  text,
});

test('an attachment is its header, then its lines in a fence no backtick run inside can close', () => {
  assert.equal(
    attachmentBlock(selection('const a = 1;\nconst b = 2;')),
    'Selection from src/a.ts, lines 10-11:\n```typescript\nconst a = 1;\nconst b = 2;\n```\n\n',
  );
  const file: ChatAttachment = { kind: 'file', path: 'README.md', uri: 'file:///w/README.md', lines: { start: 1, end: 3 }, text: 'x\n```js\ny' };
  assert.equal(attachmentBlock(file), 'File README.md:\n````\nx\n```js\ny\n````\n\n');
  assert.equal(
    attachmentBlock(file, 1),
    'File README.md (only lines 1-1 are shown: the rest did not fit the context):\n```\nx\n```\n\n',
    'a cut attachment says which lines were kept',
  );
  assert.equal(userContent('why?', [{ ...selection('a'), tokens: 3, sentTokens: 3, fate: 'whole' }]), `${attachmentBlock(selection('a'))}why?`);
  assert.equal(userContent('why?', [{ ...selection(''), text: '', tokens: 3, sentTokens: 0, fate: 'left-out' }]), 'why?');
});

test('the cut rule: attachments whole in order while they fit, the first that does not cut to its lines that fit, the rest left out', () => {
  const count = (t: string): number => t.length; // one token per character, to reason about
  const a = selection('aaaa\nbbbb');
  const b = selection(Array.from({ length: 40 }, (_, i) => `line ${i + 1} of forty`).join('\n'));
  const c = selection('cc');
  const whole = [a, b, c].map((x) => count(attachmentBlock(x)));
  const all = planAttachments([a, b, c], whole[0] + whole[1] + whole[2], count);
  assert.deepEqual(all.sent.map((s) => s.fate), ['whole', 'whole', 'whole']);
  assert.equal(all.tokens, whole[0] + whole[1] + whole[2]);

  const room = whole[0] + count(attachmentBlock(b, 4)) + 1; // b's first 4 lines fit, not 5 (the lines are longer than 1)
  const cut = planAttachments([a, b, c], room, count);
  assert.deepEqual(cut.sent.map((s) => s.fate), ['whole', 'cut', 'left-out']);
  assert.equal(cut.sent[1].text, 'line 1 of forty\nline 2 of forty\nline 3 of forty\nline 4 of forty', 'the first lines that fit are sent');
  assert.deepEqual(cut.sent[1].lines, b.lines, 'the range it covers stays the whole one');
  assert.equal(cut.sent[1].tokens, whole[1]);
  assert.equal(cut.sent[1].sentTokens, count(attachmentBlock(b, 4)));
  assert.equal(cut.sent[2].sentTokens, 0);
  assert.ok(cut.tokens <= room);
  assert.match(userContent('q', cut.sent), /only lines 10-13 are shown: the rest did not fit the context/);

  const none = planAttachments([a], 3, count);
  assert.deepEqual(none.sent.map((s) => [s.fate, s.text, s.sentTokens]), [['left-out', '', 0]]);
});

test('the oldest turns are left out whole, a kept history starts with a user message, and what was left out stays out', () => {
  const roles = ['user', 'assistant', 'user', 'assistant', 'user', 'assistant'] as const;
  const tokens = [10, 20, 10, 20, 10, 20];
  assert.equal(messagesLeftOut(tokens, roles, 90, 0), 0, 'everything fits');
  assert.equal(messagesLeftOut(tokens, roles, 89, 0), 2, 'one turn (its message and its reply) goes');
  assert.equal(messagesLeftOut(tokens, roles, 30, 0), 4);
  assert.equal(messagesLeftOut(tokens, roles, 29, 0), 6, 'nothing of the history fits');
  assert.equal(messagesLeftOut(tokens, roles, 1000, 2), 2, 'a turn left out is not sent again, even with room');
  assert.equal(messagesLeftOut([10, 20, 5], ['user', 'assistant', 'assistant'], 10, 0), 3, 'never a reply without its message');
  assert.equal(replyReserve(4096, 1000), 250, 'the reply keeps at most a quarter of the context');
  assert.equal(replyReserve(16, 1000), 16);
});

const tok = Tokenizer.open(path.join(repoRoot, 'test/data/kimi-tokenizer'));
const renderer = new ChatRenderer(tok);

function conversation(turns: number, words: number): StoredConversation {
  const messages: StoredConversation['messages'] = [];
  for (let i = 0; i < turns; i++) {
    messages.push({ id: `u${i}`, role: 'user', content: `question ${i} ${'word '.repeat(words)}`, reasoning: '', createdAt: i });
    messages.push({ id: `a${i}`, role: 'assistant', content: `answer ${i} ${'word '.repeat(words)}`, reasoning: '', createdAt: i });
  }
  return { id: 'c', title: 't', createdAt: 0, updatedAt: 0, thinking: false, messages, state: null };
}

test('a turn past the context leaves out its oldest turns, and what it sends fits with the reply kept free', () => {
  const conv = conversation(6, 40);
  const counter = rendererCounter(renderer, 256, false);
  const plan = planTurn(conv, 'and now?', undefined, undefined, 64, counter, 1);
  assert.ok(plan.notSent > 0 && plan.notSent % 2 === 0, `${plan.notSent} left out, whole turns`);
  assert.equal(plan.historyChanged, true);
  const sent = plan.kept.slice(plan.notSent).map(renderable);
  const prompt = renderer.render([...sent, renderable(plan.userMessage)], { thinking: false, generationPrompt: true });
  assert.equal(plan.budget.totalTokens, prompt.length, 'the budget counts exactly what is rendered');
  assert.ok(prompt.length + plan.budget.replyTokens <= 256, `${prompt.length} + ${plan.budget.replyTokens}`);
  const withOneMore = renderer.render([renderable(plan.kept[plan.notSent - 2]), renderable(plan.kept[plan.notSent - 1]), ...sent, renderable(plan.userMessage)], {
    thinking: false,
    generationPrompt: true,
  });
  assert.ok(withOneMore.length + plan.budget.replyTokens > 256, 'no more was left out than needed');

  // The next turn keeps them out even though it could have sent one of them back.
  conv.notSent = plan.notSent;
  const next = planTurn(conv, 'ok', undefined, undefined, 64, counter, 2);
  assert.ok(next.notSent >= plan.notSent);
  const fits = planTurn(conversation(1, 2), 'hi', undefined, undefined, 64, counter, 3);
  assert.equal(fits.notSent, 0);
  assert.equal(fits.historyChanged, false);
});

test('regenerate and edit replace a user message and every later one; a message that cannot fit is refused with its numbers', () => {
  const conv = conversation(3, 2);
  const counter = rendererCounter(renderer, 4096, false);
  const plan = planTurn(conv, 'question 1 again', undefined, 'u1', 64, counter, 1);
  assert.deepEqual(plan.kept.map((m) => m.id), ['u0', 'a0']);
  assert.equal(plan.historyChanged, true);
  assert.throws(() => planTurn(conv, 'x', undefined, 'a1', 64, counter, 1), /replaceFrom: a1 is not a message the user wrote/);
  assert.throws(() => planTurn(conv, 'x', undefined, 'nope', 64, counter, 1), /replaceFrom: nope/);
  assert.throws(
    () => planTurn(conv, 'word '.repeat(400), undefined, undefined, 64, rendererCounter(renderer, 256, false), 1),
    /The message is \d+ tokens; with \d+ kept for the reply and \d+ of the chat format it does not fit the context of 256 tokens/,
  );
});

test('attachments are counted with the tokenizer, cut by the rule, and carried in the rendered user message', () => {
  const big = selection(Array.from({ length: 200 }, (_, i) => `const v${i} = ${i};`).join('\n'), 1);
  const small = selection('let x = 1;', 300);
  const counter = rendererCounter(renderer, 512, false);
  const plan = planTurn(undefined, 'explain', [small, big], undefined, 64, counter, 1);
  assert.deepEqual(plan.budget.attachments.map((a) => a.fate), ['whole', 'cut']);
  const [s, b] = plan.userMessage.attachments ?? [];
  assert.equal(s.tokens, renderer.textTokens(attachmentBlock(small)));
  assert.ok(b.sentTokens < b.tokens && b.text.split('\n').length < 200);
  const prompt = renderer.render([renderable(plan.userMessage)], { thinking: false, generationPrompt: true });
  assert.equal(prompt.length, plan.budget.totalTokens);
  assert.ok(prompt.length + plan.budget.replyTokens <= 512 + 2, 'within a token or two of BPE joins at the blocks’ edges');
  const text = renderer.encode([{ text: userContent('explain', plan.userMessage.attachments), special: false }]);
  assert.ok(tok.decode(Int32Array.from(text)).includes('let x = 1;'));
});

test('the conversation file: attachments and notSent round-trip, a version 1 file is still read, a malformed attachment is named', () => {
  const conv = conversation(2, 1);
  conv.messages[2].attachments = [{ ...selection('a\nb'), tokens: 12, sentTokens: 12, fate: 'whole' }];
  conv.notSent = 2;
  const back = parseConversation(conversationText(conv));
  assert.ok(!isParseFailure(back));
  assert.deepEqual(back, conv);
  assert.match(conversationText(conv), /"version":2/);

  const v1 = conversation(1, 1);
  const old = parseConversation(JSON.stringify({ format: 'k3-conversation', version: 1, ...v1 }));
  assert.deepEqual(old, v1, 'a file an older k3-code wrote reads as it was, with everything sent');

  const bad = JSON.parse(conversationText(conv)) as { messages: Array<{ attachments?: unknown[] }> };
  bad.messages[2].attachments = [{ kind: 'file', path: 'x' }];
  const failure = parseConversation(JSON.stringify(bad));
  assert.ok(isParseFailure(failure));
  assert.match(failure.problem, /message u1 has a malformed attachment 0/);
  const tooMany = parseConversation(JSON.stringify({ ...JSON.parse(conversationText(conv)), notSent: 9 }));
  assert.ok(isParseFailure(tooMany));
  assert.match(tooMany.problem, /notSent 9 is not a count of its 4 messages/);
  const newer = parseConversation(JSON.stringify({ ...JSON.parse(conversationText(conv)), version: 3 }));
  assert.ok(isParseFailure(newer) && newer.newer === true);
});

test('a remote server gets the same attachment blocks in the user message, and an estimate says it is one', () => {
  const counter = remoteCounter(1000, undefined);
  assert.equal(counter.estimated, true);
  assert.equal(counter.text('abcdefgh'), 2, 'four bytes a token');
  const plan = planTurn(undefined, 'explain', [selection('let x = 1;')], undefined, 64, counter, 1);
  const conv = conversation(1, 1);
  const messages = remoteMessages({ ...conv, messages: [] }, plan.userMessage);
  assert.deepEqual(messages, [{ role: 'user', content: `${attachmentBlock(selection('let x = 1;'))}explain` }]);
  assert.equal(remoteCounter(1000, (t) => t.length).estimated, false, 'the model folder’s tokenizer counts exactly');
});

