// state.test.ts - the chat page's state (webview/state.ts): a snapshot replaces everything,
// deltas stream into the right message of the open conversation only, a whole message
// replaces or appends, and focus requests are counted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatMessageView, ConversationView } from '../../protocol/webview';
import { initialState, reduce, shownParts, streamingMessageId } from '../../webview/state';

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
