// chat.ts - the chat panel's host logic: handles every message from the page (one
// exhaustive switch over FromWebview), keeps the open conversation and the next message's
// attachments (with their token counts and fates from the server's budget), streams
// replies from the chat backend to the page, stops, regenerates and edits them. The backend
// (the language server) owns the conversations and their persistence; this only mirrors
// what the page shows. Free of `vscode` values: chatView.ts supplies the webview,
// clipboard and editor, chatFiles.ts the files.
import type { ChatAttachment, ChatBudget, SentAttachment } from '../protocol/lsp';
import type {
  AttachmentView,
  DraftView,
  SuggestionView,
  ChatActionView,
  ChatAvailabilityView,
  ChatMessageView,
  ConversationSummaryView,
  ConversationView,
  FromWebview,
  ToWebview,
} from '../protocol/webview';

/** What a turn sends besides its text. */
export interface TurnOptions {
  attachments?: ChatAttachment[];
  /** Regenerate or edit: this user message and every later one are replaced. */
  replaceFrom?: string;
}

/** What a finished reply reports. */
export interface ReplyResult {
  /** The conversation's id as the server keeps it (new conversations get theirs here). */
  conversationId: string;
  /** The reply as recorded. */
  reply: ChatMessageView;
  tokensPerSecond?: number;
  /** What the server handled on the way and the user should read, as sentences. */
  warnings?: string[];
}

/** Where replies and history come from (the language server; chatBackend.ts). */
export interface ChatBackend {
  availability(): ChatAvailabilityView;
  /** The name of the model that answers now when it was not trained for chat (its replies
   * are labelled from the first piece on); undefined for a chat model. */
  completionModel(): string | undefined;
  list(): Promise<ConversationSummaryView[]>;
  load(conversationId: string): Promise<ConversationView | null>;
  /**
   * Sends `text` to `conversationId` (null: a new conversation), streaming the reply's
   * pieces to `onDelta`; resolves when the reply is complete or `signal` stopped it.
   */
  reply(
    conversationId: string | null,
    text: string,
    onDelta: (channel: 'content' | 'reasoning', text: string) => void,
    signal: AbortSignal,
    options?: TurnOptions,
  ): Promise<ReplyResult>;
  delete(conversationId: string): Promise<void>;
  /** What the turn would send (k3/chat/budget); null when the server cannot say now. */
  budget(conversationId: string | null, text: string, options: TurnOptions): Promise<ChatBudget | null>;
  /** A loaded message's attachments as they were sent (with their text). */
  sentAttachments(conversationId: string, messageId: string): SentAttachment[];
}

/** The editor's files, for attachments (chatFiles.ts). */
export interface ChatFiles {
  /** A workspace file as an attachment, or the sentence saying why it is refused. */
  attachFile(uri: string): Promise<ChatAttachment | string>;
  /** The open editors, the current one first. */
  suggestions(): SuggestionView[];
  /** Workspace files matching a fuzzy query, best first. */
  find(query: string): Promise<{ uri: string; path: string }[]>;
  /** Whether a sent attachment's lines changed (`stale`) or its file is gone (`deleted`). */
  status(a: SentAttachment): Promise<'stale' | 'deleted' | undefined>;
}

/** A sent attachment as it can be sent again (regenerate, edit): the lines it carried. */
export function resendable(a: SentAttachment): ChatAttachment | undefined {
  if (a.fate === 'left-out') return undefined;
  const lines = a.text.replace(/\r\n?/g, '\n').split('\n');
  const n = lines.length > 1 && lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
  const out: ChatAttachment = { kind: a.kind, path: a.path, uri: a.uri, lines: { start: a.lines.start, end: a.lines.start + n - 1 }, text: a.text };
  if (a.languageId !== undefined) out.languageId = a.languageId;
  return out;
}

/** A sent attachment as its chip shows it. */
export function sentAttachmentView(a: SentAttachment, i: number): AttachmentView {
  return { id: String(i), kind: a.kind, path: a.path, lines: a.lines, tokens: a.tokens, sentTokens: a.sentTokens, fate: a.fate };
}

