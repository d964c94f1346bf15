// engineText.ts - sentences about the engine's state for places other than the status bar:
// the chat panel's notice and its buttons. One wording per state, next to status.ts's.
import type { ModelInfo } from '../protocol/lsp';
import type { ChatAvailabilityView } from '../protocol/webview';
import { formatDuration, type EngineView } from './status';

/** What the chat panel's notice is made from (the latest k3/status, as ctx.ts keeps it). */
export interface ChatFacts {
  engine: EngineView;
  /** The model the local engine runs; absent with the remote backend or no model. */
  model?: ModelInfo;
  /** Why this window's chat history cannot be kept now (the server's sentence). */
  storageProblem?: string;
}

/** A sentence for the chat panel, or '' when the engine is ready to answer. */
export function describeEngineForChat(engine: EngineView): string {
  switch (engine.kind) {
    case 'ready':
    case 'busy':
      return '';
    case 'starting':
      return 'The engine is starting.';
    case 'loading': {
      if (engine.remote === 'model') return 'The remote server is loading its model; chat opens when it is ready.';
      if (engine.remote === 'connecting') return 'Connecting to the remote server.';
      const facts: string[] = [];
      if (engine.percent !== undefined) facts.push(`${Math.floor(engine.percent)}%`);
      if (engine.etaMs !== undefined) facts.push(`about ${formatDuration(engine.etaMs)} left`);
      return `The model is loading${facts.length ? ` (${facts.join(', ')})` : ''}.`;
    }
    case 'no-model':
      return engine.reason.endsWith('.') ? engine.reason : `${engine.reason}.`;
    case 'error':
      return `The engine failed: ${engine.message}`;
    case 'stopped':
      return `The engine is stopped: ${engine.reason}`;
    default: {
      const never: never = engine;
      throw new Error(`unknown engine state ${JSON.stringify(never)}`);
    }
  }
}

/** Whether the panel can send, and everything its notice says: the engine's state, a model
 * that was not trained for chat (with the ways out), history that cannot be kept. */
export function describeChatAvailability(facts: ChatFacts, connected: boolean): ChatAvailabilityView {
  const { engine, model } = facts;
  const canSend = connected && (engine.kind === 'ready' || engine.kind === 'busy');
  const sentences = [describeEngineForChat(engine)];
  const actions: ChatAvailabilityView['actions'] = [];
  if (model && !model.chat) {
    sentences.push(
      `${model.name} is a code-completion model, not trained for chat: it continues a message as code (briefly) and does not answer it. ` +
        'Ghost text can stay on it while chat goes to a Kimi K3 model folder or a remote K3 server.',
    );
    actions.push({ action: 'choose-chat-backend', title: 'Choose Chat Backend…' }, { action: 'choose-completion-backend', title: 'Choose Completion Backend…' });
  }
  if (facts.storageProblem) sentences.push(facts.storageProblem);
  return { canSend, notice: sentences.filter(Boolean).join(' '), actions };
}
