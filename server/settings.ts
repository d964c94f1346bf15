// settings.ts - the server's settings: defaults, and the one function that merges the `k3`
// section the client sends (initializationOptions.settings, workspace/didChangeConfiguration)
// into checked values. A value of the wrong type or out of range keeps the default; keys the
// server does not use (ghost-text policy, debounce) are ignored.
import * as os from 'node:os';
import type { MultilineMode, ServerSettings, SettingsSection } from '../protocol/lsp';

export const DEFAULT_SETTINGS: ServerSettings = {
  completions: {
    multiline: 'auto',
    maxLines: 8,
    maxTokens: 128,
    maxPromptTokens: 2048,
    maxContextTokens: 512,
    snippetTokens: 192,
    heal: true,
    filter: true,
    fim: true,
    warmup: true,
    remoteRoute: 'auto',
  },
  // maxTokens: k3.chat.maxTokens's default (extension/settings.ts).
  chat: { maxTokens: 4096, thinking: true, maxContext: 32768 },
  state: { maxBytes: 4 * 1024 ** 3, maxConversations: 100 },
  engine: { threads: 0, speculation: 8 },
};

function num(v: unknown, fallback: number, min: number, max: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max ? Math.floor(v) : fallback;
}

function bool(v: unknown, fallback: boolean): boolean {
  return typeof v === 'boolean' ? v : fallback;
}

/** A multi-line mode; the boolean of earlier clients reads as `always` (true) or `auto` (false). */
function multiline(v: unknown, fallback: MultilineMode): MultilineMode {
  if (v === 'auto' || v === 'always' || v === 'never') return v;
  if (typeof v === 'boolean') return v ? 'always' : 'auto';
  return fallback;
}

function section(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};
}

/** `base` with the values of `section` that are valid. */
export function mergeSettings(base: ServerSettings, input: SettingsSection | unknown): ServerSettings {
  const s = section(input);
  const c = section(s.completions);
  const chat = section(s.chat);
  const st = section(s.state);
  const e = section(s.engine);
  const b = base;
  return {
    completions: {
      multiline: multiline(c.multiline, b.completions.multiline),
      maxLines: num(c.maxLines, b.completions.maxLines, 1, 100_000),
      maxTokens: num(c.maxTokens, b.completions.maxTokens, 1, 100_000),
      maxPromptTokens: num(c.maxPromptTokens, b.completions.maxPromptTokens, 64, 1_000_000),
      maxContextTokens: num(c.maxContextTokens, b.completions.maxContextTokens, 0, 1_000_000),
      snippetTokens: num(c.snippetTokens, b.completions.snippetTokens, 0, 1_000_000),
      heal: bool(c.heal, b.completions.heal),
      filter: bool(c.filter, b.completions.filter),
      fim: bool(c.fim, b.completions.fim),
      warmup: bool(c.warmup, b.completions.warmup),
      remoteRoute: c.remoteRoute === 'auto' || c.remoteRoute === 'completions' || c.remoteRoute === 'infill' ? c.remoteRoute : b.completions.remoteRoute,
    },
    chat: {
      maxTokens: num(chat.maxTokens, b.chat.maxTokens, 1, 1_000_000),
      thinking: bool(chat.thinking, b.chat.thinking),
      maxContext: num(chat.maxContext, b.chat.maxContext, 256, 1 << 20),
    },
    state: {
      maxBytes: num(st.maxBytes, b.state.maxBytes, 0, Number.MAX_SAFE_INTEGER),
      maxConversations: num(st.maxConversations, b.state.maxConversations, 1, 100_000),
    },
    engine: {
      threads: num(e.threads, b.engine.threads, 0, 1024),
      speculation: num(e.speculation, b.engine.speculation, 0, 16),
    },
  };
}

/** The thread count a setting of 0 means: every core but one, at least one. */
export function engineThreads(settings: ServerSettings): number {
  if (settings.engine.threads > 0) return settings.engine.threads;
  return Math.max(1, os.availableParallelism() - 1);
}