export interface ChatHostDeps {
  backend: ChatBackend;
  files: ChatFiles;
  post(message: ToWebview): void;
  copy(text: string): Promise<void>;
  /** Inserts at the cursor of the last active editor; false when there is none. */
  insert(text: string): Promise<boolean>;
  /** Shows `text` as a diff against `path` or the last active editor (inline edit's Apply). */
  apply(text: string, path: string | undefined): Promise<void>;
  /** Tells the user something outside the panel (a short notification). */
  inform(message: string): void;
  /** A reply started (true) or ended (false); drives the status bar's thinking state. */
  thinking(active: boolean): void;
  /** The decode speed of a finished reply. */
  speed(tokensPerSecond: number): void;
  /** A button of the notice (choose a model folder, open the remote settings). */
  runAction(action: ChatActionView): void;
  newId(): string;
  now(): number;
}

/** A conversation's title: its first line, at most 60 characters. */
export function titleFrom(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 60 ? `${line.slice(0, 59)}…` : line || 'New chat';
}

export class ChatController {
  private current: ConversationView | null = null;
  private conversations: ConversationSummaryView[] = [];
  private readonly running = new Map<string, AbortController>();
  /** The next message's attachments, in the order attached. */
  private pending: (ChatAttachment & { id: string })[] = [];
  private draftText = '';
  private draftNotice = '';
  private budget: ChatBudget | null = null;
  /** Bumped by every draft change: a budget answer for an older draft is dropped. */
  private draftVersion = 0;
  /** Bumped by every `@` query: an answer to an older one is dropped. */
  private findRequests = 0;

  constructor(private readonly deps: ChatHostDeps) {}

  /** The one entry point for the page's messages. */
  async handle(message: FromWebview): Promise<void> {
    switch (message.type) {
      case 'ready':
        await this.refresh();
        return;
      case 'send':
        await this.send(message.conversationId, message.text);
        return;
      case 'stop':
        this.stop(message.conversationId);
        return;
      case 'newChat':
        this.newChat();
        return;
      case 'openConversation':
        await this.open(message.conversationId);
        return;
      case 'deleteConversation':
        await this.remove(message.conversationId);
        return;
      case 'copy':
        await this.deps.copy(message.text);
        return;
      case 'insert':
        if (!(await this.deps.insert(message.text))) this.deps.inform('Open an editor to insert the code into.');
        return;
      case 'apply':
        await this.deps.apply(message.text, message.path);
        return;
      case 'action':
        this.deps.runAction(message.action);
        return;
      case 'attachFile': {
        const a = await this.deps.files.attachFile(message.uri);
        if (typeof a === 'string') await this.refused(a);
        else await this.attach(a);
        return;
      }
      case 'removeAttachment':
        this.pending = this.pending.filter((a) => a.id !== message.id);
        this.draftNotice = '';
        await this.draftChanged();
        return;
      case 'findFiles': {
        // Queries come a keystroke apart and their answers may cross: only the last one's goes.
        const asked = ++this.findRequests;
        const files = await this.deps.files.find(message.query);
        if (asked === this.findRequests) this.deps.post({ type: 'fileMatches', query: message.query, files });
        return;
      }
      case 'draftText':
        this.draftText = message.text;
        await this.draftChanged();
        return;
      case 'regenerate':
        await this.regenerate(message.conversationId);
        return;
      case 'edit':
        await this.resend(message.conversationId, message.messageId, message.text);
        return;
      default: {
        const never: never = message;
        throw new Error(`unknown webview message ${JSON.stringify(never)}`);
      }
    }
  }

  /** Reloads the list (and the open conversation) from the backend and redraws the page. */
  async refresh(): Promise<void> {
    try {
      this.conversations = await this.deps.backend.list();
      if (!this.current && this.conversations.length > 0) {
        const newest = [...this.conversations].sort((a, b) => b.updatedAt - a.updatedAt)[0];
        this.current = await this.loadMarked(newest.id);
      } else if (this.current && !this.running.has(this.current.id)) {
        this.current = (await this.loadMarked(this.current.id)) ?? this.current;
      }
    } catch {
      // The backend cannot list now (no server yet); the page still shows what it has.
    }
    this.postSnapshot();
    await this.draftChanged();
  }

  /** Attaches code to the next message (K3: Add Selection to Chat, a chip, an `@` match). */
  async attach(a: ChatAttachment): Promise<void> {
    this.pending.push({ ...a, id: this.deps.newId() });
    this.draftNotice = '';
    await this.draftChanged();
    this.deps.post({ type: 'focusInput' });
  }

