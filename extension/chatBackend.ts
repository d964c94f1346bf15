// chatBackend.ts - the chat panel's source of replies and history: the language server's
// k3/chat and k3/conversation methods. Sends a message and streams the reply's pieces
// (k3/chat/didStream) to the controller, stops a reply (k3/chat/stop, or cancelling the
// request before the server has named the conversation), and reads the per-workspace
// history. It keeps no conversations itself.
import {
  CancellationTokenSource,
  ErrorCodes,
  ResponseError,
  type Disposable,
  type LanguageClient,
} from 'vscode-languageclient/node';
import {
  ChatBudgetRequest,
  ChatSendRequest,
  ChatStopRequest,
  ChatStreamNotification,
  ConversationClearRequest,
  ConversationGetRequest,
  ConversationListRequest,
  type ChatBudget,
  type ChatMessage,
  type ChatStreamParams,
  type SentAttachment,
  type Conversation,
  type K3ErrorData,
} from '../protocol/lsp';
import {
  type ChatAvailabilityView,
  type ChatMessageView,
  type ConversationSummaryView,
  type ConversationView,
} from '../protocol/webview';
import { sentAttachmentView, type ChatBackend, type ReplyResult, type TurnOptions } from './chat';
import { describeChatAvailability, type ChatFacts } from './engineText';

/** A failed request as one sentence for the user. */
export function describeRequestError(e: unknown): string {
  if (e instanceof ResponseError) {
    if (e.code === ErrorCodes.MethodNotFound) return 'This build of the language server does not support that yet.';
    const data = e.data as Partial<K3ErrorData> | undefined;
    return data?.detail ? `${e.message} (${data.detail})` : e.message;
  }
  return e instanceof Error ? e.message : String(e);
}

export function messageView(m: ChatMessage): ChatMessageView {
  const view: ChatMessageView = {
    id: m.id,
    role: m.role,
    content: m.content,
    reasoning: m.reasoning,
    state: m.stopReason === 'stopped' ? 'stopped' : 'done',
  };
  if (m.completionModel) view.completionModel = m.completionModel;
  if (m.attachments?.length) view.attachments = m.attachments.map(sentAttachmentView);
  return view;
}

export function conversationView(c: Conversation): ConversationView {
  const view: ConversationView = { id: c.id, title: c.title, updatedAt: c.updatedAt, messages: c.messages.map(messageView) };
  if (c.notSent > 0) view.notSent = c.notSent;
  return view;
}

export class ServerChatBackend implements ChatBackend {
  private client: LanguageClient | undefined;
  private subscription: Disposable | undefined;
  /** Stream listeners by conversation id; `pendingNew` takes the first stream of a new one. */
  private readonly listeners = new Map<string, (p: ChatStreamParams) => void>();
  private pendingNew: ((p: ChatStreamParams) => void) | undefined;
  /** The attachments of the messages last loaded, by conversation and message id. */
  private readonly sent = new Map<string, Map<string, SentAttachment[]>>();

  constructor(private readonly facts: () => ChatFacts) {}

  /** Uses `client` from now on (called after every server start; undefined when stopped). */
  attach(client: LanguageClient | undefined): void {
    this.subscription?.dispose();
    this.subscription = undefined;
    this.client = client;
    if (!client) return;
    this.subscription = client.onNotification(ChatStreamNotification.type, (p) => {
      let listener = this.listeners.get(p.conversationId);
      if (!listener && this.pendingNew) {
        listener = this.pendingNew;
        this.pendingNew = undefined;
        this.listeners.set(p.conversationId, listener);
      }
      listener?.(p);
    });
  }

  availability(): ChatAvailabilityView {
    return describeChatAvailability(this.facts(), this.client !== undefined);
  }

  completionModel(): string | undefined {
    const model = this.facts().model;
    return model && !model.chat ? model.name : undefined;
  }

  private running(): LanguageClient {
    if (!this.client || !this.client.isRunning()) throw new Error('The engine is not running.');
    return this.client;
  }

  async list(): Promise<ConversationSummaryView[]> {
    const { conversations } = await this.running().sendRequest(ConversationListRequest.type);
    return conversations.map((c) => ({ id: c.id, title: c.title, updatedAt: c.updatedAt }));
  }

  async load(conversationId: string): Promise<ConversationView | null> {
    try {
      const c = await this.running().sendRequest(ConversationGetRequest.type, { conversationId });
      this.sent.set(c.id, new Map(c.messages.filter((m) => m.attachments?.length).map((m) => [m.id, m.attachments ?? []])));
      return conversationView(c);
    } catch (e) {
      if (e instanceof ResponseError && (e.data as Partial<K3ErrorData> | undefined)?.kind === 'unknown-conversation') return null;
      throw e;
    }
  }

  async reply(
    conversationId: string | null,
    text: string,
    onDelta: (channel: 'content' | 'reasoning', text: string) => void,
    signal: AbortSignal,
    options: TurnOptions = {},
  ): Promise<ReplyResult> {
    const client = this.running();
    let knownId = conversationId;
    const listener = (p: ChatStreamParams) => {
      knownId = p.conversationId;
      onDelta(p.channel, p.text);
    };
    if (conversationId) this.listeners.set(conversationId, listener);
    else this.pendingNew = listener;
    const cancel = new CancellationTokenSource();
    const stop = () => {
      // The server names a new conversation with its first piece; before that, only
      // cancelling the request can stop it.
      if (knownId) client.sendRequest(ChatStopRequest.type, { conversationId: knownId }).catch(() => cancel.cancel());
      else cancel.cancel();
    };
    signal.addEventListener('abort', stop);
    try {
      const r = await client.sendRequest(
        ChatSendRequest.type,
        {
          conversationId: conversationId ?? undefined,
          message: text,
          ...(options.attachments?.length ? { attachments: options.attachments } : {}),
          ...(options.replaceFrom ? { replaceFrom: options.replaceFrom } : {}),
        },
        cancel.token,
      );
      return {
        conversationId: r.conversationId,
        reply: messageView(r.message),
        tokensPerSecond: r.stats.tokensPerSecond,
        // History that cannot be saved is said once, in the panel's notice, not per reply.
        warnings: r.warnings.filter((w) => w.kind !== 'storage-unavailable').map((w) => w.message),
      };
    } catch (e) {
      throw new Error(describeRequestError(e));
    } finally {
      signal.removeEventListener('abort', stop);
      cancel.dispose();
      if (knownId) this.listeners.delete(knownId);
      if (this.pendingNew === listener) this.pendingNew = undefined;
    }
  }

  async budget(conversationId: string | null, text: string, options: TurnOptions): Promise<ChatBudget | null> {
    if (!this.client?.isRunning() || !this.availability().canSend) return null;
    return this.client.sendRequest(ChatBudgetRequest.type, {
      message: text,
      ...(conversationId ? { conversationId } : {}),
      ...(options.attachments?.length ? { attachments: options.attachments } : {}),
      ...(options.replaceFrom ? { replaceFrom: options.replaceFrom } : {}),
    });
  }

  sentAttachments(conversationId: string, messageId: string): SentAttachment[] {
    return this.sent.get(conversationId)?.get(messageId) ?? [];
  }

  async delete(conversationId: string): Promise<void> {
    await this.running().sendRequest(ConversationClearRequest.type, { conversationId });
  }
}
