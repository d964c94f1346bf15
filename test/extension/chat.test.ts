// chat.test.ts - the chat panel's host side (extension/chat.ts): the page's messages are
// checked before use, a message streams its reply to the page piece by piece, Stop ends it
// as stopped, a new conversation takes the id the server gives it, a failed reply says why,
// Copy and Insert reach the editor side, and the history is restored from the backend.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConversationView, ToWebview } from '../../protocol/webview';
import { ChatController, parseFromWebview, titleFrom, type ChatBackend, type ReplyResult } from '../../extension/chat';
import { describeChatAvailability } from '../../extension/engineText';

type Reply = (
  conversationId: string | null,
  text: string,
  onDelta: (channel: 'content' | 'reasoning', text: string) => void,
  signal: AbortSignal,
) => Promise<ReplyResult>;

function setup(reply: Reply, stored: ConversationView[] = []) {
  const posted: ToWebview[] = [];
  const effects: string[] = [];
  let n = 0;
  const backend: ChatBackend = {
    availability: () => ({ canSend: true, notice: '', actions: [] }),
    completionModel: () => undefined,
    list: async () => stored.map(({ id, title, updatedAt }) => ({ id, title, updatedAt })),
    load: async (id) => structuredClone(stored.find((c) => c.id === id) ?? null),
    reply,
    delete: async (id) => void effects.push(`delete ${id}`),
  };
  const controller = new ChatController({
    backend,
    post: (m) => posted.push(structuredClone(m)),
    copy: async (t) => void effects.push(`copy ${t}`),
    insert: async (t) => (effects.push(`insert ${t}`), true),
    apply: async (t, file) => void effects.push(`apply ${t}${file ? ` to ${file}` : ''}`),
    inform: (m) => void effects.push(`inform ${m}`),
    thinking: (a) => void effects.push(a ? 'thinking' : 'idle'),
    speed: (tps) => void effects.push(`speed ${tps}`),
    runAction: (a) => void effects.push(`action ${a}`),
    newId: () => `id${++n}`,
    now: () => 1000,
  });
  return { controller, posted, effects };
}

test('parseFromWebview accepts each well-formed message and nothing else', () => {
  assert.deepEqual(parseFromWebview({ type: 'ready' }), { type: 'ready' });
  assert.deepEqual(parseFromWebview({ type: 'send', conversationId: null, text: 'hi', extra: 1 }), {
    type: 'send',
    conversationId: null,
    text: 'hi',
  });
  assert.deepEqual(parseFromWebview({ type: 'stop', conversationId: 'c' }), { type: 'stop', conversationId: 'c' });
  assert.deepEqual(parseFromWebview({ type: 'insert', text: 'x' }), { type: 'insert', text: 'x' });
  assert.deepEqual(parseFromWebview({ type: 'apply', text: 'x' }), { type: 'apply', text: 'x' });
  assert.deepEqual(parseFromWebview({ type: 'apply', text: 'x', path: 'src/a.py' }), { type: 'apply', text: 'x', path: 'src/a.py' });
  const bads: unknown[] = [null, 'send', { type: 'send', text: 3, conversationId: null }, { type: 'stop' }, { type: 'copy' }, { type: 'eval', code: '1' }];
  bads.push({ type: 'apply' }, { type: 'apply', text: 'x', path: 7 });
  for (const bad of bads) {
    assert.equal(parseFromWebview(bad), undefined, JSON.stringify(bad));
  }
});

