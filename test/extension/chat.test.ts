// chat.test.ts - the chat panel's host side (extension/chat.ts): the page's messages are
// checked before use, a message streams its reply to the page piece by piece, Stop ends it
// as stopped, a new conversation takes the id the server gives it, a failed reply says why,
// Copy and Insert reach the editor side, and the history is restored from the backend;
// attachments (added, counted by the server's budget, refused with the reason, sent with
// the message and cleared), regenerate and edit (replaceFrom, with the message's own
// attachments), and sent attachments whose file changed or is gone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatAttachment, ChatBudget, SentAttachment } from '../../protocol/lsp';
import type { ConversationView, DraftView, ToWebview } from '../../protocol/webview';
import {
  ChatController,
  parseFromWebview,
  resendable,
  titleFrom,
  type ChatBackend,
  type ChatFiles,
  type ReplyResult,
  type TurnOptions,
} from '../../extension/chat';
import { describeChatAvailability } from '../../extension/engineText';

type Reply = (
  conversationId: string | null,
  text: string,
  onDelta: (channel: 'content' | 'reasoning', text: string) => void,
  signal: AbortSignal,
  options?: TurnOptions,
) => Promise<ReplyResult>;

/** A budget as the server would count it: 10 tokens per line of each attachment, all whole. */
function fakeBudget(options: TurnOptions): ChatBudget {
  const attachments = (options.attachments ?? []).map((a) => ({ tokens: a.text.split('\n').length * 10, sentTokens: a.text.split('\n').length * 10, fate: 'whole' as const }));
  const total = 50 + attachments.reduce((n, a) => n + a.sentTokens, 0);
  return { contextTokens: 1000, replyTokens: 250, messageTokens: 5, historyTokens: 0, attachments, totalTokens: total, notSent: 0, estimated: false };
}

function noFiles(): ChatFiles {
  return {
    attachFile: async (uri) => `${uri} was not attached: it is a binary file (12 bytes).`,
    suggestions: () => [],
    find: async () => [],
    status: async () => undefined,
  };
}

function setup(reply: Reply, stored: ConversationView[] = [], files: ChatFiles = noFiles(), sent: Record<string, SentAttachment[]> = {}) {
  const posted: ToWebview[] = [];
  const effects: string[] = [];
  const budgets: TurnOptions[] = [];
  let n = 0;
  const backend: ChatBackend = {
    availability: () => ({ canSend: true, notice: '', actions: [] }),
    completionModel: () => undefined,
    list: async () => stored.map(({ id, title, updatedAt }) => ({ id, title, updatedAt })),
    load: async (id) => structuredClone(stored.find((c) => c.id === id) ?? null),
    reply,
    delete: async (id) => void effects.push(`delete ${id}`),
    budget: async (_id, _text, options) => (budgets.push(structuredClone(options)), fakeBudget(options)),
    sentAttachments: (_c, m) => sent[m] ?? [],
  };
  const controller = new ChatController({
    backend,
    files,
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
  return { controller, posted, effects, budgets };
}

function lastDraft(posted: ToWebview[]): DraftView {
  const drafts = posted.flatMap((m) => (m.type === 'draft' ? [m.draft] : []));
  assert.ok(drafts.length > 0, 'a draft was posted');
  return drafts[drafts.length - 1];
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
  const last = posted.filter((m) => m.type === 'message').pop() ?? assert.fail('no message posted');
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
  const last = posted.filter((m) => m.type === 'message').pop() ?? assert.fail('no message posted');
  assert.ok(last.type === 'message');
  assert.equal(last.message.state, 'stopped');
  assert.equal(last.message.content, 'partial');
});

test('a failed reply says why in the message', async () => {
  const { controller, posted } = setup(async () => {
    throw new Error('No model is loaded.');
  });
  await controller.handle({ type: 'send', conversationId: null, text: 'hi' });
  const last = posted.filter((m) => m.type === 'message').pop() ?? assert.fail('no message posted');
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
      budget: async () => null,
      sentAttachments: () => [],
    },
    files: noFiles(),
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
  const last = posted.filter((m) => m.type === 'message').pop() ?? assert.fail('no message posted');
  assert.ok(last.type === 'message');
  assert.match(last.message.note ?? '', /^Another window of this workspace/);
});

const selection: ChatAttachment = { kind: 'selection', path: 'src/a.ts', uri: 'file:///w/src/a.ts', lines: { start: 3, end: 4 }, text: 'let a = 1;\nlet b = 2;' };

