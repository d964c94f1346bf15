// chat.ts - the chat and inline-edit methods (`k3/chat/*`, `k3/conversation/*`,
// `k3/state/clear`, `k3/edit/*`) between the extension and the server, split from ./lsp.ts
// (which re-exports them) to keep each file to one part of the protocol. Documented for
// humans in docs/PROTOCOL.md.
import { NotificationType, RequestType, RequestType0 } from 'vscode-languageserver-protocol';
import type { ChatTurnStats, K3ErrorData, K3Problem } from './lsp';

// ---- Chat ------------------------------------------------------------------------------------

export interface ChatMessage {
  id: string;
  role: 'user' | 'assistant';
  content: string;
  /** The assistant's thinking channel; empty when it gave none. */
  reasoning: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** How an assistant reply ended. */
  stopReason?: ChatStopReason;
  /** Set on a reply written by a model not trained for chat: that model's name. */
  completionModel?: string;
  /** A user message's attachments, as they were sent (docs/PROMPTS.md, "Attachments"). */
  attachments?: SentAttachment[];
}

/** Code the user attached to a chat message: a selection, or a whole file. The extension
 * reads it; the server only renders it. */
export interface ChatAttachment {
  kind: 'selection' | 'file';
  /** As the user knows it: the workspace-relative path (or the file's path). */
  path: string;
  /** The document's URI, to read it again later. */
  uri: string;
  /** 1-based, inclusive: the lines the text covers (a whole file: 1 to its last line). */
  lines: { start: number; end: number };
  /** The editor's language id, for the code fence. */
  languageId?: string;
  text: string;
}

/** What became of an attachment in the turn (the cut rule, docs/PROMPTS.md): `whole`, `cut`
 * to the first lines that fit, or `left-out` (nothing of it fits). */
export type AttachmentFate = 'whole' | 'cut' | 'left-out';

/** An attachment as sent: the text the prompt carried (the first `sentLines` lines of it
 * when cut), and what the whole one counts. */
export interface SentAttachment extends ChatAttachment {
  /** Tokens of the whole attachment as the prompt lays it out. */
  tokens: number;
  /** Tokens it took in the prompt (0 when left out). */
  sentTokens: number;
  fate: AttachmentFate;
}

/** `stop-token`: the model ended its turn (or, in a continuation from a model not trained
 * for chat, the junk filter ended it where it began to loop); `length`: the token limit;
 * `stopped`: `k3/chat/stop` or a cancelled request. */
export type ChatStopReason = 'stop-token' | 'length' | 'stopped';

export interface ConversationSummary {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
  /** Whether the model thinks before answering in this conversation (fixed at creation). */
  thinking: boolean;
  /** Tokens of its saved engine state; 0 when none is kept. */
  savedTokens: number;
}

export interface Conversation extends ConversationSummary {
  messages: ChatMessage[];
  /** The first this many messages are no longer sent to the model: the conversation grew
   * past the context and its oldest turns were left out (docs/PROMPTS.md, "Long
   * conversations"). 0 when all are sent. */
  notSent: number;
}

export interface ChatSendParams {
  /** Absent: a new conversation. */
  conversationId?: string;
  message: string;
  /** For a new conversation: think first (default: the `chat.thinking` setting). */
  thinking?: boolean;
  /** Most tokens of this reply (default: the `chat.maxTokens` setting). */
  maxTokens?: number;
  /** Code sent with the message, in this order (the cut rule takes them in it). */
  attachments?: ChatAttachment[];
  /** Regenerate or edit: this user message of the conversation and every later one are
   * replaced by the new message and its reply. */
  replaceFrom?: string;
}

/** `k3/chat/budget`'s params: the turn that would be sent. */
export interface ChatBudgetParams {
  conversationId?: string;
  message: string;
  attachments?: ChatAttachment[];
  /** As in ChatSendParams: the turn would replace this message and the later ones. */
  replaceFrom?: string;
}

/** How the turn would use the model's context, as k3/chat/send would lay it out. */
export interface ChatBudget {
  /** Positions of the context. */
  contextTokens: number;
  /** Kept free for the reply (its token limit, at most a quarter of the context) and what
   * closes it when cut. */
  replyTokens: number;
  /** The new message with its format tokens, without attachments. */
  messageTokens: number;
  /** The history that would be sent. */
  historyTokens: number;
  /** Each attachment, in order, with its fate. */
  attachments: Array<{ tokens: number; sentTokens: number; fate: AttachmentFate }>;
  /** Everything the prompt would hold. */
  totalTokens: number;
  /** Messages at the start of the conversation that would not be sent. */
  notSent: number;
  /** Counts estimated from the text's length (a remote backend: its tokenizer is not here). */
  estimated: boolean;
}

export interface ChatSendResult {
  conversationId: string;
  /** The user's message, as recorded. */
  userMessage: ChatMessage;
  /** The reply, as recorded. */
  message: ChatMessage;
  stats: ChatTurnStats;
  /** Problems handled on the way (e.g. a saved state that could not be used). */
  warnings: K3Problem[];
}