test('a message streams its reply to the page and the new conversation takes the server id', async () => {
  const { controller, posted, effects } = setup(async (id, text, onDelta) => {
    assert.equal(id, null);
    assert.equal(text, 'Explain x');
    onDelta('reasoning', 'hm');
    onDelta('content', 'It ');
    onDelta('content', 'is.');
    return { conversationId: 'srv1', reply: { id: 'r', role: 'assistant', content: 'It is.', reasoning: 'hm', state: 'done' }, tokensPerSecond: 3.5 };
  });
  await controller.handle({ type: 'send', conversationId: null, text: '  Explain x ' });
  const deltas = posted.filter((m) => m.type === 'delta').map((m) => (m.type === 'delta' ? `${m.channel}:${m.text}` : ''));
  assert.deepEqual(deltas, ['reasoning:hm', 'content:It ', 'content:is.']);
  const last = posted[posted.length - 1];
  assert.equal(last.type, 'message');
  assert.ok(last.type === 'message' && last.message.state === 'done' && last.message.content === 'It is.');
  assert.equal(last.type === 'message' && last.conversationId, 'srv1');
  const snapshots = posted.filter((m) => m.type === 'snapshot');
  const final = snapshots[snapshots.length - 1];
  assert.ok(final.type === 'snapshot');
  assert.deepEqual(final.conversations.map((c) => c.id), ['srv1']);
  assert.equal(final.current?.title, 'Explain x');
  assert.deepEqual(final.current?.messages.map((m) => m.role), ['user', 'assistant']);
  assert.deepEqual(effects, ['thinking', 'speed 3.5', 'idle']);
});

test('Stop aborts the reply and the message ends as stopped', async () => {
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const { controller, posted } = setup(
    (_id, _text, onDelta, signal) =>
      new Promise((_resolve, reject) => {
        onDelta('content', 'partial');
        started();
        signal.addEventListener('abort', () => reject(new Error('cancelled')));
      }),
  );
  const sending = controller.handle({ type: 'send', conversationId: null, text: 'go' });
  await running;
  const snapshot = posted.find((m) => m.type === 'snapshot');
  assert.ok(snapshot?.type === 'snapshot' && snapshot.current);
  await controller.handle({ type: 'stop', conversationId: snapshot.current.id });
  await sending;
  const last = posted[posted.length - 1];
  assert.ok(last.type === 'message');
  assert.equal(last.message.state, 'stopped');
  assert.equal(last.message.content, 'partial');
});

test('a failed reply says why in the message', async () => {
  const { controller, posted } = setup(async () => {
    throw new Error('No model is loaded.');
  });
  await controller.handle({ type: 'send', conversationId: null, text: 'hi' });
  const last = posted[posted.length - 1];
  assert.ok(last.type === 'message');
  assert.equal(last.message.state, 'error');
  assert.equal(last.message.error, 'No model is loaded.');
});

test('ready restores the newest conversation from the backend; open, delete, copy, insert and apply do their part', async () => {
  const stored: ConversationView[] = [
    { id: 'old', title: 'Old', updatedAt: 1, messages: [] },
    { id: 'new', title: 'New', updatedAt: 5, messages: [{ id: 'm', role: 'user', content: 'q', reasoning: '', state: 'done' }] },
  ];
  const { controller, posted, effects } = setup(async () => assert.fail('no reply expected'), stored);
  await controller.handle({ type: 'ready' });
  const first = posted[0];
  assert.ok(first.type === 'snapshot');
  assert.equal(first.current?.id, 'new');
  assert.equal(first.conversations.length, 2);
  await controller.handle({ type: 'openConversation', conversationId: 'old' });
  const opened = posted[posted.length - 1];
  assert.ok(opened.type === 'snapshot' && opened.current?.id === 'old');
  await controller.handle({ type: 'deleteConversation', conversationId: 'old' });
  const after = posted[posted.length - 1];
  assert.ok(after.type === 'snapshot' && after.current === null);
  assert.deepEqual(after.conversations.map((c) => c.id), ['new']);
  await controller.handle({ type: 'copy', text: 'a()' });
  await controller.handle({ type: 'insert', text: 'b()' });
  await controller.handle({ type: 'apply', text: 'c()', path: 'src/c.py' });
  assert.deepEqual(effects, ['delete old', 'copy a()', 'insert b()', 'apply c() to src/c.py']);
  await controller.handle({ type: 'newChat' });
  assert.deepEqual(posted.slice(-1), [{ type: 'focusInput' }]);
});

test('a conversation title is the first line of the first message, shortened', () => {
  assert.equal(titleFrom('  How do I sort?\nmore'), 'How do I sort?');
  assert.equal(titleFrom('x'.repeat(80)).length, 60);
  assert.equal(titleFrom('   '), 'New chat');
});