test('an added selection shows as a chip with the server’s count, goes with the next message, and the draft is cleared', async () => {
  let sentWith: TurnOptions | undefined;
  const { controller, posted, budgets } = setup(async (_id, _text, _onDelta, _signal, options) => {
    sentWith = options;
    return { conversationId: 'c1', reply: { id: 'r', role: 'assistant', content: 'ok', reasoning: '', state: 'done' } };
  });
  await controller.attach(selection);
  const draft = lastDraft(posted);
  assert.deepEqual(
    draft.attachments.map((a) => [a.path, a.lines, a.tokens, a.fate]),
    [['src/a.ts', { start: 3, end: 4 }, 20, 'whole']],
  );
  assert.deepEqual(draft.budget, { totalTokens: 70, contextTokens: 1000, replyTokens: 250, notSent: 0, estimated: false });
  assert.deepEqual(budgets[budgets.length - 1].attachments, [selection], 'the budget counts what would be sent');
  await controller.handle({ type: 'send', conversationId: null, text: 'why?' });
  assert.deepEqual(sentWith?.attachments, [selection], 'the message carries the attachment');
  const user = posted.flatMap((m) => (m.type === 'snapshot' ? (m.current?.messages ?? []) : [])).find((m) => m.role === 'user');
  assert.deepEqual(user?.attachments?.map((a) => [a.path, a.tokens]), [['src/a.ts', 20]], 'the sent message shows its chip');
  assert.deepEqual(lastDraft(posted).attachments, [], 'the next message starts without it');
});

test('a refused file says why in the composer and attaches nothing; a removed chip is gone', async () => {
  const { controller, posted } = setup(async () => assert.fail('no reply expected'));
  await controller.handle({ type: 'attachFile', uri: 'file:///w/logo.png' });
  assert.equal(lastDraft(posted).notice, 'file:///w/logo.png was not attached: it is a binary file (12 bytes).');
  assert.deepEqual(lastDraft(posted).attachments, []);
  await controller.attach(selection);
  const id = lastDraft(posted).attachments[0].id;
  await controller.handle({ type: 'removeAttachment', id });
  assert.deepEqual(lastDraft(posted).attachments, []);
  assert.equal(lastDraft(posted).notice, '');
});

test('regenerate resends the last user message with its attachments as sent; edit replaces a message and what follows', async () => {
  const cut: SentAttachment = { ...selection, lines: { start: 3, end: 40 }, text: 'let a = 1;\nlet b = 2;', tokens: 400, sentTokens: 20, fate: 'cut' };
  const left: SentAttachment = { ...selection, path: 'b.ts', text: '', tokens: 900, sentTokens: 0, fate: 'left-out' };
  const stored: ConversationView[] = [
    {
      id: 'c',
      title: 't',
      updatedAt: 1,
      messages: [
        { id: 'u1', role: 'user', content: 'first', reasoning: '', state: 'done' },
        { id: 'a1', role: 'assistant', content: 'one', reasoning: '', state: 'done' },
        { id: 'u2', role: 'user', content: 'second', reasoning: '', state: 'done' },
        { id: 'a2', role: 'assistant', content: 'two', reasoning: '', state: 'done' },
      ],
    },
  ];
  const calls: Array<[string | null, string, TurnOptions | undefined]> = [];
  const { controller, posted } = setup(
    async (id, text, _d, _s, options) => {
      calls.push([id, text, options]);
      // As the server records it: the replaced message and those after it go.
      const c = stored[0];
      const at = c.messages.findIndex((m) => m.id === options?.replaceFrom);
      c.messages = [
        ...c.messages.slice(0, at),
        { id: `u${calls.length}x`, role: 'user', content: text, reasoning: '', state: 'done' },
        { id: `a${calls.length}x`, role: 'assistant', content: 'again', reasoning: '', state: 'done' },
      ];
      return { conversationId: 'c', reply: { id: 'r', role: 'assistant', content: 'again', reasoning: '', state: 'done' } };
    },
    stored,
    noFiles(),
    { u2: [cut, left] },
  );
  await controller.handle({ type: 'ready' });
  await controller.handle({ type: 'regenerate', conversationId: 'c' });
  assert.deepEqual(calls[0], ['c', 'second', { attachments: [resendable(cut)], replaceFrom: 'u2' }]);
  assert.deepEqual(resendable(cut)?.lines, { start: 3, end: 4 }, 'a cut attachment is sent again as the lines it carried');
  assert.equal(resendable(left), undefined, 'a left-out one is not sent again');
  const shown = posted.filter((m) => m.type === 'snapshot').pop();
  assert.ok(shown?.type === 'snapshot');
  assert.deepEqual(shown.current?.messages.map((m) => m.content), ['first', 'one', 'second', 'again'], 'the old reply is replaced, not kept');

  await controller.handle({ type: 'edit', conversationId: 'c', messageId: 'u1', text: 'first, edited' });
  assert.deepEqual(calls[1], ['c', 'first, edited', { attachments: [], replaceFrom: 'u1' }]);
  const edited = posted.filter((m) => m.type === 'snapshot').pop();
  assert.ok(edited?.type === 'snapshot');
  assert.deepEqual(edited.current?.messages.map((m) => m.content), ['first, edited', 'again']);
});

