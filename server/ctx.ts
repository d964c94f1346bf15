// ctx.ts - the server's one context object: the connection and documents, the settings and
// initialization options, the workspace store, the scheduler, the engine host (or the
// remote backend that replaces it), and the features (completions, chat, inline edit,
// status) that every handler reaches through it. It wires them together and keeps the few
// cross-cutting decisions (which preset, where files go, what a settings change resets);
// the behaviour lives in the modules it holds. Each service
// declares the little it uses of this object (CompletionServiceHost, ChatServiceHost,
// EditServiceHost, StatusHost) and imports nothing of it.
import type { Connection, InitializeParams } from 'vscode-languageserver';
import { ChatService, type ChatServiceHost } from './chat/service';
import { CompletionService, type CompletionServiceHost, completionContext } from './completion/service';
import { ContextRing } from './completion/context';
import { EditService, type EditServiceHost } from './edit/service';
import { Documents } from './documents';
import { engineForecastCheck, enginePresetForecasts, enginePresets } from './engine/engine';
import { EngineHost, type SessionSizes } from './engine/host';
import { invalidRequest } from './errors';
import {
  DidReportProblemNotification,
  type InitializationOptions,
  type K3Problem,
  type LoadProgress,
  type PresetInfo,
  type ServerSettings,
} from '../protocol/lsp';
import { Scheduler } from './scheduler';
import { DEFAULT_SETTINGS, engineThreads, mergeSettings } from './settings';
import { RemoteBackend } from './remote/backend';
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
  /** The remote server completions and chat go to (initializationOptions.backend `remote`);
   * undefined: the local engine. */
  remote: RemoteBackend | undefined;

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
    if (opts.backend === 'remote') {
      const r = opts.remote ?? { endpoint: '' };
      this.init.backend = 'remote';
      this.remote = new RemoteBackend(
        {
          endpoint: typeof r.endpoint === 'string' ? r.endpoint : '',
          ...(typeof r.model === 'string' && r.model ? { model: r.model } : {}),
          ...(typeof r.apiKey === 'string' && r.apiKey ? { apiKey: r.apiKey } : {}),
          ...(typeof r.timeoutMs === 'number' && Number.isFinite(r.timeoutMs) && r.timeoutMs > 0 ? { timeoutMs: r.timeoutMs } : {}),
        },
        this.init.modelPath || undefined,
        { changed: () => this.status.changed(), log: (m) => this.log(m), warn: (p) => this.reportProblem(p) },
      );
    }
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