  /** The open editors changed: the suggestions with them. */
  editorsChanged(): void {
    this.postDraft();
  }

  private async refused(sentence: string): Promise<void> {
    this.draftNotice = sentence;
    this.postDraft();
  }

  /** A conversation from the backend, its sent attachments marked when their file changed
   * since or is gone. */
  private async loadMarked(id: string): Promise<ConversationView | null> {
    const c = await this.deps.backend.load(id);
    if (!c) return c;
    for (const m of c.messages) {
      if (!m.attachments?.length) continue;
      const sent = this.deps.backend.sentAttachments(c.id, m.id);
      for (const [i, view] of m.attachments.entries()) {
        const a = sent[i];
        const status = a ? await this.deps.files.status(a) : undefined;
        if (status) view.status = status;
      }
    }
    return c;
  }

  /** Counts the draft again (k3/chat/budget) and shows it. */
  private async draftChanged(): Promise<void> {
    const version = ++this.draftVersion;
    this.postDraft();
    const id = this.current && !this.current.id.startsWith('new-') ? this.current.id : null;
    let budget: ChatBudget | null = null;
    try {
      budget = await this.deps.backend.budget(id, this.draftText, { attachments: this.pending.map(({ id: _id, ...a }) => a) });
    } catch {
      budget = null; // no server now, or the draft cannot be counted: the chips show no counts
    }
    if (version !== this.draftVersion) return;
    this.budget = budget;
    this.postDraft();
  }

  private draftView(): DraftView {
    const attached = new Set(this.pending.filter((a) => a.kind === 'file').map((a) => a.uri));
    const b = this.budget && this.budget.attachments.length === this.pending.length ? this.budget : null;
    return {
      attachments: this.pending.map((a, i): AttachmentView => {
        const view: AttachmentView = { id: a.id, kind: a.kind, path: a.path, lines: a.lines };
        const counted = b?.attachments[i];
        if (counted) Object.assign(view, { tokens: counted.tokens, sentTokens: counted.sentTokens, fate: counted.fate });
        return view;
      }),
      suggestions: this.deps.files.suggestions().filter((s) => !attached.has(s.uri)),
      budget: this.budget
        ? {
            totalTokens: this.budget.totalTokens,
            contextTokens: this.budget.contextTokens,
            replyTokens: this.budget.replyTokens,
            notSent: this.budget.notSent,
            estimated: this.budget.estimated,
          }
        : null,
      notice: this.draftNotice,
    };
  }

  private postDraft(): void {
    this.deps.post({ type: 'draft', draft: this.draftView() });
  }

  newChat(): void {
    this.current = null;
    this.postSnapshot();
    this.deps.post({ type: 'focusInput' });
  }

  /** Forgets everything (after the workspace state was cleared). */
  reset(): void {
    for (const c of this.running.values()) c.abort();
    this.running.clear();
    this.current = null;
    this.conversations = [];
    this.postSnapshot();
  }

  availabilityChanged(): void {
    this.deps.post({ type: 'availability', availability: this.deps.backend.availability() });
  }

  private postSnapshot(): void {
    this.deps.post({
      type: 'snapshot',
      conversations: this.conversations,
      current: this.current,
      availability: this.deps.backend.availability(),
    });
  }

  private async open(id: string): Promise<void> {
    const conversation = await this.deps.backend.load(id);
    if (conversation) this.current = conversation;
    else this.deps.inform('That conversation is no longer there.');
    this.postSnapshot();
  }

  private async remove(id: string): Promise<void> {
    this.stop(id);
    await this.deps.backend.delete(id);
    this.conversations = this.conversations.filter((c) => c.id !== id);
    if (this.current?.id === id) this.current = null;
    this.postSnapshot();
  }

  private stop(id: string): void {
    this.running.get(id)?.abort();
  }

  /** The draft's attachments as they are now: a file attached whole is read again; one
   * that can no longer be read goes as it was attached, and a note under the reply says so.
   * A selection keeps the lines the user selected. */
  private async rereadPending(): Promise<{ attachments: ChatAttachment[]; notes: string[] }> {
    const attachments: ChatAttachment[] = [];
    const notes: string[] = [];
    for (const { id: _id, ...a } of this.pending) {
      if (a.kind !== 'file') {
        attachments.push(a);
        continue;
      }
      const now = await this.deps.files.attachFile(a.uri);
      if (typeof now === 'string') {
        attachments.push(a);
        notes.push(`${now} The text it had when it was attached was sent instead.`);
      } else {
        attachments.push(now);
      }
    }
    return { attachments, notes };
  }

