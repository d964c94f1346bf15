// chat.ts - the chat panel's host logic: handles every message from the page (one
// exhaustive switch over FromWebview), keeps the open conversation, streams replies from
// the chat backend to the page, and stops them. The backend (the language server) owns the
// conversations and their persistence; this only mirrors what the page shows. Free of
// `vscode` values: chatView.ts supplies the webview, clipboard and editor.
import type {
  ChatActionView,
  ChatAvailabilityView,
  ChatMessageView,
  ConversationSummaryView,
  ConversationView,
  FromWebview,
  ToWebview,
} from '../protocol/webview';

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
  ): Promise<ReplyResult>;
  delete(conversationId: string): Promise<void>;
}

export interface ChatHostDeps {
  backend: ChatBackend;
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
        this.current = await this.deps.backend.load(newest.id);
      } else if (this.current && !this.running.has(this.current.id)) {
        this.current = (await this.deps.backend.load(this.current.id)) ?? this.current;
      }
    } catch {
      // The backend cannot list now (no server yet); the page still shows what it has.
    }
    this.postSnapshot();
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

  private async send(conversationId: string | null, text: string): Promise<void> {
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
    const user: ChatMessageView = { id: this.deps.newId(), role: 'user', content: trimmed, reasoning: '', state: 'done' };
    const reply: ChatMessageView = { id: this.deps.newId(), role: 'assistant', content: '', reasoning: '', state: 'streaming' };
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
      );
      reply.content = result.reply.content;
      reply.reasoning = result.reply.reasoning;
      if (result.reply.completionModel) reply.completionModel = result.reply.completionModel;
      else delete reply.completionModel;
      if (result.warnings?.length) reply.note = result.warnings.join(' ');
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
    this.deps.post({ type: 'message', conversationId: conversation.id, message: { ...reply } });
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
    default: {
      const never: never = type;
      void never;
      return undefined;
    }
  }
}
