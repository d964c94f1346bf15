// state.test.ts - the chat page's state (webview/state.ts): a snapshot replaces everything,
// deltas stream into the right message of the open conversation only, a whole message
// replaces or appends, and focus requests are counted; the composer's draft (chips,
// suggestions, budget) and `@` matches, and the words chips, the budget line and the
// left-out marker show; the `@` query at the caret; which reply Regenerate replaces.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatMessageView, ConversationView, DraftView } from '../../protocol/webview';
import { atQuery, budgetLine, chipLabel, chipStatus, initialState, notSentMarker, reduce, regenerableId, shownParts, streamingMessageId } from '../../webview/state';

const reply: ChatMessageView = { id: 'm2', role: 'assistant', content: '', reasoning: '', state: 'streaming' };
const conversation: ConversationView = {
  id: 'c1',
  title: 'Hello',
  updatedAt: 1,
  messages: [{ id: 'm1', role: 'user', content: 'hi', reasoning: '', state: 'done' }, reply],
};
const availability = { canSend: true, notice: '', actions: [] };

function opened() {
  return reduce(initialState(), { type: 'snapshot', conversations: [conversation], current: conversation, availability });
}

test('a snapshot replaces the list, the open conversation and the availability', () => {
  const s = opened();
  assert.deepEqual(s.conversations, [conversation]);
  assert.equal(s.current, conversation);
  assert.deepEqual(s.availability, availability);
  assert.equal(streamingMessageId(s), 'm2');
});

test('deltas append to their channel of their message, in order, without touching the input state', () => {
  let s = opened();
  s = reduce(s, { type: 'delta', conversationId: 'c1', messageId: 'm2', channel: 'reasoning', text: 'Let me ' });
  s = reduce(s, { type: 'delta', conversationId: 'c1', messageId: 'm2', channel: 'reasoning', text: 'think.' });
  s = reduce(s, { type: 'delta', conversationId: 'c1', messageId: 'm2', channel: 'content', text: '`x`' });
  assert.equal(s.current?.messages[1].reasoning, 'Let me think.');
  assert.equal(s.current?.messages[1].content, '`x`');
  assert.equal(conversation.messages[1].content, '', 'the previous state is not mutated');
});

test('deltas for another conversation or an unknown message are ignored', () => {
  const s = opened();
  assert.equal(reduce(s, { type: 'delta', conversationId: 'c9', messageId: 'm2', channel: 'content', text: 'x' }), s);
  assert.equal(reduce(s, { type: 'delta', conversationId: 'c1', messageId: 'm9', channel: 'content', text: 'x' }), s);
  assert.equal(reduce(initialState(), { type: 'delta', conversationId: 'c1', messageId: 'm2', channel: 'content', text: 'x' }).current, null);
});

test('a whole message replaces its namesake or is appended, and ends the stream', () => {
  let s = opened();
  s = reduce(s, { type: 'message', conversationId: 'c1', message: { ...reply, content: 'done', state: 'stopped' } });
  assert.equal(s.current?.messages.length, 2);
  assert.equal(s.current?.messages[1].state, 'stopped');
  assert.equal(streamingMessageId(s), undefined);
  s = reduce(s, { type: 'message', conversationId: 'c1', message: { id: 'm3', role: 'user', content: 'more', reasoning: '', state: 'done' } });
  assert.deepEqual(s.current?.messages.map((m) => m.id), ['m1', 'm2', 'm3']);
});

test('availability and focus requests update on their own', () => {
  let s = opened();
  s = reduce(s, { type: 'availability', availability: { canSend: false, notice: 'The model is loading.', actions: [] } });
  assert.deepEqual(s.availability, { canSend: false, notice: 'The model is loading.', actions: [] });
  assert.equal(s.current, conversation);
  s = reduce(reduce(s, { type: 'focusInput' }), { type: 'focusInput' });
  assert.equal(s.focusRequests, 2);
});

test('an unknown message type throws instead of being silently dropped', () => {
  assert.throws(() => reduce(initialState(), { type: 'bogus' } as never), /unknown message/);
});

