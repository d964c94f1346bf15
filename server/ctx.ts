// ctx.ts - the server's one context object: the connection and documents, the settings and
// initialization options, the workspace store, the scheduler, the engine host and the
// remote backends, each role (ghost text, chat) on its own (roles.ts), and the features
// (completions, chat, inline edit, status) that every handler reaches through it. It wires
// them together and keeps the few cross-cutting decisions (which preset, where files go,
// what a settings change resets); the behaviour lives in the modules it holds. Each service
// declares the little it uses of this object (CompletionServiceHost, ChatServiceHost,
// EditServiceHost, StatusHost) and imports nothing of it.
import type { Connection, InitializeParams } from 'vscode-languageserver';
import { ChatService, type ChatServiceHost } from './chat/service';
import { CompletionService, type CompletionServiceHost, completionContext } from './completion/service';
import { ContextRing } from './completion/context';
import { EditService, type EditServiceHost } from './edit/service';
import { Documents } from './documents';
import { engineForecastCheck, enginePresetFirstTokens, enginePresetForecasts, enginePresets } from './engine/engine';
import { EngineHost, type SessionSizes } from './engine/host';
import { action, invalidRequest } from './errors';
import {
  DidReportProblemNotification,
  type InitializationOptions,
  type K3Problem,
  type LoadProgress,
  type PresetInfo,
  type RemoteOptions,
  type Role,
  type ServerSettings,
} from '../protocol/lsp';
import { Scheduler } from './scheduler';
import { DEFAULT_SETTINGS, engineThreads, mergeSettings } from './settings';
import { RemoteBackend } from './remote/backend';
import { planRoles, ROLES, sameRemote, type RolesPlan } from './roles';
import { readModelInfo } from './engine/modelInfo';
import { StatusReporter, type StatusHost } from './status';
import { WorkspaceStore } from './state/store';

export class ServerCtx implements CompletionServiceHost, ChatServiceHost, EditServiceHost, StatusHost {
  settings: ServerSettings = DEFAULT_SETTINGS;
  init: InitializationOptions = {};
  /** Workspace folder paths, for display paths in prompts. */
  roots: string[] = [];
  /** Whether the client shows window/workDoneProgress. */
  clientProgress = false;
  store: WorkspaceStore;
  readonly status: StatusReporter;
  readonly scheduler: Scheduler;
  readonly host: EngineHost;
  readonly ring: ContextRing;
  readonly completions: CompletionService;
  readonly chat: ChatService;
  readonly edit: EditService;
  readonly documents = new Documents();
  /** Receives the progress of the load in flight (its work-done progress). */
  loadProgressSink: ((p: LoadProgress) => void) | undefined;
  /** Which backend serves each role (roles.ts). */
  plan: RolesPlan = planRoles({});
  /** The remote server of each remote role (one object when both name the same server);
   * undefined: the role runs on the local engine. */
  remotes: Record<Role, RemoteBackend | undefined> = { completions: undefined, chat: undefined };

  constructor(readonly connection: Connection) {
    this.status = new StatusReporter(this);
    this.scheduler = new Scheduler(() => this.status.changed());
    this.store = new WorkspaceStore(undefined, (p) => this.reportProblem(p));
    this.host = new EngineHost(this.scheduler, () => this.store, () => this.sessionSizes(), {
      changed: () => this.status.changed(),
      progress: (p) => this.loadProgressSink?.(p),
      accept: (engine) => void this.chat.renderer(engine),
    });
    this.ring = new ContextRing(
      (uri) => this.documents.get(uri),
      () => this.roots,
    );
    this.completions = new CompletionService(this);
    this.chat = new ChatService(this);
    this.edit = new EditService(this);
  }

