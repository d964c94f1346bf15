// engineText.ts - sentences about the engine's state for places other than the status bar
// (the chat panel's notice). One wording per state, next to status.ts's.
import { formatDuration, type EngineView } from './status';

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
