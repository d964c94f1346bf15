// settings.ts - the one place that reads the `k3.*` settings declared in package.json and
// turns them into checked values (a wrong type in settings.json falls back to the default).
// The remote backend's API key is not a setting: it lives in SecretStorage (apiKey.ts).
// It takes the configuration as an argument and imports `vscode` only for types, so it runs
// in unit tests; it does not watch for changes (ctx.ts does).
import type * as vscode from 'vscode';
import type { SettingsSection } from '../protocol/lsp';

export interface CompletionSettings {
  /** Ghost text while typing; when false only the manual trigger asks. */
  enabled: boolean;
  /** Language ids where ghost text never appears on its own. */
  disabledLanguages: string[];
  /** Completions of several lines; false cuts them at the end of the line. */
  multiline: boolean;
  /** Fixed debounce in milliseconds, or null for the adaptive one. */
  debounceMs: number | null;
}

export interface ChatSettings {
  /** Most tokens of one chat reply, reasoning included. */
  maxTokens: number;
  /** Positions of the chat's context: a conversation longer than it leaves out its oldest
   * turns (docs/PROMPTS.md, "Long conversations"). */
  maxContext: number;
}

export interface RemoteSettings {
  /** Base URL of the OpenAI-compatible API. */
  endpoint: string;
  /** Model id; empty: the first the server lists. */
  model: string;
  /** Most milliseconds to wait for an answer to start or between streamed pieces. */
  timeoutMs: number;
}

export interface Settings {
  /** `local`: the engine runs in the language server; `remote`: an OpenAI-compatible server. */
  backend: 'local' | 'remote';
  remote: RemoteSettings;
  /** True when a workspace-level backend or endpoint was ignored because the workspace is not trusted. */
  remoteIgnored: boolean;
  /** Model folder; empty means the embedded default model. With the remote backend, only its tokenizer is used. */
  modelPath: string;
  /** True when a workspace-level model folder was ignored because the workspace is not trusted. */
  modelPathIgnored: boolean;
  /** Memory preset name. */
  preset: string;
  /** True when the user set `k3.preset`; otherwise the server keeps the workspace's own choice. */
  presetExplicit: boolean;
  completions: CompletionSettings;
  chat: ChatSettings;
}

/** The part of vscode.WorkspaceConfiguration this reads (section `k3`). */
export type ConfigurationSource = Pick<vscode.WorkspaceConfiguration, 'get' | 'inspect'>;

/** Settings whose change needs the server restarted (they go in initializationOptions). */
export const SERVER_SETTINGS = ['k3.modelPath', 'k3.preset', 'k3.backend', 'k3.remote.endpoint', 'k3.remote.model', 'k3.remote.timeoutMs', 'k3.chat.maxContext'] as const;

/** The key of the remote backend's API key in VS Code's SecretStorage (never in settings). */
export const REMOTE_API_KEY_SECRET = 'k3.remote.apiKey';

export const DEFAULT_REMOTE_ENDPOINT = 'http://127.0.0.1:8080';
export const DEFAULT_REMOTE_TIMEOUT_MS = 60_000;
/** k3.chat.maxTokens's default and bounds (package.json says the same). K3 thinks before it
 * answers; 4,096 tokens leave room for both in most replies. */
export const DEFAULT_CHAT_MAX_TOKENS = 4096;
const CHAT_MAX_TOKENS_RANGE = [16, 131_072] as const;
/** k3.chat.maxContext's default and bounds (package.json and the server say the same). */
export const DEFAULT_CHAT_MAX_CONTEXT = 32_768;
const CHAT_MAX_CONTEXT_RANGE = [256, 1 << 20] as const;

const DEFAULT_DISABLED_LANGUAGES = ['plaintext', 'markdown', 'scminput'];

function str(v: unknown, fallback: string): string {
  return typeof v === 'string' ? v : fallback;
}

function bool(v: unknown, fallback: boolean): boolean {
  return typeof v === 'boolean' ? v : fallback;
}

