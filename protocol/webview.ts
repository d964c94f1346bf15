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
}

export interface ConversationSummaryView {
  id: string;
  title: string;
  /** Milliseconds since the epoch of the last message. */
  updatedAt: number;
}

export interface ConversationView extends ConversationSummaryView {
  messages: ChatMessageView[];
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
  | { type: 'focusInput' };

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
  | { type: 'action'; action: ChatActionView };
