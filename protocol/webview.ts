// webview.ts - the messages between the chat page (webview/) and its host in the extension
// (extension/chatView.ts). The server never sees them. The two unions below are each handled
// by one exhaustive `switch`. The page renders what it is told and keeps nothing the host does
// not also know: the conversations themselves live with the host (and, through the host, in
// the server's per-workspace state).

/** One message of a conversation, as the chat page shows it. */
export interface ChatMessageView {
  id: string;
  role: 'user' | 'assistant';
  /** Markdown, as the model wrote it (rendered and sanitised in the page). */
  content: string;
  /** The model's reasoning, shown collapsed; empty when it gave none. */
  reasoning: string;
  /** `streaming` while tokens arrive; `stopped` when the user pressed Stop. */
  state: 'streaming' | 'done' | 'stopped' | 'error';
  /** Shown with the reply: a model not trained for chat wrote it (its name). */
  completionModel?: string;
  /** Shown under the reply: what happened on the way (a saved state that could not be
   * used, another window's version of the conversation kept instead of this reply). */
  note?: string;
  /** Why a reply failed, when `state` is `error`. */
  error?: string;
  /** A user message's attachments, as they were sent. */
  attachments?: AttachmentView[];
}

/** An attachment as a chip shows it: where it is from, its tokens, and what the turn does
 * (a pending one: would do) with it. */
export interface AttachmentView {
  /** The chip's key (a pending attachment's id, or the sent one's index). */
  id: string;
  kind: 'selection' | 'file';
  path: string;
  lines: { start: number; end: number };
  /** Tokens of the whole attachment; absent until counted. */
  tokens?: number;
  /** Tokens it takes in the prompt. */
  sentTokens?: number;
  /** `whole`, `cut` to its first lines, or `left-out`: the cut rule (docs/PROMPTS.md). */
  fate?: 'whole' | 'cut' | 'left-out';
  /** The file changed since it was attached (`stale`) or is gone (`deleted`). */
  status?: 'stale' | 'deleted';
}

/** A one-click chip: a file that is open (the current one first) and not attached yet. */
export interface SuggestionView {
  uri: string;
  path: string;
  current: boolean;
}

/** The total the next turn would send, against the model's context. */
export interface BudgetView {
  totalTokens: number;
  contextTokens: number;
  replyTokens: number;
  /** Earlier messages that would not be sent. */
  notSent: number;
  /** Counted from the text's length (no tokenizer for a remote model). */
  estimated: boolean;
}

/** The composer's context: what is attached to the next message, what could be, the
 * budget, and a sentence about the last attachment refused (or ''). */
export interface DraftView {
  attachments: AttachmentView[];
  suggestions: SuggestionView[];
  budget: BudgetView | null;
  notice: string;
}

export interface ConversationSummaryView {
  id: string;
  title: string;
  /** Milliseconds since the epoch of the last message. */
  updatedAt: number;
}

export interface ConversationView extends ConversationSummaryView {
  messages: ChatMessageView[];
  /** The first this many messages are no longer sent to the model (the context is full). */
  notSent?: number;
}

/** What a notice's button does (the host runs the matching command). */
export type ChatActionView = 'choose-model-folder' | 'open-remote-settings' | 'choose-chat-backend' | 'choose-completion-backend';

/** Whether the chat can answer now, and the sentences and ways out shown above the input. */
export interface ChatAvailabilityView {
  canSend: boolean;
  /** Why it cannot answer, what it is doing (loading), or what to know before sending (a
   * model not trained for chat, history that cannot be kept); '' for nothing. */
  notice: string;
  /** Buttons under the notice. */
  actions: { action: ChatActionView; title: string }[];
}

/** Host -> page. */
export type ToWebview =
  /** Everything the page shows, sent after `ready` and whenever it must be redrawn whole. */
  | {
      type: 'snapshot';
      conversations: ConversationSummaryView[];
      current: ConversationView | null;
      availability: ChatAvailabilityView;
    }
  /** A piece of a reply being streamed into `messageId` of `conversationId`. */
  | { type: 'delta'; conversationId: string; messageId: string; channel: 'content' | 'reasoning'; text: string }
  /** A message changed as a whole (added, finished, stopped or failed). */
  | { type: 'message'; conversationId: string; message: ChatMessageView }
  | { type: 'availability'; availability: ChatAvailabilityView }
  /** Move keyboard focus to the input (the K3: New Chat command, the view being revealed). */
  | { type: 'focusInput' }
  /** The composer's attachments, suggestions and budget changed. */
  | { type: 'draft'; draft: DraftView }
  /** Workspace files matching an `@` query, best first. */
  | { type: 'fileMatches'; query: string; files: { uri: string; path: string }[] };

/** Page -> host. */
export type FromWebview =
  /** The page has loaded and wants a snapshot. */
  | { type: 'ready' }
  /** `conversationId` null starts a new conversation with this message. */
  | { type: 'send'; conversationId: string | null; text: string }
  | { type: 'stop'; conversationId: string }
  | { type: 'newChat' }
  | { type: 'openConversation'; conversationId: string }
  | { type: 'deleteConversation'; conversationId: string }
  /** A code block's Copy button. */
  | { type: 'copy'; text: string }
  /** A code block's Insert button: insert at the cursor of the last active editor. */
  | { type: 'insert'; text: string }
  /** A code block's Apply button: show the code as a diff against `path` (from the fence's
   * info string, relative to the workspace), else the last active editor, to accept or reject. */
  | { type: 'apply'; text: string; path?: string }
  /** A button of the notice. */
  | { type: 'action'; action: ChatActionView }
  /** Attach a workspace file (a suggestion chip, an `@` match). */
  | { type: 'attachFile'; uri: string }
  | { type: 'removeAttachment'; id: string }
  /** The `@` popup's query: find workspace files (fuzzy). */
  | { type: 'findFiles'; query: string }
  /** The draft's text changed (the budget counts it). */
  | { type: 'draftText'; text: string }
  /** Ask again: the conversation's last user message, its reply replaced. */
  | { type: 'regenerate'; conversationId: string }
  /** Edit and resend a user message: it and every later message are replaced. */
  | { type: 'edit'; conversationId: string; messageId: string; text: string };
