// settings.ts - the one place that reads the `k3.*` settings declared in package.json and
// turns them into checked values (a wrong type in settings.json falls back to the default).
// The remote backend's API key is not a setting: it lives in SecretStorage (apiKey.ts).
// It takes the configuration as an argument and imports `vscode` only for types, so it runs
// in unit tests; it does not watch for changes (ctx.ts does).
import type * as vscode from 'vscode';
import type { MultilineMode, RemoteRoute, Role, RoleBackend, SettingsSection } from '../protocol/lsp';

export interface CompletionSettings {
  /** Ghost text while typing; when false only the manual trigger asks. */
  enabled: boolean;
  /** Language ids where ghost text never appears on its own. */
  disabledLanguages: string[];
  /** When completions may run over several lines (the server shapes them). */
  multiline: MultilineMode;
  /** Most lines of a multi-line completion. */
  maxLines: number;
  /** Fixed debounce in milliseconds, or null for the adaptive one. */
  debounceMs: number | null;
  /** Prefill on context changes and compute the next suggestion after an accept (warmup.ts). */
  warmup: boolean;
  /** Which route of a remote completions server serves ghost text (`k3.completions.remote.route`). */
  remoteRoute: RemoteRoute;
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

/** What serves one role (ghost text or chat). */
export interface RoleSettings {
  backend: RoleBackend;
  /** Where the backend came from: the role's own setting, or (`migrated`) the older
   * `k3.backend` / `k3.modelPath` a user set before the roles existed, or the default. */
  source: 'setting' | 'migrated' | 'default';
  /** The role's server: `k3.<role>.remote.endpoint/model` where set, else `k3.remote.*`. */
  remote: RemoteSettings;
}

export interface Settings {
  /** The older single choice (`k3.backend`), read only to migrate it into `roles`. */
  backend: 'local' | 'remote';
  /** The shared server (`k3.remote.*`) the roles' own endpoints override. */
  remote: RemoteSettings;
  /** What serves ghost text (`completions`) and chat. */
  roles: Record<Role, RoleSettings>;
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
export const SERVER_SETTINGS = [
  'k3.modelPath',
  'k3.preset',
  'k3.backend',
  'k3.remote.endpoint',
  'k3.remote.model',
  'k3.remote.timeoutMs',
  'k3.completions.backend',
  'k3.completions.remote.endpoint',
  'k3.completions.remote.model',
  'k3.chat.backend',
  'k3.chat.remote.endpoint',
  'k3.chat.remote.model',
  'k3.chat.maxContext',
] as const;

/** The key of the remote backend's API key in VS Code's SecretStorage (never in settings):
 * the shared server's. */
export const REMOTE_API_KEY_SECRET = 'k3.remote.apiKey';

/** A role's own API key, for a role with its own endpoint; absent: the shared key. */
export function roleApiKeySecret(role: Role): string {
  return `k3.${role}.remote.apiKey`;
}

export const ROLE_BACKENDS: readonly RoleBackend[] = ['embedded', 'local', 'remote'];

export const DEFAULT_REMOTE_ENDPOINT = 'http://127.0.0.1:8080';
export const DEFAULT_REMOTE_TIMEOUT_MS = 60_000;
/** k3.chat.maxTokens's default and bounds (package.json says the same). K3 thinks before it
 * answers; 4,096 tokens leave room for both in most replies. */
export const DEFAULT_CHAT_MAX_TOKENS = 4096;
const CHAT_MAX_TOKENS_RANGE = [16, 131_072] as const;
/** k3.chat.maxContext's default and bounds (package.json and the server say the same). */
export const DEFAULT_CHAT_MAX_CONTEXT = 32_768;
const CHAT_MAX_CONTEXT_RANGE = [256, 1 << 20] as const;

/** k3.completions.maxLines's default and bounds (package.json says the same). */
export const DEFAULT_MAX_LINES = 8;
const MAX_LINES_RANGE = [1, 100] as const;

const DEFAULT_DISABLED_LANGUAGES = ['plaintext', 'markdown', 'scminput'];

function str(v: unknown, fallback: string): string {
  return typeof v === 'string' ? v : fallback;
}

function bool(v: unknown, fallback: boolean): boolean {
  return typeof v === 'boolean' ? v : fallback;
}

/** k3.completions.multiline: one of the modes; the boolean of earlier versions reads as
 * `always` (true) or `auto` (false, the old default: auto keeps one line inside a line, and
 * offers a block where the old one-line mode showed nothing). */
function multilineMode(v: unknown): MultilineMode {
  if (v === 'auto' || v === 'always' || v === 'never') return v;
  if (v === true) return 'always';
  return 'auto';
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
  const maxLines = config.get<unknown>('completions.maxLines');
  const backend = trustedValue(config, 'backend', workspaceTrusted);
  const endpoint = trustedValue(config, 'remote.endpoint', workspaceTrusted);
  const timeout = config.get<unknown>('remote.timeoutMs');
  const chatMax = config.get<unknown>('chat.maxTokens');
  const legacyBackend = backend.value === 'remote' ? 'remote' : 'local';
  const remote: RemoteSettings = {
    endpoint: str(endpoint.value, DEFAULT_REMOTE_ENDPOINT).trim() || DEFAULT_REMOTE_ENDPOINT,
    model: str(config.get<unknown>('remote.model'), '').trim(),
    timeoutMs:
      typeof timeout === 'number' && Number.isFinite(timeout) ? Math.min(3_600_000, Math.max(1000, Math.round(timeout))) : DEFAULT_REMOTE_TIMEOUT_MS,
  };
  const roles = {} as Record<Role, RoleSettings>;
  let roleIgnored = false;
  for (const role of ['completions', 'chat'] as const) {
    const resolved = readRole(config, role, workspaceTrusted, { legacyBackend, legacySet: backend.value !== undefined && isSet(config, 'backend'), modelPath: modelPath.trim(), remote });
    roles[role] = resolved.settings;
    roleIgnored ||= resolved.ignored;
  }
  const chatContext = config.get<unknown>('chat.maxContext');
  return {
    backend: legacyBackend,
    remote,
    roles,
    remoteIgnored: backend.ignored || endpoint.ignored || roleIgnored,
    modelPath: modelPath.trim(),
    modelPathIgnored,
    preset: str(config.get<unknown>('preset'), 'auto') || 'auto',
    presetExplicit: [preset?.globalValue, preset?.workspaceValue, preset?.workspaceFolderValue].some((v) => typeof v === 'string'),
    completions: {
      enabled: bool(config.get<unknown>('completions.enabled'), true),
      disabledLanguages: Array.isArray(languages)
        ? languages.filter((l): l is string => typeof l === 'string')
        : DEFAULT_DISABLED_LANGUAGES,
      multiline: multilineMode(config.get<unknown>('completions.multiline')),
      maxLines:
        typeof maxLines === 'number' && Number.isFinite(maxLines)
          ? Math.min(MAX_LINES_RANGE[1], Math.max(MAX_LINES_RANGE[0], Math.round(maxLines)))
          : DEFAULT_MAX_LINES,
      debounceMs:
        typeof debounce === 'number' && Number.isFinite(debounce) ? Math.min(10000, Math.max(0, Math.round(debounce))) : null,
      warmup: bool(config.get<unknown>('completions.warmup'), true),
      remoteRoute: remoteRoute(config.get<unknown>('completions.remote.route')),
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

/** k3.completions.remote.route: one of the routes, else `auto`. */
function remoteRoute(v: unknown): RemoteRoute {
  return v === 'completions' || v === 'infill' ? v : 'auto';
}

/** Whether a user or workspace set `key` (a default is not a choice). */
function isSet(config: ConfigurationSource, key: string): boolean {
  const i = config.inspect<unknown>(key);
  return i?.globalValue !== undefined || i?.workspaceValue !== undefined || i?.workspaceFolderValue !== undefined;
}

/**
 * One role's backend. Its own setting (`k3.<role>.backend`) decides when set; otherwise what
 * a user chose before the roles existed carries over: `k3.backend: remote` makes both roles
 * remote with the shared server; a `k3.modelPath` with the local backend makes both roles
 * local; nothing set gives the defaults (both embedded: ghost text from k3-mini, and the chat
 * notice that it cannot chat until chat is pointed elsewhere).
 */
export function readRole(
  config: ConfigurationSource,
  role: Role,
  workspaceTrusted: boolean,
  older: { legacyBackend: 'local' | 'remote'; legacySet: boolean; modelPath: string; remote: RemoteSettings },
): { settings: RoleSettings; ignored: boolean } {
  const own = trustedValue(config, `${role}.backend`, workspaceTrusted);
  const ownEndpoint = trustedValue(config, `${role}.remote.endpoint`, workspaceTrusted);
  const ownModel = str(config.get<unknown>(`${role}.remote.model`), '').trim();
  const remote: RemoteSettings = {
    endpoint: str(ownEndpoint.value, '').trim() || older.remote.endpoint,
    model: ownModel || (str(ownEndpoint.value, '').trim() ? '' : older.remote.model),
    timeoutMs: older.remote.timeoutMs,
  };
  const ignored = own.ignored || ownEndpoint.ignored;
  // What counts as set: any layer in a trusted workspace, the user's own in an untrusted one.
  const i = config.inspect<unknown>(`${role}.backend`);
  const set = workspaceTrusted ? isSet(config, `${role}.backend`) : i?.globalValue !== undefined;
  const chosen = set && ROLE_BACKENDS.includes(own.value as RoleBackend);
  if (chosen) return { settings: { backend: own.value as RoleBackend, source: 'setting', remote }, ignored };
  if (older.legacySet && older.legacyBackend === 'remote') return { settings: { backend: 'remote', source: 'migrated', remote }, ignored };
  if (older.modelPath !== '') return { settings: { backend: 'local', source: 'migrated', remote }, ignored };
  return { settings: { backend: 'embedded', source: 'default', remote }, ignored };
}

/** The part of the settings the server uses, in its shape (initializationOptions.settings). */
export function serverSection(settings: Settings): SettingsSection {
  const { multiline, maxLines, warmup, remoteRoute } = settings.completions;
  return { completions: { multiline, maxLines, warmup, remoteRoute }, chat: { maxTokens: settings.chat.maxTokens, maxContext: settings.chat.maxContext } };
}
