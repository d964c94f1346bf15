// state.ts - the chat page's state and the one function that changes it: every message the
// host sends (ToWebview) goes through reduce(), an exhaustive switch. Pure, so unit tests
// check it without a DOM; main.ts renders the result.
import type {
  ChatAvailabilityView,
  ChatMessageView,
  ConversationSummaryView,
  ConversationView,
  ToWebview,
} from '../protocol/webview';

export interface PageState {
  conversations: ConversationSummaryView[];
  current: ConversationView | null;
  availability: ChatAvailabilityView;
  /** Bumped when the host asks for the input to take focus. */
  focusRequests: number;
}

export function initialState(): PageState {
  return { conversations: [], current: null, availability: { canSend: false, notice: 'Connecting to K3…', actions: [] }, focusRequests: 0 };
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
    default: {
      const never: never = msg;
      throw new Error(`unknown message from the extension: ${JSON.stringify(never)}`);
    }
  }
}