/** A setting's value; in an untrusted workspace, the user's own (workspace layers ignored). */
function trustedValue(config: ConfigurationSource, key: string, workspaceTrusted: boolean): { value: unknown; ignored: boolean } {
  const i = config.inspect<unknown>(key);
  const workspaceValue = i?.workspaceFolderValue ?? i?.workspaceValue;
  if (workspaceTrusted || workspaceValue === undefined) return { value: config.get<unknown>(key), ignored: false };
  return { value: i?.globalValue ?? i?.defaultValue, ignored: true };
}

/**
 * Reads the `k3` section. A model folder, backend or remote endpoint from the workspace or
 * folder settings counts only in a trusted workspace: an untrusted repository must not point
 * the engine at files of its choosing, nor send your code and API key to a server of its
 * choosing.
 */
export function readSettings(config: ConfigurationSource, workspaceTrusted: boolean): Settings {
  const model = config.inspect<unknown>('modelPath');
  const workspaceModel = model?.workspaceFolderValue ?? model?.workspaceValue;
  let modelPath: string;
  let modelPathIgnored = false;
  if (workspaceTrusted || workspaceModel === undefined) {
    modelPath = str(config.get<unknown>('modelPath'), '');
  } else {
    modelPath = str(model?.globalValue ?? model?.defaultValue, '');
    modelPathIgnored = true;
  }

  const preset = config.inspect<unknown>('preset');
  const languages = config.get<unknown>('completions.disabledLanguages');
  const debounce = config.get<unknown>('completions.debounceMs');
  const backend = trustedValue(config, 'backend', workspaceTrusted);
  const endpoint = trustedValue(config, 'remote.endpoint', workspaceTrusted);
  const timeout = config.get<unknown>('remote.timeoutMs');
  const chatMax = config.get<unknown>('chat.maxTokens');
  const chatContext = config.get<unknown>('chat.maxContext');
  return {
    backend: backend.value === 'remote' ? 'remote' : 'local',
    remote: {
      endpoint: str(endpoint.value, DEFAULT_REMOTE_ENDPOINT).trim() || DEFAULT_REMOTE_ENDPOINT,
      model: str(config.get<unknown>('remote.model'), '').trim(),
      timeoutMs:
        typeof timeout === 'number' && Number.isFinite(timeout) ? Math.min(3_600_000, Math.max(1000, Math.round(timeout))) : DEFAULT_REMOTE_TIMEOUT_MS,
    },
    remoteIgnored: backend.ignored || endpoint.ignored,
    modelPath: modelPath.trim(),
    modelPathIgnored,
    preset: str(config.get<unknown>('preset'), 'auto') || 'auto',
    presetExplicit: [preset?.globalValue, preset?.workspaceValue, preset?.workspaceFolderValue].some((v) => typeof v === 'string'),
    completions: {
      enabled: bool(config.get<unknown>('completions.enabled'), true),
      disabledLanguages: Array.isArray(languages)
        ? languages.filter((l): l is string => typeof l === 'string')
        : DEFAULT_DISABLED_LANGUAGES,
      multiline: bool(config.get<unknown>('completions.multiline'), false),
      debounceMs:
        typeof debounce === 'number' && Number.isFinite(debounce) ? Math.min(10000, Math.max(0, Math.round(debounce))) : null,
    },
    chat: {
      maxTokens:
        typeof chatMax === 'number' && Number.isFinite(chatMax)
          ? Math.min(CHAT_MAX_TOKENS_RANGE[1], Math.max(CHAT_MAX_TOKENS_RANGE[0], Math.round(chatMax)))
          : DEFAULT_CHAT_MAX_TOKENS,
      maxContext:
        typeof chatContext === 'number' && Number.isFinite(chatContext)
          ? Math.min(CHAT_MAX_CONTEXT_RANGE[1], Math.max(CHAT_MAX_CONTEXT_RANGE[0], Math.round(chatContext)))
          : DEFAULT_CHAT_MAX_CONTEXT,
    },
  };
}

/** The part of the settings the server uses, in its shape (initializationOptions.settings). */
export function serverSection(settings: Settings): SettingsSection {
  return {
    completions: { multiline: settings.completions.multiline },
    chat: { maxTokens: settings.chat.maxTokens, maxContext: settings.chat.maxContext },
  };
}
