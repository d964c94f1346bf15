// main.ts - the chat view's page script (runs in the sandboxed webview, not in Node). It
// renders the state that state.ts keeps from the host's messages, and posts the user's
// actions back as FromWebview messages. Reasoning streams in view and folds away once the
// answer starts; a reply whose thinking never ended is shown as the answer. Code blocks are
// highlighted and carry Copy, Insert and Apply (a diff against their file, or the editor). A
// reply from a model not trained for chat is plain text with a label saying so. A user
// message shows its attachments and can be edited and sent again; the last reply can be
// regenerated; where the conversation's sent history starts, a marker says how many earlier
// messages are not sent. The context controls above the input are context.ts. It has no
// access to the engine or the files; the only thing it keeps itself (vscode.setState) is the draft.
import type { ChatActionView, ChatMessageView, FromWebview, ToWebview } from '../protocol/webview';
import { attachmentChip, ContextBar } from './context';
import { highlightBlocks, renderMarkdown } from './markdown';
import { initialState, notSentMarker, reduce, regenerableId, shownParts, streamingMessageId, type PageState } from './state';

interface VsCodeApi {
  postMessage(message: FromWebview): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscodeApi = acquireVsCodeApi();
let state: PageState = initialState();

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// The page's fixed frame: conversation bar, notice, messages, composer.
const app = document.getElementById('app') ?? document.body;
const bar = el('div', { class: 'bar' });
const picker = el('select', { id: 'conversations', 'aria-label': 'Conversations' });
const newButton = el('button', { id: 'new-chat', class: 'secondary', title: 'New chat' }, 'New chat');
const deleteButton = el('button', { id: 'delete-chat', class: 'secondary', title: 'Delete this conversation' }, 'Delete');
bar.append(picker, newButton, deleteButton);
const notice = el('div', { id: 'notice', role: 'status' });
const noticeText = el('div', { class: 'notice-text' });
const noticeActions = el('div', { class: 'notice-actions' });
notice.append(noticeText, noticeActions);
const messages = el('div', { id: 'messages', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation' });
const composer = el('div', { class: 'composer' });
const input = el('textarea', { id: 'input', rows: '3', placeholder: 'Ask K3 (Enter sends, Shift+Enter for a new line)', 'aria-label': 'Message' });
const send = el('button', { id: 'send' }, 'Send');
const stop = el('button', { id: 'stop', class: 'secondary' }, 'Stop');
composer.append(input, send, stop);
const contextBar = new ContextBar(input, (m) => post(m));
const editingBanner = el('div', { class: 'editing', id: 'editing' });
app.append(bar, notice, messages, editingBanner, contextBar.element, composer);

/** The user message being edited: Send replaces it and every later one. */
let editing: { conversationId: string; messageId: string } | null = null;

const saved = vscodeApi.getState() as { draft?: unknown } | undefined;
if (typeof saved?.draft === 'string') input.value = saved.draft;

/** Reasoning sections the user opened, by message id, kept across re-renders. */
const openReasoning = new Set<string>();

function renderMessage(m: ChatMessageView, regenerable: boolean, streaming: boolean): HTMLElement {
  const box = el('div', { class: `message ${m.role}`, 'data-id': m.id, 'data-state': m.state });
  const head = el('div', { class: 'head' });
  head.append(el('span', { class: 'who' }, m.role === 'user' ? 'You' : m.completionModel ?? 'K3'));
  if (m.role === 'user' && !streaming) head.append(el('button', { class: 'link', 'data-edit': m.id, title: 'Edit this message and send it again' }, 'Edit'));
  if (regenerable) head.append(el('button', { class: 'link', 'data-regenerate': m.id, title: 'Ask again: this reply is replaced' }, 'Regenerate'));
  box.append(head);
  if (m.attachments?.length) {
    const chips = el('div', { class: 'chips sent' });
    chips.append(...m.attachments.map((a) => attachmentChip(a, false)));
    box.append(chips);
  }
  const { answer, reasoning, thinking: thinkingNow } = shownParts(m);
  if (reasoning) {
    const details = el('details', { class: 'reasoning' });
    if (thinkingNow || openReasoning.has(m.id)) details.open = true;
    details.addEventListener('toggle', () => {
      if (details.open) openReasoning.add(m.id);
      else openReasoning.delete(m.id);
    });
    details.append(el('summary', {}, thinkingNow ? 'Thinking…' : 'Reasoning'));
    const body = el('div', { class: 'reasoning-body' });
    body.innerHTML = renderMarkdown(reasoning);
    details.append(body);
    box.append(details);
  }
  const content = el('div', { class: 'content' });
  if (m.role === 'user') content.textContent = m.content;
  else if (m.completionModel) {
    content.classList.add('plain');
    content.textContent = answer;
  } else {
    content.innerHTML = renderMarkdown(answer);
    highlightBlocks(content);
    for (const pre of Array.from(content.querySelectorAll('pre'))) {
      const tools = el('div', { class: 'code-tools' });
      const target = pre.getAttribute('data-path');
      if (target) tools.append(el('span', { class: 'code-path', title: 'The file Apply changes' }, target));
      tools.append(
        el('button', { class: 'secondary', 'data-action': 'copy', title: 'Copy the code' }, 'Copy'),
        el('button', { class: 'secondary', 'data-action': 'insert', title: 'Insert the code at the cursor' }, 'Insert'),
        el(
          'button',
          { class: 'secondary', 'data-action': 'apply', title: target ? `Show the code as a diff against ${target} to accept or reject` : 'Show the code as a diff against the editor (its selection, else the whole file) to accept or reject' },
          'Apply',
        ),
      );
      pre.before(tools);
    }
  }
  box.append(content);
  if (m.completionModel) {
    box.append(el('div', { class: 'note completion-model' }, `${m.completionModel} is a code-completion model, not trained for chat: this is how it continues the text, not an answer.`));
  }
  if (m.state === 'streaming' && !m.content && !m.reasoning) box.append(el('div', { class: 'pending' }, 'Waiting for the engine…'));
  if (m.state === 'stopped') box.append(el('div', { class: 'note' }, 'Stopped.'));
  if (m.note) box.append(el('div', { class: 'note' }, m.note));
  if (m.state === 'error') box.append(el('div', { class: 'note error' }, m.error ?? 'The reply failed.'));
  return box;
}

function nearBottom(): boolean {
  return messages.scrollHeight - messages.scrollTop - messages.clientHeight < 40;
}

let lastFocusRequests = 0;

function render(): void {
  const stick = nearBottom();
  const current = state.current;
  picker.replaceChildren(el('option', { value: '' }, current ? 'New chat' : 'New chat (not sent yet)'));
  for (const c of [...state.conversations].sort((a, b) => b.updatedAt - a.updatedAt)) {
    picker.append(el('option', { value: c.id }, c.title));
  }
  picker.value = current?.id ?? '';
  picker.disabled = state.conversations.length === 0;
  deleteButton.disabled = !current;

  noticeText.textContent = state.availability.notice;
  noticeActions.replaceChildren(
    ...state.availability.actions.map((a) => el('button', { class: 'secondary', 'data-notice-action': a.action }, a.title)),
  );
  notice.hidden = state.availability.notice === '';
  const streamingNow = streamingMessageId(state) !== undefined;
  const regenerable = streamingNow ? undefined : regenerableId(state);
  const shown = (current?.messages ?? []).map((m) => renderMessage(m, m.id === regenerable, streamingNow));
  const notSent = current?.notSent ?? 0;
  if (notSent > 0) shown.splice(Math.min(notSent, shown.length), 0, el('div', { class: 'not-sent', id: 'not-sent', role: 'note' }, notSentMarker(notSent)));
  messages.replaceChildren(...shown);
  if (!current || current.messages.length === 0) {
    messages.append(el('div', { class: 'empty' }, 'Ask about your code. Replies are computed on this machine.'));
  }
  const streaming = streamingNow;
  if (editing && editing.conversationId !== current?.id) editing = null;
  editingBanner.textContent = editing ? 'Editing a message: Send replaces it and every message after it (Esc cancels).' : '';
  editingBanner.hidden = !editing;
  contextBar.render(state);
  stop.hidden = !streaming;
  send.disabled = !state.availability.canSend || streaming;
  if (stick) messages.scrollTop = messages.scrollHeight;
  if (state.focusRequests !== lastFocusRequests) {
    lastFocusRequests = state.focusRequests;
    input.focus();
  }
}

// Streaming deltas arrive many times a second; the page redraws at most once a frame.
let frame = 0;
function scheduleRender(): void {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

function post(message: FromWebview): void {
  vscodeApi.postMessage(message);
}

function submit(): void {
  const text = input.value.trim();
  if (!text || send.disabled) return;
  if (editing) post({ type: 'edit', conversationId: editing.conversationId, messageId: editing.messageId, text });
  else post({ type: 'send', conversationId: state.current?.id ?? null, text });
  editing = null;
  input.value = '';
  vscodeApi.setState({ draft: '' });
  render();
}

// The budget counts the draft as it is typed, a moment after the typing pauses.
let draftTimer: ReturnType<typeof setTimeout> | undefined;
function draftChanged(): void {
  vscodeApi.setState({ draft: input.value });
  contextBar.inputChanged(state);
  if (draftTimer) clearTimeout(draftTimer);
  draftTimer = setTimeout(() => post({ type: 'draftText', text: input.value }), 300);
}

input.addEventListener('keydown', (e) => {
  if (!e.isComposing && contextBar.key(e, state)) {
    e.preventDefault();
  } else if (e.key === 'Escape' && editing) {
    e.preventDefault();
    editing = null;
    input.value = '';
    render();
  } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    submit();
  } else if (e.key === 'Escape' && state.current && streamingMessageId(state)) {
    e.preventDefault();
    post({ type: 'stop', conversationId: state.current.id });
  }
});
input.addEventListener('input', draftChanged);
send.addEventListener('click', submit);
stop.addEventListener('click', () => state.current && post({ type: 'stop', conversationId: state.current.id }));
newButton.addEventListener('click', () => post({ type: 'newChat' }));
noticeActions.addEventListener('click', (e) => {
  const action = (e.target as HTMLElement).closest('button')?.getAttribute('data-notice-action');
  // The host checks the name again (parseFromWebview).
  if (action) post({ type: 'action', action: action as ChatActionView });
});
deleteButton.addEventListener('click', () => state.current && post({ type: 'deleteConversation', conversationId: state.current.id }));
picker.addEventListener('change', () => {
  if (picker.value) post({ type: 'openConversation', conversationId: picker.value });
  else post({ type: 'newChat' });
});
messages.addEventListener('click', (e) => {
  const target = e.target as HTMLElement;
  const current = state.current;
  const edit = target.closest('[data-edit]')?.getAttribute('data-edit');
  const message = current?.messages.find((m) => m.id === edit);
  if (current && message) {
    editing = { conversationId: current.id, messageId: message.id };
    input.value = message.content;
    render();
    input.focus();
    return;
  }
  if (current && target.closest('[data-regenerate]')) {
    post({ type: 'regenerate', conversationId: current.id });
    return;
  }
  const button = target.closest('button[data-action]');
  const pre = button?.parentElement?.nextElementSibling;
  const code = pre?.querySelector('code')?.textContent;
  if (!button || !pre || code === undefined || code === null) return;
  const action = button.getAttribute('data-action');
  if (action === 'apply') {
    const path = pre.getAttribute('data-path');
    post(path ? { type: 'apply', text: code, path } : { type: 'apply', text: code });
  } else post(action === 'insert' ? { type: 'insert', text: code } : { type: 'copy', text: code });
});

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
  state = reduce(state, event.data);
  if (event.data.type === 'delta') scheduleRender();
  else render();
});

render();
post({ type: 'ready' });
