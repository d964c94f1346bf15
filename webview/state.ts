// state.ts - the chat page's state and the one function that changes it: every message the
// host sends (ToWebview) goes through reduce(), an exhaustive switch; and the words the page
// shows for attachments, the budget and the left-out marker. Pure, so unit tests check it
// without a DOM; main.ts renders the result.
import type {
  AttachmentView,
  BudgetView,
  ChatAvailabilityView,
  ChatMessageView,
  ConversationSummaryView,
  ConversationView,
  DraftView,
  ToWebview,
} from '../protocol/webview';

export interface PageState {
  conversations: ConversationSummaryView[];
  current: ConversationView | null;
  availability: ChatAvailabilityView;
  /** Bumped when the host asks for the input to take focus. */
  focusRequests: number;
  /** The next message's attachments, the suggestion chips and the budget. */
  draft: DraftView;
  /** The `@` popup's matches, for the query they answer. */
  fileMatches: { query: string; files: { uri: string; path: string }[] };
}

export function initialState(): PageState {
  return {
    conversations: [],
    current: null,
    availability: { canSend: false, notice: 'Connecting to K3…', actions: [] },
    focusRequests: 0,
    draft: { attachments: [], suggestions: [], budget: null, notice: '' },
    fileMatches: { query: '', files: [] },
  };
}

/** The message that is still streaming in the open conversation, if any. */
export function streamingMessageId(state: PageState): string | undefined {
  return state.current?.messages.find((m) => m.state === 'streaming')?.id;
}

/** What a message shows: its answer, the reasoning to fold away (only once the model
 * closed it: while it streams with no answer yet, it is shown open as `thinking`; a
 * finished reply that never left its thinking shows that text as the answer). */
export function shownParts(m: ChatMessageView): { answer: string; reasoning: string; thinking: boolean } {
  if (m.role !== 'assistant') return { answer: m.content, reasoning: '', thinking: false };
  const thinking = m.state === 'streaming' && m.content === '' && m.reasoning !== '';
  if (m.content === '' && !thinking) return { answer: m.reasoning, reasoning: '', thinking: false };
  return { answer: m.content, reasoning: m.reasoning, thinking };
}

export function reduce(state: PageState, msg: ToWebview): PageState {
  switch (msg.type) {
    case 'snapshot':
      return { ...state, conversations: msg.conversations, current: msg.current, availability: msg.availability };
    case 'delta': {
      const current = state.current;
      if (!current || current.id !== msg.conversationId) return state;
      const i = current.messages.findIndex((m) => m.id === msg.messageId);
      if (i < 0) return state;
      const old = current.messages[i];
      const updated =
        msg.channel === 'content' ? { ...old, content: old.content + msg.text } : { ...old, reasoning: old.reasoning + msg.text };
      const messages = current.messages.slice();
      messages[i] = updated;
      return { ...state, current: { ...current, messages } };
    }
    case 'message': {
      const current = state.current;
      if (!current || current.id !== msg.conversationId) return state;
      const i = current.messages.findIndex((m) => m.id === msg.message.id);
      const messages = current.messages.slice();
      if (i < 0) messages.push(msg.message);
      else messages[i] = msg.message;
      return { ...state, current: { ...current, messages } };
    }
    case 'availability':
      return { ...state, availability: msg.availability };
    case 'focusInput':
      return { ...state, focusRequests: state.focusRequests + 1 };
    case 'draft':
      return { ...state, draft: msg.draft };
    case 'fileMatches':
      return { ...state, fileMatches: { query: msg.query, files: msg.files } };
    default: {
      const never: never = msg;
      throw new Error(`unknown message from the extension: ${JSON.stringify(never)}`);
    }
  }
}

const count = (n: number): string => n.toLocaleString('en-US');

/** A chip's words: where the code is from, its tokens, and what the cut rule does with it. */
export function chipLabel(a: AttachmentView): string {
  const name = a.kind === 'file' ? a.path : `${a.path}:${a.lines.start}-${a.lines.end}`;
  if (a.tokens === undefined) return name;
  switch (a.fate) {
    case 'cut':
      return `${name} · ${count(a.sentTokens ?? 0)} of ${count(a.tokens)} tokens (cut: only its first lines fit)`;
    case 'left-out':
      return `${name} · ${count(a.tokens)} tokens (left out: it does not fit the context)`;
    default:
      return `${name} · ${count(a.tokens)} tokens`;
  }
}

/** What a sent attachment's file became since: a word for its chip, '' when unchanged. */
export function chipStatus(a: AttachmentView): string {
  if (a.status === 'deleted') return 'deleted since';
  if (a.status === 'stale') return 'changed since';
  return '';
}

/** The line under the chips: the total against the context, and what will not be sent. */
export function budgetLine(b: BudgetView | null): string {
  if (!b) return '';
  const about = b.estimated ? 'about ' : '';
  let line = `${about}${count(b.totalTokens)} of ${count(b.contextTokens)} tokens (${count(b.replyTokens)} kept for the reply)`;
  if (b.notSent > 0) line += ` · ${notSentMarker(b.notSent)}`;
  return line;
}

/** The marker where a conversation's sent history starts. */
export function notSentMarker(n: number): string {
  return n === 1 ? '1 earlier message is not sent to the model' : `${count(n)} earlier messages are not sent to the model`;
}

/** The `@` query at the caret: the word after an `@` that starts a word, or undefined. */
export function atQuery(text: string, caret: number): { start: number; query: string } | undefined {
  const before = text.slice(0, caret);
  const m = /(^|\s)@([^\s@]*)$/.exec(before);
  if (!m) return undefined;
  return { start: caret - m[2].length - 1, query: m[2] };
}

/** The id of the conversation's last reply, which Regenerate replaces (none while one streams). */
export function regenerableId(state: PageState): string | undefined {
  const messages = state.current?.messages ?? [];
  const last = messages[messages.length - 1];
  if (!last || last.role !== 'assistant' || last.state === 'streaming') return undefined;
  return last.id;
}