  /** Regenerate: the conversation's last user message again, with what it carried. */
  private async regenerate(conversationId: string): Promise<void> {
    const c = this.current?.id === conversationId ? this.current : await this.loadMarked(conversationId);
    const last = c ? [...c.messages].reverse().find((m) => m.role === 'user') : undefined;
    if (!c || !last) return this.deps.inform('There is no message to ask again.');
    await this.resend(conversationId, last.id, last.content);
  }

  /** Sends `text` in place of user message `messageId` (with the attachments it had). */
  private async resend(conversationId: string, messageId: string, text: string): Promise<void> {
    if (this.running.has(conversationId)) return; // one reply at a time per conversation
    const attachments = this.deps.backend
      .sentAttachments(conversationId, messageId)
      .map(resendable)
      .filter((a): a is ChatAttachment => a !== undefined);
    if (this.current?.id === conversationId) {
      const at = this.current.messages.findIndex((m) => m.id === messageId);
      if (at >= 0) this.current.messages = this.current.messages.slice(0, at);
    }
    await this.send(conversationId, text, { attachments, replaceFrom: messageId });
  }

  private async send(conversationId: string | null, text: string, resend?: TurnOptions): Promise<void> {
    const trimmed = text.trim();
    if (!trimmed) return;
    const availability = this.deps.backend.availability();
    if (!availability.canSend) {
      this.deps.post({ type: 'availability', availability });
      return;
    }
    let conversation: ConversationView;
    if (conversationId && this.current?.id === conversationId) {
      conversation = this.current;
    } else if (conversationId) {
      const loaded = await this.deps.backend.load(conversationId);
      if (!loaded) return this.deps.inform('That conversation is no longer there.');
      conversation = loaded;
    } else {
      // A provisional id until the server names the conversation (rekey).
      conversation = { id: `new-${this.deps.newId()}`, title: titleFrom(trimmed), updatedAt: this.deps.now(), messages: [] };
    }
    if (this.running.has(conversation.id)) return; // one reply at a time per conversation
    if (conversationId === null && [...this.running.keys()].some((id) => id.startsWith('new-'))) return;
    // A new message takes the draft's attachments (its files read again: they may have
    // changed since they were attached); a regenerate or an edit keeps its own.
    const reread = resend ? { attachments: [], notes: [] } : await this.rereadPending();
    const options: TurnOptions = resend ?? { attachments: reread.attachments };
    if (!resend) {
      this.pending = [];
      this.draftText = '';
      this.draftNotice = '';
    }
    const user: ChatMessageView = { id: this.deps.newId(), role: 'user', content: trimmed, reasoning: '', state: 'done' };
    if (options.attachments?.length) {
      const counted = this.budget?.attachments.length === options.attachments.length ? this.budget.attachments : undefined;
      user.attachments = options.attachments.map((a, i) => ({ id: String(i), kind: a.kind, path: a.path, lines: a.lines, ...(counted?.[i] ?? {}) }));
    }
    const reply: ChatMessageView = { id: this.deps.newId(), role: 'assistant', content: '', reasoning: '', state: 'streaming' };
    if (reread.notes.length) reply.note = reread.notes.join(' ');
    const completionModel = this.deps.backend.completionModel();
    if (completionModel) reply.completionModel = completionModel;
    conversation.messages.push(user);
    conversation.updatedAt = this.deps.now();
    this.current = conversation;
    this.conversations = [
      { id: conversation.id, title: conversation.title, updatedAt: conversation.updatedAt },
      ...this.conversations.filter((c) => c.id !== conversation.id),
    ];
    this.postSnapshot();
    conversation.messages.push(reply);
    this.deps.post({ type: 'message', conversationId: conversation.id, message: { ...reply } });

    const abort = new AbortController();
    const isNew = conversationId === null;
    const runKey = conversation.id;
    this.running.set(runKey, abort);
    this.deps.thinking(true);
    try {
      const result = await this.deps.backend.reply(
        isNew ? null : conversation.id,
        trimmed,
        (channel, piece) => {
          if (channel === 'content') reply.content += piece;
          else reply.reasoning += piece;
          this.deps.post({ type: 'delta', conversationId: conversation.id, messageId: reply.id, channel, text: piece });
        },
        abort.signal,
        options,
      );
      reply.content = result.reply.content;
      reply.reasoning = result.reply.reasoning;
      if (result.reply.completionModel) reply.completionModel = result.reply.completionModel;
      else delete reply.completionModel;
      if (result.warnings?.length) reply.note = [...reread.notes, ...result.warnings].join(' ');
      reply.state = abort.signal.aborted || result.reply.state === 'stopped' ? 'stopped' : 'done';
      if (result.tokensPerSecond !== undefined) this.deps.speed(result.tokensPerSecond);
      if (result.conversationId !== conversation.id) this.rekey(conversation, result.conversationId);
    } catch (e) {
      reply.state = abort.signal.aborted ? 'stopped' : 'error';
      if (reply.state === 'error') reply.error = e instanceof Error ? e.message : String(e);
    } finally {
      this.running.delete(runKey);
      this.deps.thinking(false);
    }
    // The finished turn as the server recorded it, when it did: its ids (for regenerate and
    // edit), the attachments as sent, how many earlier messages are no longer sent. So a
    // finished reply on the page is always the recorded one.
    const recorded =
      reply.state !== 'error' && this.current === conversation && !conversation.id.startsWith('new-')
        ? await this.loadMarked(conversation.id).catch(() => null)
        : null;
    const last = recorded?.messages[recorded.messages.length - 1];
    if (recorded && last?.role === 'assistant' && this.current === conversation) {
      if (reply.note) last.note = reply.note;
      if (reply.state === 'stopped') last.state = 'stopped';
      this.current = recorded;
      this.postSnapshot();
    } else {
      this.deps.post({ type: 'message', conversationId: conversation.id, message: { ...reply } });
    }
    await this.draftChanged();
  }

