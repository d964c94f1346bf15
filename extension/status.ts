// status.ts - what the status bar says: one pure function from the engine's state, the
// client's own activity and the settings to the item's text, tooltip and accessible label.
// It never decides anything; statusBar.ts paints the item from the state ctx.ts keeps. Kept
// free of `vscode` values so unit tests can check every state's wording.
import type { K3Action, ModelInfo, RemoteServerKind, RemoteStatus, Role, RoleStatus, StatusResult } from '../protocol/lsp';
import { formatBytes } from './presets';

/** What the engine is doing, as the extension understands it. */
export type EngineView =
  | { kind: 'starting' }
  | { kind: 'loading'; startedAt: number; percent?: number; etaMs?: number; remote?: 'connecting' | 'model' }
  | { kind: 'ready' }
  | { kind: 'busy' }
  | { kind: 'no-model'; reason: string; action?: K3Action }
  | { kind: 'error'; message: string; action?: K3Action }
  | { kind: 'stopped'; reason: string };

export interface StatusInput {
  engine: EngineView;
  /** A completion or chat reply is being computed right now. */
  thinking: boolean;
  preset: string;
  completionsEnabled: boolean;
  engineVersion?: string;
  /** Decode speed of the last completion or reply, tokens per second. */
  lastTokensPerSecond?: number;
  /** The remote server completions and chat go to (k3.backend remote), as the status names it. */
  remote?: string;
  /** The model the local engine runs or loads. */
  model?: Pick<ModelInfo, 'name' | 'bytes' | 'chat' | 'path'>;
  /** Who serves ghost text and chat, as the server last said. */
  roles?: Record<Role, RoleStatus>;
  now: number;
}

export interface StatusView {
  text: string;
  /** Markdown. */
  tooltip: string;
  ariaLabel: string;
  severity: 'normal' | 'warning' | 'error';
}

/**
 * The engine's state from a k3/status answer or k3/didChangeStatus; `previous` keeps a
 * load's start time steady across updates.
 */
export function engineFromStatus(status: StatusResult, previous: EngineView, now: number): EngineView {
  switch (status.phase) {
    case 'no-model':
      return {
        kind: 'no-model',
        reason: status.error?.message ?? 'No model is loaded',
        ...(status.error ? { action: status.error.action } : {}),
      };
    case 'loading': {
      const load = status.load;
      const startedAt = load ? now - load.elapsedMs : previous.kind === 'loading' ? previous.startedAt : now;
      const view: EngineView = { kind: 'loading', startedAt };
      if (status.remote) view.remote = status.remote.loading ?? 'connecting';
      if (load?.bytesLoaded !== undefined && load.bytesTotal > 0) view.percent = Math.min(100, (100 * load.bytesLoaded) / load.bytesTotal);
      if (load?.estimateMs !== undefined) view.etaMs = Math.max(0, load.estimateMs - load.elapsedMs);
      return view;
    }
    case 'ready':
      return { kind: 'ready' };
    case 'busy':
      return { kind: 'busy' };
    case 'error':
      return {
        kind: 'error',
        message: status.error?.message ?? 'The engine failed; K3: Show Logs has the details',
        ...(status.error ? { action: status.error.action } : {}),
      };
    default: {
      const never: never = status.phase;
      return { kind: 'error', message: `The server reported an unknown phase ${String(never)}` };
    }
  }
}

const SERVER_NAMES: Record<RemoteServerKind, string> = { 'llama-server': 'llama-server', vllm: 'vLLM', sglang: 'SGLang', 'k3-serve': 'k3 serve' };

/** The remote server as the status names it: endpoint, then model, server and context. */
export function describeRemote(remote: RemoteStatus): string {
  const facts = [remote.model, remote.server && SERVER_NAMES[remote.server], remote.contextTokens && `context ${remote.contextTokens} tokens`];
  const known = facts.filter((f): f is string => typeof f === 'string' && f !== '');
  return known.length ? `${remote.endpoint} (${known.join(', ')})` : remote.endpoint;
}

const ROLE_NAMES: Record<Role, string> = { completions: 'Completions', chat: 'Chat' };

/** A role's state in a word or two. */
function roleState(r: RoleStatus): string {
  switch (r.phase) {
    case 'ready':
      return 'ready';
    case 'busy':
      return 'working';
    case 'loading':
      return 'loading';
    case 'no-model':
      return 'not available';
    case 'error':
      return 'failed';
  }
}

/** One role, as the tooltip and the menu name it: `Completions: k3-mini (embedded, ready)`,
 * `Chat: kimi-k3 (remote http://gpu:8000/v1, ready)`. */