/** `k3/chat/send`: appends a user message, generates the reply (streamed as
 * `k3/chat/didStream`), records both and saves the engine state, then resolves. */
export namespace ChatSendRequest {
  export const method = 'k3/chat/send' as const;
  export const type = new RequestType<ChatSendParams, ChatSendResult, K3ErrorData>(method);
}

/** `k3/chat/budget`: the token counts of a turn before it is sent (attachments' tokens,
 * the total against the context, what the cut rule and the trimming would do). */
export namespace ChatBudgetRequest {
  export const method = 'k3/chat/budget' as const;
  export const type = new RequestType<ChatBudgetParams, ChatBudget, K3ErrorData>(method);
}

export interface ChatStreamParams {
  conversationId: string;
  /** The id the reply will have. */
  messageId: string;
  channel: 'reasoning' | 'content';
  text: string;
  /** Tokens generated so far in this reply. */
  tokens: number;
}

/** `k3/chat/didStream` (server -> client): a piece of a reply, in order. */
export namespace ChatStreamNotification {
  export const method = 'k3/chat/didStream' as const;
  export const type = new NotificationType<ChatStreamParams>(method);
}

export interface ChatStopParams {
  conversationId: string;
}

/** `k3/chat/stop`: ends the reply being generated in that conversation; its `k3/chat/send`
 * resolves with what was generated (stopReason `stopped`). */
export namespace ChatStopRequest {
  export const method = 'k3/chat/stop' as const;
  export const type = new RequestType<ChatStopParams, { stopped: boolean }, K3ErrorData>(method);
}

/** `k3/conversation/list`: newest first. */
export namespace ConversationListRequest {
  export const method = 'k3/conversation/list' as const;
  export const type = new RequestType0<{ conversations: ConversationSummary[] }, void>(method);
}

/** `k3/conversation/get`: one conversation with its messages. */
export namespace ConversationGetRequest {
  export const method = 'k3/conversation/get' as const;
  export const type = new RequestType<{ conversationId: string }, Conversation, K3ErrorData>(method);
}

/** Exactly one of the two: one conversation, or every one (said explicitly). Anything else
 * is InvalidParams and deletes nothing. */
export type ConversationClearParams = { conversationId: string } | { all: true };

/** `k3/conversation/clear`: deletes conversations with their saved state. */
export namespace ConversationClearRequest {
  export const method = 'k3/conversation/clear' as const;
  export const type = new RequestType<ConversationClearParams, { removed: number }, K3ErrorData>(method);
}

/** `k3/state/clear`: deletes everything kept for this workspace (history, saved engine
 * state, the chosen preset, files set aside). */
export namespace StateClearRequest {
  export const method = 'k3/state/clear' as const;
  export const type = new RequestType0<{ removedFiles: number }, void>(method);
}


// ---- Inline edit -----------------------------------------------------------------------------

export interface EditStartParams {
  /** The client's name for this edit; its k3/edit/didStream pieces carry it. */
  editId: string;
  /** The document's language id (`python`, `typescript`, ...). */
  languageId: string;
  /** The file's path as the user knows it (workspace-relative), for the prompt. */
  path?: string;
  /** The document's text before the selection (the server keeps its last lines). */
  before: string;
  /** The whole lines to rewrite. */
  selection: string;
  /** The document's text after the selection (the server keeps its first lines). */
  after: string;
  /** What to do, as the user typed it. */
  instruction: string;
  /** Most tokens of the reply (default: the `chat.maxTokens` setting). */
  maxTokens?: number;
}

/** The reply read as an edit (docs/PROMPTS.md, "Inline edit"): the rewritten selection from
 * its one code block, or the reply as a message when it holds no finished code block (a
 * question, a refusal, a reply cut off inside its code). A message is shown, never applied. */
export type EditReply = { kind: 'code'; code: string; language: string } | { kind: 'message'; text: string };

export interface EditStartResult {
  editId: string;
  reply: EditReply;
  stopReason: ChatStopReason;
  generatedTokens: number;
}

/** `k3/edit/start`: rewrites a selection as an instruction says, with the chat model
 * (local or remote), streaming the code as it comes (`k3/edit/didStream`); resolves with the
 * reply read as an edit. Nothing is recorded in the chat history. Cancel it with
 * `$/cancelRequest`. A model not trained for chat is refused (`model-cannot-chat`). */
export namespace EditStartRequest {
  export const method = 'k3/edit/start' as const;
  export const type = new RequestType<EditStartParams, EditStartResult, K3ErrorData>(method);
}

export interface EditStreamParams {
  editId: string;
  /** The rewritten code so far: the finished lines of the reply's code block (empty before
   * the block opens). Each notification replaces the previous one. */
  code: string;
  /** Tokens generated so far. */
  tokens: number;
}

/** `k3/edit/didStream` (server -> client): the rewrite so far, sent when a line of code is
 * finished. */
export namespace EditStreamNotification {
  export const method = 'k3/edit/didStream' as const;
  export const type = new NotificationType<EditStreamParams>(method);
}