test('reasoning is folded only once the model closed it: in view while it streams alone, the answer when it never ended', () => {
  const m = (over: Partial<ChatMessageView>): ChatMessageView => ({ id: 'r', role: 'assistant', content: '', reasoning: '', state: 'done', ...over });
  assert.deepEqual(shownParts(m({ state: 'streaming', reasoning: 'hmm' })), { answer: '', reasoning: 'hmm', thinking: true });
  assert.deepEqual(shownParts(m({ state: 'streaming', reasoning: 'hmm', content: 'It' })), { answer: 'It', reasoning: 'hmm', thinking: false });
  assert.deepEqual(shownParts(m({ reasoning: 'hmm', content: 'It is.' })), { answer: 'It is.', reasoning: 'hmm', thinking: false });
  // A reply kept from before the server moved unclosed thinking into the answer.
  assert.deepEqual(shownParts(m({ reasoning: 'all of it', state: 'stopped' })), { answer: 'all of it', reasoning: '', thinking: false });
  assert.deepEqual(shownParts(m({ role: 'user', content: 'q', reasoning: 'x' })), { answer: 'q', reasoning: '', thinking: false });
});

test('the draft and the @ matches replace theirs, and the words say tokens, the cut rule’s fate and the file’s state', () => {
  const draft: DraftView = {
    attachments: [{ id: 'a', kind: 'selection', path: 'src/a.ts', lines: { start: 3, end: 9 }, tokens: 1234, sentTokens: 1234, fate: 'whole' }],
    suggestions: [{ uri: 'file:///w/b.ts', path: 'b.ts', current: true }],
    budget: { totalTokens: 1500, contextTokens: 32768, replyTokens: 4096, notSent: 0, estimated: false },
    notice: '',
  };
  const s = reduce(reduce(opened(), { type: 'draft', draft }), { type: 'fileMatches', query: 'b', files: [{ uri: 'file:///w/b.ts', path: 'b.ts' }] });
  assert.deepEqual(s.draft, draft);
  assert.equal(s.fileMatches.query, 'b');
  assert.equal(s.current, opened().current, 'the conversation is untouched');

  assert.equal(chipLabel(draft.attachments[0]), 'src/a.ts:3-9 · 1,234 tokens');
  assert.equal(chipLabel({ id: 'f', kind: 'file', path: 'big.ts', lines: { start: 1, end: 900 } }), 'big.ts', 'not counted yet: no number');
  assert.equal(
    chipLabel({ id: 'f', kind: 'file', path: 'big.ts', lines: { start: 1, end: 900 }, tokens: 9000, sentTokens: 3000, fate: 'cut' }),
    'big.ts · 3,000 of 9,000 tokens (cut: only its first lines fit)',
  );
  assert.equal(
    chipLabel({ id: 'f', kind: 'file', path: 'huge.ts', lines: { start: 1, end: 9 }, tokens: 90000, sentTokens: 0, fate: 'left-out' }),
    'huge.ts · 90,000 tokens (left out: it does not fit the context)',
  );
  assert.equal(chipStatus({ id: 'x', kind: 'file', path: 'p', lines: { start: 1, end: 1 }, status: 'stale' }), 'changed since');
  assert.equal(chipStatus({ id: 'x', kind: 'file', path: 'p', lines: { start: 1, end: 1 }, status: 'deleted' }), 'deleted since');
  assert.equal(budgetLine(draft.budget), '1,500 of 32,768 tokens (4,096 kept for the reply)');
  assert.equal(
    budgetLine({ totalTokens: 30000, contextTokens: 32768, replyTokens: 4096, notSent: 4, estimated: true }),
    'about 30,000 of 32,768 tokens (4,096 kept for the reply) · 4 earlier messages are not sent to the model',
  );
  assert.equal(budgetLine(null), '');
  assert.equal(notSentMarker(1), '1 earlier message is not sent to the model');
});

test('the @ query is the word after an @ that starts a word, at the caret', () => {
  assert.deepEqual(atQuery('look at @src/ma', 15), { start: 8, query: 'src/ma' });
  assert.deepEqual(atQuery('@', 1), { start: 0, query: '' });
  assert.equal(atQuery('mail me at a@b', 14), undefined, 'an @ inside a word is not a query');
  assert.equal(atQuery('@foo bar', 8), undefined, 'the caret left the query');
  assert.deepEqual(atQuery('@foo bar', 4), { start: 0, query: 'foo' });
});

test('Regenerate is offered on the last reply once it is finished', () => {
  const streaming = opened();
  assert.equal(regenerableId(streaming), undefined, 'not while it streams');
  const done = reduce(streaming, { type: 'message', conversationId: 'c1', message: { ...reply, content: 'ok', state: 'done' } });
  assert.equal(regenerableId(done), 'm2');
  assert.equal(regenerableId(initialState()), undefined);
});