export function describeRole(role: Role, r: RoleStatus): string {
  const where = r.backend === 'embedded' ? 'embedded' : `${r.backend} ${r.where}`;
  const model = r.model ?? (r.backend === 'remote' ? 'the server\'s first model' : 'no model');
  const chatOnly = role === 'chat' && r.chats === false ? ', code completion only: cannot chat' : '';
  const memory = r.memoryBytes !== undefined ? `, ${formatBytes(r.memoryBytes)} in memory` : '';
  return `${ROLE_NAMES[role]}: ${model} (${where}, ${roleState(r)}${memory}${chatOnly})`;
}

/** Tokens per second of the last chat reply or completion that generated anything. */
export function lastSpeed(status: StatusResult): number | undefined {
  if (status.lastChat && status.lastChat.generatedTokens > 0) return status.lastChat.tokensPerSecond;
  const c = status.lastCompletion;
  if (c && c.source === 'engine' && c.generatedTokens > 0 && c.generateMs > 0) return (1000 * c.generatedTokens) / c.generateMs;
  return undefined;
}

/** `95 s` -> `1m 35s`; under a minute in seconds. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

export function describeStatus(input: StatusInput): StatusView {
  const { engine } = input;
  let text: string;
  let headline: string;
  let severity: StatusView['severity'] = 'normal';
  switch (engine.kind) {
    case 'starting':
      text = '$(loading~spin) K3';
      headline = 'Starting the engine';
      break;
    case 'loading': {
      if (engine.remote) {
        const so = formatDuration(input.now - engine.startedAt);
        text = `$(loading~spin) K3 ${engine.remote === 'model' ? 'remote loading' : 'connecting'}`;
        headline = engine.remote === 'model' ? `The remote server is loading its model (${so} so far)` : `Connecting to the remote server (${so} so far)`;
        break;
      }
      const parts = [engine.percent !== undefined ? `${Math.floor(engine.percent)}%` : 'loading'];
      if (engine.etaMs !== undefined) parts.push(`${formatDuration(engine.etaMs)} left`);
      text = `$(loading~spin) K3 ${parts.join(' · ')}`;
      headline = `Loading the model (${formatDuration(input.now - engine.startedAt)} so far${
        engine.etaMs !== undefined ? `, about ${formatDuration(engine.etaMs)} left` : ''
      })`;
      break;
    }
    case 'ready':
    case 'busy':
      if (input.thinking || engine.kind === 'busy') {
        text = '$(loading~spin) K3 thinking';
        headline = 'The engine is working';
      } else {
        text = input.completionsEnabled ? '$(sparkle) K3' : '$(circle-slash) K3';
        // Both roles named when they differ: `K3 k3-mini | chat kimi-k3`.
        const c = input.roles?.completions;
        const chat = input.roles?.chat;
        if (c && chat && (c.backend !== chat.backend || c.model !== chat.model)) {
          text += ` ${c.model ?? c.backend} | chat ${chat.model ?? chat.backend}`;
        }
        headline = input.completionsEnabled ? 'Ready' : 'Ready; ghost text is off (Alt+\\ still asks)';
      }
      break;
    case 'no-model':
      text = '$(warning) K3: no model';
      headline = engine.reason;
      severity = 'warning';
      break;
    case 'error':
      text = '$(error) K3';
      headline = engine.message;
      severity = 'error';
      break;
    case 'stopped':
      text = '$(debug-stop) K3 stopped';
      headline = engine.reason;
      severity = 'warning';
      break;
    default: {
      const never: never = engine;
      throw new Error(`unknown engine state ${JSON.stringify(never)}`);
    }
  }
  const facts = [
    ...(input.roles ? [describeRole('completions', input.roles.completions), describeRole('chat', input.roles.chat)] : []),
    ...(input.model && !input.remote ? [describeModel(input.model)] : []),
    input.remote ? `Remote: ${input.remote} (presets apply to the local engine only)` : `Preset: ${input.preset}`,
    `Last speed: ${input.lastTokensPerSecond !== undefined ? `${input.lastTokensPerSecond.toFixed(1)} tokens/s` : 'none yet'}`,
    `Completions: ${input.completionsEnabled ? 'on' : 'off'}`,
  ];
  if (input.engineVersion) facts.push(`Engine ${input.engineVersion}`);
  const tooltip = `**K3**: ${escapeMarkdown(headline)}\n\n${facts.map(escapeMarkdown).join('  \n')}\n\nClick for the K3 menu.`;
  const ariaLabel = `K3: ${headline}. ${facts.join('. ')}.`;
  return { text, tooltip, ariaLabel, severity };
}

/** `Model: k3-mini (15 MiB of weights, code completion only)`. */
export function describeModel(m: Pick<ModelInfo, 'name' | 'bytes' | 'chat' | 'path'>): string {
  return `Model: ${m.name} (${formatBytes(m.bytes)} of weights${m.chat ? '' : ', code completion only: not trained for chat'})`;
}

function escapeMarkdown(s: string): string {
  return s.replace(/[\\`*_{}[\]<>#|]/g, (c) => `\\${c}`);
}