  /** Takes the initialize request's options. */
  initialize(params: InitializeParams): void {
    const opts = (params.initializationOptions ?? {}) as InitializationOptions;
    const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x !== '') : []);
    this.init = {
      modelPath: typeof opts.modelPath === 'string' ? opts.modelPath : '',
      storagePath: typeof opts.storagePath === 'string' && opts.storagePath ? opts.storagePath : undefined,
      preset: typeof opts.preset === 'string' && opts.preset ? opts.preset : undefined,
    };
    this.settings = mergeSettings(DEFAULT_SETTINGS, opts.settings);
    this.plan = planRoles(opts);
    this.init.modelPath = this.plan.enginePath;
    const { completions, chat } = this.plan;
    if (completions.remote) this.remotes.completions = this.newRemote(completions.remote, completions.modelPath);
    if (chat.remote) {
      this.remotes.chat = sameRemote(completions.remote, chat.remote) ? this.remotes.completions : this.newRemote(chat.remote, undefined);
    }
    if (completions.remote && chat.remote) this.init.backend = 'remote';
    this.clientProgress = params.capabilities?.window?.workDoneProgress === true;
    const folders = params.workspaceFolders ?? [];
    const uris = folders.length ? folders.map((f) => f.uri) : params.rootUri ? [params.rootUri] : [];
    this.roots = uris.flatMap((u) => {
      try {
        return [decodeURIComponent(new URL(u).pathname)];
      } catch {
        return [];
      }
    });
    this.store = new WorkspaceStore(this.init.storagePath, (p) => this.reportProblem(p), {
      legacy: strings(opts.legacyStoragePaths),
      workspace: strings(opts.workspace),
    });
  }

  /** A remote backend; `tokenizerDir`: where the completion prompt's tokenizer may be (the
   * chat role sends messages, not ids). */
  private newRemote(options: RemoteOptions, tokenizerDir: string | undefined): RemoteBackend {
    return new RemoteBackend(options, tokenizerDir || undefined, {
      changed: () => this.status.changed(),
      log: (m) => this.log(m),
      warn: (p) => this.reportProblem(p),
    });
  }

  /** The distinct remote backends in use. */
  get remoteBackends(): RemoteBackend[] {
    return [...new Set(ROLES.map((r) => this.remotes[r]).filter((r): r is RemoteBackend => r !== undefined))];
  }

  get completionRemote(): RemoteBackend | undefined {
    return this.remotes.completions;
  }

  get chatRemote(): RemoteBackend | undefined {
    return this.remotes.chat;
  }

  /** Whether any role runs on the local engine. */
  get usesEngine(): boolean {
    return ROLES.some((r) => this.remotes[r] === undefined);
  }

  /** Why the chat role cannot be served (two different local models), with both numbers;
   * worked out once, since the plan holds for the server's life. */
  chatRefusal(): K3Problem | undefined {
    if (this.refusal === undefined) this.refusal = this.refusalOf(this.plan.conflict) ?? null;
    return this.refusal ?? undefined;
  }

  private refusal: K3Problem | null | undefined;

  private refusalOf(c: RolesPlan['conflict']): K3Problem | undefined {
    if (!c) return undefined;
    const size = (dir: string): string => {
      try {
        return `${(readModelInfo(dir).bytes / 1e9).toFixed(2)} GB of weights`;
      } catch {
        return 'size unknown: its config.json cannot be read';
      }
    };
    return {
      kind: 'no-model',
      action: action('choose-chat-backend'),
      message:
        `Chat is set to the local model at ${c.chat} (${size(c.chat)}) and completions to the one at ${c.completions} ` +
        `(${size(c.completions)}); the language server holds one local model at a time, so chat is not served. ` +
        'Point chat at the same model or at a remote server (K3: Choose Chat Backend).',
    };
  }

  /** The preset in use: the workspace's saved choice, else the client's, else auto (also
   * when the name is not one the engine knows). */
  get preset(): string {
    const chosen = this.store.readWorkspace().preset ?? this.init.preset ?? 'auto';
    return this.presetIds().includes(chosen) ? chosen : 'auto';
  }

  /** The names the engine knows, without the forecasts presets() reads a profile for. */
  private presetIds(): string[] {
    return ['auto', ...enginePresets().map((p) => p.name), 'mapped'];
  }

  presets(): PresetInfo[] {
    const forecasts = enginePresetForecasts();
    const check = Object.keys(forecasts).length > 0 ? engineForecastCheck() : null;
    const firstTokens = Object.keys(forecasts).length > 0 ? enginePresetFirstTokens() : {};
    return [
      { id: 'auto', label: 'Auto', description: 'Budgets sized from the memory this machine has free.' },
      ...enginePresets().map((p) => ({
        id: p.name,
        label: p.name[0].toUpperCase() + p.name.slice(1),
        description: p.note,
        trunkBytes: p.trunkBytes,
        expertCacheBytes: p.expertCacheBytes,
        peakBytes: p.fullScalePeakRss,
        ...(forecasts[p.name] !== undefined ? { secondsPerToken: forecasts[p.name], ...(check ? { forecastCheck: check } : {}) } : {}),
        ...(firstTokens[p.name] ? { firstTokenSeconds: firstTokens[p.name].map(({ tokens, seconds }) => ({ tokens, seconds })) } : {}),
      })),
      { id: 'mapped', label: 'Mapped', description: 'Every weight mapped from the shards; the operating system decides what stays in memory.' },
    ];
  }

  checkPreset(preset: unknown): string {
    if (typeof preset !== 'string' || !this.presetIds().includes(preset)) {
      throw invalidRequest(`unknown preset ${JSON.stringify(preset)}; k3/presets/list names them`);
    }
    return preset;
  }

  /** The sessions a load opens, from the settings at the time of the load. */
  private sessionSizes(): SessionSizes {
    const s = this.settings;
    return { threads: engineThreads(s), completionContext: completionContext(s.completions), chatContext: s.chat.maxContext };
  }

  /** Applies a `k3` settings section (workspace/didChangeConfiguration). */
  updateSettings(section: unknown): void {
    this.settings = mergeSettings(this.settings, section);
    this.completions.cache.clear();
  }

  reportProblem(p: K3Problem): void {
    this.log(`problem (${p.kind}): ${p.message}${p.detail ? ` [${p.detail}]` : ''}`);
    void this.connection.sendNotification(DidReportProblemNotification.type, p);
    // Storage problems show in the status (the chat panel says history is not kept).
    if (p.kind === 'storage-unavailable') this.status.changed();
  }

  /** Detail a user sees in K3: Show Logs only with the output's level at Debug. */
  debug(message: string): void {
    this.connection.console.debug(message);
  }

  log(message: string): void {
    this.connection.console.log(message);
  }
}