test('a sent attachment whose file changed is marked stale, one whose file is gone deleted', async () => {
  const a: SentAttachment = { ...selection, tokens: 20, sentTokens: 20, fate: 'whole' };
  const b: SentAttachment = { ...selection, uri: 'file:///w/gone.ts', path: 'gone.ts', tokens: 20, sentTokens: 20, fate: 'whole' };
  const stored: ConversationView[] = [
    {
      id: 'c',
      title: 't',
      updatedAt: 1,
      messages: [
        {
          id: 'u1',
          role: 'user',
          content: 'q',
          reasoning: '',
          state: 'done',
          attachments: [
            { id: '0', kind: 'selection', path: 'src/a.ts', lines: a.lines },
            { id: '1', kind: 'selection', path: 'gone.ts', lines: b.lines },
          ],
        },
      ],
    },
  ];
  const files: ChatFiles = { ...noFiles(), status: async (x) => (x.uri === b.uri ? 'deleted' : 'stale') };
  const { controller, posted } = setup(async () => assert.fail('no reply expected'), stored, files, { u1: [a, b] });
  await controller.handle({ type: 'ready' });
  const shown = posted.filter((m) => m.type === 'snapshot').pop();
  assert.ok(shown?.type === 'snapshot');
  assert.deepEqual(shown.current?.messages[0].attachments?.map((x) => x.status), ['stale', 'deleted']);
});

test('parseFromWebview accepts the context messages well-formed and nothing else', () => {
  assert.deepEqual(parseFromWebview({ type: 'attachFile', uri: 'file:///a' }), { type: 'attachFile', uri: 'file:///a' });
  assert.deepEqual(parseFromWebview({ type: 'edit', conversationId: 'c', messageId: 'm', text: 't' }), { type: 'edit', conversationId: 'c', messageId: 'm', text: 't' });
  assert.deepEqual(parseFromWebview({ type: 'regenerate', conversationId: 'c' }), { type: 'regenerate', conversationId: 'c' });
  for (const bad of [{ type: 'attachFile' }, { type: 'edit', conversationId: 'c', text: 't' }, { type: 'findFiles', query: 3 }, { type: 'removeAttachment' }]) {
    assert.equal(parseFromWebview(bad), undefined, JSON.stringify(bad));
  }
});

test('a file attached whole is read again when the message is sent; one gone since goes as attached, and the reply says so', async () => {
  const file = (text: string): ChatAttachment => ({ kind: 'file', path: 'src/b.ts', uri: 'file:///w/src/b.ts', lines: { start: 1, end: text.split('\n').length }, text });
  let disk: string | undefined = 'v1';
  const files: ChatFiles = { ...noFiles(), attachFile: async () => (disk === undefined ? 'src/b.ts was not attached: it no longer exists.' : file(disk)) };
  const sent: TurnOptions[] = [];
  const { controller, posted } = setup(
    async (_id, _text, _d, _s, options) => {
      sent.push(structuredClone(options ?? {}));
      return { conversationId: 'c', reply: { id: 'r', role: 'assistant', content: 'ok', reasoning: '', state: 'done' } };
    },
    [],
    files,
  );
  await controller.handle({ type: 'attachFile', uri: 'file:///w/src/b.ts' });
  disk = 'v2\nmore';
  await controller.handle({ type: 'send', conversationId: null, text: 'look' });
  assert.deepEqual(sent[0].attachments, [file('v2\nmore')], 'the file as it is when sent');
  await controller.handle({ type: 'attachFile', uri: 'file:///w/src/b.ts' });
  disk = undefined;
  await controller.handle({ type: 'send', conversationId: 'c', text: 'again' });
  assert.deepEqual(sent[1].attachments, [file('v2\nmore')], 'gone since: the text it had');
  const last = posted.filter((m) => m.type === 'message').pop();
  assert.ok(last?.type === 'message');
  assert.match(last.message.note ?? '', /src\/b\.ts was not attached: it no longer exists\. The text it had when it was attached was sent instead\./);
});


test('@ answers that cross arrive as the last query’s only', async () => {
  const answers = new Map<string, (files: { uri: string; path: string }[]) => void>();
  const files: ChatFiles = { ...noFiles(), find: (q) => new Promise((resolve) => answers.set(q, resolve)) };
  const { controller, posted } = setup(async () => assert.fail('no reply expected'), [], files);
  const slow = controller.handle({ type: 'findFiles', query: 'lo' });
  const fast = controller.handle({ type: 'findFiles', query: 'log' });
  answers.get('log')?.([{ uri: 'file:///w/logo.bin', path: 'logo.bin' }]);
  await fast;
  answers.get('lo')?.([{ uri: 'file:///w/lo.ts', path: 'lo.ts' }]);
  await slow;
  assert.deepEqual(
    posted.flatMap((m) => (m.type === 'fileMatches' ? [m.query] : [])),
    ['log'],
  );
});