test('the notice says a completion model cannot chat, with the ways out, and that history cannot be kept', () => {
  const mini = { name: 'k3-mini', path: '/m', bytes: 1, chat: false };
  const ready = describeChatAvailability({ engine: { kind: 'ready' }, model: mini }, true);
  assert.equal(ready.canSend, true, 'sending anyway is allowed');
  assert.match(ready.notice, /^k3-mini is a code-completion model, not trained for chat: it continues a message as code/);
  assert.deepEqual(ready.actions.map((a) => a.action), ['choose-chat-backend', 'choose-completion-backend']);
  const k3 = describeChatAvailability({ engine: { kind: 'ready' }, model: { ...mini, name: 'K3', chat: true } }, true);
  assert.deepEqual(k3, { canSend: true, notice: '', actions: [] });
  const loading = describeChatAvailability({ engine: { kind: 'loading', startedAt: 0, percent: 40 }, storageProblem: 'History cannot be saved.' }, true);
  assert.equal(loading.canSend, false);
  assert.equal(loading.notice, 'The model is loading (40%). History cannot be saved.');
  assert.equal(describeChatAvailability({ engine: { kind: 'ready' } }, false).canSend, false, 'no server, no sending');
});

test('a notice button runs its action, and only the known actions are accepted from the page', async () => {
  const { controller, effects } = setup(async () => assert.fail('no reply expected'));
  await controller.handle({ type: 'action', action: 'open-remote-settings' });
  assert.deepEqual(effects, ['action open-remote-settings']);
  assert.deepEqual(parseFromWebview({ type: 'action', action: 'choose-model-folder' }), { type: 'action', action: 'choose-model-folder' });
  assert.deepEqual(parseFromWebview({ type: 'action', action: 'choose-chat-backend' }), { type: 'action', action: 'choose-chat-backend' });
  assert.equal(parseFromWebview({ type: 'action', action: 'rm -rf' }), undefined);
  assert.equal(parseFromWebview({ type: 'action', action: 'toString' }), undefined);
});

test('a reply from a completion model is labelled from its first piece, and by the server’s record at the end', async () => {
  const posted: ToWebview[] = [];
  const controller = new ChatController({
    backend: {
      availability: () => ({ canSend: true, notice: '', actions: [] }),
      completionModel: () => 'k3-mini',
      list: async () => [],
      load: async () => null,
      reply: async (_id, _text, onDelta) => {
        onDelta('content', '    return n');
        return { conversationId: 'c', reply: { id: 'r', role: 'assistant', content: '    return n', reasoning: '', state: 'done', completionModel: 'k3-mini' } };
      },
      delete: async () => undefined,
    },
    post: (m) => posted.push(structuredClone(m)),
    copy: async () => undefined,
    insert: async () => true,
    apply: async () => undefined,
    inform: () => undefined,
    thinking: () => undefined,
    speed: () => undefined,
    runAction: () => undefined,
    newId: () => 'id',
    now: () => 1,
  });
  await controller.handle({ type: 'send', conversationId: null, text: 'def f(n):' });
  const messages = posted.flatMap((m) => (m.type === 'message' && m.message.role === 'assistant' ? [m.message] : []));
  assert.equal(messages[0].completionModel, 'k3-mini', 'labelled while it streams');
  assert.equal(messages[messages.length - 1].completionModel, 'k3-mini');
});

test('what the server handled on the way is shown under the reply', async () => {
  const { controller, posted } = setup(async () => ({
    conversationId: 'c',
    reply: { id: 'r', role: 'assistant', content: 'ok', reasoning: '', state: 'done' },
    warnings: ['Another window of this workspace added to this conversation while this reply was written, so this reply was not kept.'],
  }));
  await controller.handle({ type: 'send', conversationId: null, text: 'hi' });
  const last = posted[posted.length - 1];
  assert.ok(last.type === 'message');
  assert.match(last.message.note ?? '', /^Another window of this workspace/);
});
