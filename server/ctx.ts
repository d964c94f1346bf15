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
import { EngineHost, type MemoryNeed, type SessionSizes } from './engine/host';
import { invalidRequest, K3Failure } from './errors';
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
import { StatusReporter, type StatusHost } from './status';
import { WorkspaceStore } from './state/store';

/** Bytes as a person reads them in a refusal: GB with two decimals, MB below a GB. */
export function memoryText(b: number): string {
  return b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`;
}

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
  /** The chat role's own local model, when it is not the completions role's (roles.ts
   * chatEnginePath); undefined: `host` serves every local role. */
  chatEngine: EngineHost | undefined;
  /** The remote server of each remote role (one object when both name the same server);
   * undefined: the role runs on the local engine. */
  remotes: Record<Role, RemoteBackend | undefined> = { completions: undefined, chat: undefined };

  constructor(readonly connection: Connection) {
    this.status = new StatusReporter(this);
    this.scheduler = new Scheduler(() => this.status.changed());
    this.store = new WorkspaceStore(undefined, (p) => this.reportProblem(p));
    this.host = this.newHost('both');
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
    if (this.plan.chatEnginePath) this.chatEngine = this.newHost('chat');
    const { completions, chat } = this.plan;
    if (completions.remote) {
      this.remotes.completions = this.newRemote(completions.remote, completions.modelPath);
      this.remotes.completions.routeSetting = this.settings.completions.remoteRoute;
    }
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

  /** An engine host: the one that serves both local roles, or the chat role's own. */
  private newHost(serves: 'both' | 'chat'): EngineHost {
    return new EngineHost(
      this.scheduler,
      () => this.store,
      () => this.sessionSizes(),
      {
        changed: () => this.status.changed(),
        progress: (p) => this.loadProgressSink?.(p),
        accept: (engine) => void this.chat.renderer(engine),
      },
      serves,
    );
  }

  /** The host of the local model that serves chat (and inline edit). */
  get chatHost(): EngineHost {
    return this.chatEngine ?? this.host;
  }

  /** The hosts of the local models, the completions role's first. */
  get engineHosts(): EngineHost[] {
    return this.chatEngine ? [this.host, this.chatEngine] : [this.host];
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

  /** The memory check of the chat role's own model, loaded after the completions role's:
   * both must fit together (their plans: weights, budgets, contexts) in the memory the
   * machine has available, else the chat model is refused with both numbers. */
  chatAdmission(chatPath: string): (need: MemoryNeed) => void {
    return (need) => {
      const first = this.host.loaded;
      if (!first || need.available === 0) return;
      const gb = memoryText;
      const chatBytes = need.modelBytes + need.contextBytes;
      const firstBytes = first.need.modelBytes + first.need.contextBytes;
      if (chatBytes + firstBytes <= need.available) return;
      throw new K3Failure(
        'out-of-memory',
        `Chat is set to the local model at ${chatPath}, which needs ${gb(chatBytes)} (${gb(need.modelBytes)} of weights and budgets, ` +
          `${gb(need.contextBytes)} of context), and completions to the one at ${first.modelPath}, which holds ${gb(firstBytes)}: ` +
          `${gb(chatBytes + firstBytes)} together, more than the ${gb(need.available)} this machine has available. ` +
          'Point chat at the same model or at a remote server (K3: Choose Chat Backend), or choose a smaller memory preset.',
        undefined,
        `chat ${chatBytes} B + completions ${firstBytes} B > available ${need.available} B`,
        'choose-chat-backend',
      );
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
    const remote = this.remotes.completions;
    if (remote && remote.routeSetting !== this.settings.completions.remoteRoute) {
      remote.routeSetting = this.settings.completions.remoteRoute;
      remote.logRoute();
      this.status.changed();
    }
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