  /** A new conversation got its id from the server: use that one from now on. */
  private rekey(conversation: ConversationView, id: string): void {
    const old = conversation.id;
    conversation.id = id;
    this.conversations = this.conversations.map((c) => (c.id === old ? { ...c, id } : c));
    this.postSnapshot();
  }
}

const CHAT_ACTIONS: Record<ChatActionView, true> = {
  'choose-model-folder': true,
  'open-remote-settings': true,
  'choose-chat-backend': true,
  'choose-completion-backend': true,
};

function isChatAction(v: unknown): v is ChatActionView {
  return typeof v === 'string' && Object.hasOwn(CHAT_ACTIONS, v);
}

/**
 * Checks a message that arrived from the page (untyped at run time) against FromWebview;
 * undefined for anything else, which the host ignores.
 */
export function parseFromWebview(raw: unknown): FromWebview | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const m = raw as Record<string, unknown>;
  const str = (k: string) => typeof m[k] === 'string';
  const type = m.type as FromWebview['type'];
  switch (type) {
    case 'ready':
    case 'newChat':
      return { type };
    case 'send':
      return str('text') && (m.conversationId === null || str('conversationId'))
        ? { type, text: m.text as string, conversationId: m.conversationId as string | null }
        : undefined;
    case 'stop':
    case 'openConversation':
    case 'deleteConversation':
      return str('conversationId') ? { type, conversationId: m.conversationId as string } : undefined;
    case 'copy':
    case 'insert':
      return str('text') ? { type, text: m.text as string } : undefined;
    case 'apply':
      if (!str('text') || (m.path !== undefined && !str('path'))) return undefined;
      return m.path ? { type, text: m.text as string, path: m.path as string } : { type, text: m.text as string };
    case 'action':
      return isChatAction(m.action) ? { type, action: m.action } : undefined;
    case 'attachFile':
      return str('uri') ? { type, uri: m.uri as string } : undefined;
    case 'removeAttachment':
      return str('id') ? { type, id: m.id as string } : undefined;
    case 'findFiles':
      return str('query') ? { type, query: m.query as string } : undefined;
    case 'draftText':
      return str('text') ? { type, text: m.text as string } : undefined;
    case 'regenerate':
      return str('conversationId') ? { type, conversationId: m.conversationId as string } : undefined;
    case 'edit':
      return str('conversationId') && str('messageId') && str('text')
        ? { type, conversationId: m.conversationId as string, messageId: m.messageId as string, text: m.text as string }
        : undefined;
    default: {
      const never: never = type;
      void never;
      return undefined;
    }
  }
}
