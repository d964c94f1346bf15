// ctx.ts - the extension's one context object. It owns the language client and its
// lifecycle (start, stop, restart with progress, crash decisions), the current settings,
// what the engine is doing and the status bar item that says so, the ghost-text policy and
// the chat view, and the remote backend's API key (SecretStorage only). Commands (commands.ts) and main.ts reach everything through it; nothing
// else keeps extension state.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { DidChangeConfigurationNotification, State, type LanguageClient } from 'vscode-languageclient/node';
import {
  DidChangeStatusNotification,
  DidReportProblemNotification,
  ModelUnloadRequest,
  PresetsSetRequest,
  RemoteApiKeyRequest,
  StateClearRequest,
  StatusRequest,
  type K3Action,
  type ModelInfo,
  type StatusResult,
} from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import { ServerChatBackend } from './chatBackend';
import { CHAT_VIEW_ID, ChatViewProvider } from './chatView';
import { createClient, type StorageLocation } from './client';
import { CompletionPolicy } from './completions';
import { checkModelFolder } from './modelFolder';
import { RestartPolicy, type CrashDecision, type KnownFailure } from './restart';
import { REMOTE_API_KEY_SECRET, readSettings, serverSection, type Settings } from './settings';
import { describeRemote, describeStatus, engineFromStatus, formatDuration, lastSpeed, type EngineView } from './status';
import { legacyStorageFolders, workspaceIdentity, workspaceStorageFolder } from './storage';

/** A load that ends sooner than this shows no notification, only the status bar. */
const QUIET_LOAD_MS = 1500;
/** A thinking state shorter than this is not painted, so quick answers do not flicker. */
const QUIET_THINKING_MS = 300;

export class Ctx {
  readonly output: vscode.LogOutputChannel;
  readonly statusItem: vscode.StatusBarItem;
  readonly completions: CompletionPolicy;
  readonly chat: ChatViewProvider;
  private readonly chatBackend: ServerChatBackend;
  settings: Settings;
  client: LanguageClient | undefined;
  engine: EngineView = { kind: 'starting' };
  engineVersion: string | undefined;
  lastTokensPerSecond: number | undefined;
  /** The preset the server reports in use (the workspace's choice); the setting until it does. */
  serverPreset: string | undefined;
  /** The remote server and model, as the server reports them (k3.backend remote). */
  remoteStatus: string | undefined;
  /** The model the local engine runs or loads, as the server reports it. */
  model: ModelInfo | undefined;
  /** Why the server cannot keep this workspace's chat history now. */
  storageProblem: string | undefined;

  private readonly restarts = new RestartPolicy();
  private knownFailure: KnownFailure;
  private readonly engineListeners = new Set<() => void>();
  private lifecycle: Promise<void> = Promise.resolve();
  private thinkingCount = 0;
  private thinkingShown = false;
  private thinkingTimer: ReturnType<typeof setTimeout> | undefined;
  private quietLoadTimer: ReturnType<typeof setTimeout> | undefined;
  private progressOpen = false;
  /** True while k3/presets/set runs: the load notification stays up even if no load shows yet. */
  private presetSwitching = false;
  private lastEditor: vscode.TextEditor | undefined;
  private reportedProblem: string | undefined;

  constructor(readonly extension: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel('K3', { log: true });
    this.statusItem = vscode.window.createStatusBarItem('k3.status', vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = 'K3';
    this.statusItem.command = 'k3.showMenu';
    this.settings = this.readSettings();
    this.completions = new CompletionPolicy({
      settings: () => this.settings.completions,
      thinking: (active) => this.thinking(active),
      now: () => Date.now(),
    });
    this.chatBackend = new ServerChatBackend(() => ({
      engine: this.engine,
      ...(this.model ? { model: this.model } : {}),
      ...(this.storageProblem ? { storageProblem: this.storageProblem } : {}),
    }));
    this.chat = new ChatViewProvider(extension.extensionUri, this.chatBackend, {
      log: (m) => this.output.warn(m),
      thinking: (active) => this.thinking(active),
      speed: (tps) => {
        this.lastTokensPerSecond = tps;
        this.paint();
      },
      lastEditor: () => this.lastEditor,
      runAction: (action) =>
        void vscode.commands.executeCommand(action === 'choose-model-folder' ? 'k3.selectModelFolder' : 'k3.openRemoteSettings'),
    });
    this.lastEditor = vscode.window.activeTextEditor;
    extension.subscriptions.push(
      this.output,
      this.statusItem,
      this.chat,
      vscode.window.registerWebviewViewProvider(CHAT_VIEW_ID, this.chat, { webviewOptions: { retainContextWhenHidden: true } }),
      vscode.workspace.onDidChangeTextDocument((e) => this.completions.documentChanged(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.completions.documentClosed(d.uri.toString())),
      vscode.window.onDidChangeActiveTextEditor((e) => {
        if (e) this.lastEditor = e;
      }),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('k3')) this.settingsChanged();
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.settingsChanged()),
      // A key set in another window reaches this window's server too.
      extension.secrets.onDidChange((e) => {
        if (e.key === REMOTE_API_KEY_SECRET) void this.pushRemoteApiKey();
      }),
      { dispose: () => this.clearTimers() },
    );
    this.paint();
    this.statusItem.show();
  }

  readSettings(): Settings {
    return readSettings(vscode.workspace.getConfiguration('k3'), vscode.workspace.isTrusted);
  }

  /** Where the server keeps this workspace's chat history, engine state and preset: one
   * folder per workspace, shared by its windows (storage.ts). */
  storage(): StorageLocation {
    const identity = workspaceIdentity({
      workspaceFile: vscode.workspace.workspaceFile?.toString(),
      folders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.toString()),
    });
    return {
      path: workspaceStorageFolder(this.extension.globalStorageUri.fsPath, identity),
      legacy: legacyStorageFolders(this.extension.storageUri?.fsPath),
      workspace: identity,
    };
  }

  get storagePath(): string {
    return this.storage().path;
  }

  /** Starts the server unless the model folder is unusable (then the action is shown instead). */
  start(): Promise<void> {
    return this.serially(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.serially(() => this.doStop());
  }

  /** Stop and start again, with a progress notification until the engine is loaded or fails. */
  restart(title: string): Promise<void> {
    this.restarts.reset();
    this.showLoadProgress(title);
    return this.serially(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Called by the ghost-text policy and the chat while the engine computes for them. */
  thinking(active: boolean): void {
    this.thinkingCount = Math.max(0, this.thinkingCount + (active ? 1 : -1));
    if (this.thinkingCount > 0 && !this.thinkingShown && !this.thinkingTimer) {
      this.thinkingTimer = setTimeout(() => {
        this.thinkingTimer = undefined;
        this.thinkingShown = this.thinkingCount > 0;
        this.paint();
      }, QUIET_THINKING_MS);
    } else if (this.thinkingCount === 0) {
      clearTimeout(this.thinkingTimer);
      this.thinkingTimer = undefined;
      if (this.thinkingShown) {
        this.thinkingShown = false;
        this.paint();
      }
    }
  }

  /** Repaints the status bar item from the current state. */
  paint(): void {
    const view = describeStatus({
      engine: this.engine,
      thinking: this.thinkingShown,
      preset: this.serverPreset ?? this.settings.preset,
      ...(this.remoteStatus ? { remote: this.remoteStatus } : {}),
      ...(this.model ? { model: this.model } : {}),
      completionsEnabled: this.settings.completions.enabled,
      engineVersion: this.engineVersion,
      lastTokensPerSecond: this.lastTokensPerSecond,
      now: Date.now(),
    });
    this.statusItem.text = view.text;
    this.statusItem.tooltip = new vscode.MarkdownString(view.tooltip, true);
    this.statusItem.accessibilityInformation = { label: view.ariaLabel };
    this.statusItem.backgroundColor =
      view.severity === 'normal' ? undefined : new vscode.ThemeColor(`statusBarItem.${view.severity}Background`);
  }

  private setEngine(engine: EngineView): void {
    const wasLoading = this.engine.kind === 'loading';
    this.engine = engine;
    if (engine.kind === 'loading' && !wasLoading) {
      clearTimeout(this.quietLoadTimer);
      this.quietLoadTimer = setTimeout(() => {
        if (this.engine.kind === 'loading') this.showLoadProgress('K3: loading the model');
      }, QUIET_LOAD_MS);
    }
    this.paint();
    this.chat.controller.availabilityChanged();
    for (const l of [...this.engineListeners]) l();
  }

  private serially(work: () => Promise<void>): Promise<void> {
    const run = this.lifecycle.then(work, work);
    this.lifecycle = run.catch(() => undefined);
    return run;
  }

  private async doStart(): Promise<void> {
    this.settings = this.readSettings();
    if (this.settings.modelPathIgnored) {
      this.output.warn('This workspace is not trusted: its k3.modelPath setting is ignored.');
    }
    if (this.settings.remoteIgnored) {
      this.output.warn('This workspace is not trusted: its k3.backend and k3.remote.endpoint settings are ignored.');
    }
    // With the remote backend the model folder only supplies the tokenizer, if it has one.
    if (this.settings.modelPath && this.settings.backend === 'local') {
      const check = checkModelFolder(this.settings.modelPath);
      if (!check.ok) {
        this.setEngine({ kind: 'no-model', reason: check.problem });
        this.output.error(`Not starting the engine: ${check.problem}`);
        this.offerModelActions(check.problem);
        return;
      }
    }
    this.knownFailure = undefined;
    this.setEngine({ kind: 'starting' });
    const apiKey = this.settings.backend === 'remote' ? await this.remoteApiKey() : undefined;
    const client = createClient(
      this.extension,
      this.settings,
      {
        output: this.output,
        completions: this.completions,
        crashed: () => this.crashed(),
      },
      this.storage(),
      apiKey,
    );
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) {
        this.chatBackend.attach(client);
        void this.refreshStatus().then(() => this.chat.controller.refresh());
      } else if (e.newState === State.Stopped) this.chatBackend.attach(undefined);
    });
    client.onNotification(DidChangeStatusNotification.type, (status) => {
      if (this.client === client) this.applyStatus(status);
    });
    client.onNotification(DidReportProblemNotification.type, (problem) => {
      this.output.warn(`${problem.message}${problem.detail ? ` (${problem.detail})` : ''}`);
    });
    try {
      await client.start();
      this.engineVersion = client.initializeResult?.serverInfo?.version;
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.output.error(`The language server did not start: ${message}`);
      this.setEngine({ kind: 'error', message: `The engine did not start: ${message}` });
      void vscode.window
        .showErrorMessage(`K3: the engine did not start (${message}).`, 'Show Logs', 'Restart Engine')
        .then((pick) => this.runPick(pick));
    }
  }

  private async doStop(): Promise<void> {
    this.completions.cancelAll();
    this.chatBackend.attach(undefined);
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(10_000);
      } catch (e) {
        this.output.warn(`Stopping the language server: ${String(e)}`);
      }
    }
  }

  /** Asks the server what the engine is doing (k3/didChangeStatus keeps it current after). */
  private async refreshStatus(): Promise<void> {
    const client = this.client;
    if (!client || !client.isRunning()) return;
    try {
      const status = await client.sendRequest(StatusRequest.type);
      if (client === this.client) this.applyStatus(status);
    } catch (e) {
      this.output.warn(`k3/status failed: ${describeRequestError(e)}`);
    }
  }

  private applyStatus(status: StatusResult): void {
    this.engineVersion = status.engineVersion;
    this.serverPreset = status.preset || undefined;
    this.remoteStatus = status.remote ? describeRemote(status.remote) : undefined;
    this.model = status.model;
    this.storageProblem = status.storage?.problem?.message;
    this.lastTokensPerSecond = lastSpeed(status) ?? this.lastTokensPerSecond;
    const kind = status.error?.kind;
    this.knownFailure = kind === 'out-of-memory' || kind === 'model-missing' ? kind : undefined;
    const engine = engineFromStatus(status, this.engine, Date.now());
    this.setEngine(engine);
    if ((engine.kind === 'no-model' || engine.kind === 'error') && status.error) {
      this.offerAction(status.error.message, status.error.action, engine.kind === 'error');
    }
  }

  /** Shows a problem once (not again until another one), with its action as a button. */
  private offerAction(message: string, action: K3Action | undefined, isError: boolean): void {
    if (this.reportedProblem === message) return;
    this.reportedProblem = message;
    const commandOf: Record<K3Action['kind'], string | undefined> = {
      'choose-model-folder': 'k3.selectModelFolder',
      'choose-smaller-preset': 'k3.selectPreset',
      'load-model': 'k3.restartEngine',
      'show-logs': 'k3.showLogs',
      'set-api-key': 'k3.setRemoteApiKey',
      'open-remote-settings': 'k3.openRemoteSettings',
      none: undefined,
    };
    const command = action ? commandOf[action.kind] : undefined;
    const buttons = command && action ? [action.title] : [];
    if (action?.kind !== 'show-logs') buttons.push('Show Logs');
    const show = isError ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    void show(`K3: ${message}`, ...buttons).then((pick) => {
      if (pick && action && pick === action.title && command) void vscode.commands.executeCommand(command);
      else this.runPick(pick);
    });
  }

  /** The error handler's question: restart the dead server, or stop and show the action? */
  private crashed(): CrashDecision {
    const decision = this.restarts.onCrash(Date.now(), this.knownFailure);
    this.completions.cancelAll();
    if (decision.restart) {
      this.output.error('The language server stopped unexpectedly; restarting it.');
      this.setEngine({ kind: 'starting' });
      return decision;
    }
    const sentences = {
      'out-of-memory': 'The engine ran out of memory. A smaller memory preset needs less.',
      'model-missing': 'The engine could not find its model.',
      'crash-loop': 'The engine crashed several times in a few minutes, so it was not restarted again.',
    } as const;
    const sentence = sentences[decision.reason];
    this.output.error(sentence);
    this.setEngine({ kind: 'stopped', reason: sentence });
    const actions =
      decision.reason === 'out-of-memory'
        ? ['Select Memory Preset', 'Show Logs']
        : decision.reason === 'model-missing'
          ? ['Select Model Folder', 'Show Logs']
          : ['Restart Engine', 'Show Logs'];
    void vscode.window.showErrorMessage(`K3: ${sentence}`, ...actions).then((pick) => this.runPick(pick));
    return decision;
  }

  /** A missing or broken model folder: say what is wrong once and offer the ways out. */
  private offerModelActions(problem: string): void {
    if (this.reportedProblem === problem) return;
    this.reportedProblem = problem;
    void vscode.window
      .showWarningMessage(`K3: ${problem}.`, 'Select Model Folder', 'Use Default Model', 'Open Settings')
      .then((pick) => this.runPick(pick));
  }

  /** Runs the command behind a notification button. */
  private runPick(pick: string | undefined): void {
    const commands: Record<string, string> = {
      'Show Logs': 'k3.showLogs',
      'Restart Engine': 'k3.restartEngine',
      'Select Memory Preset': 'k3.selectPreset',
      'Select Model Folder': 'k3.selectModelFolder',
    };
    if (pick === 'Use Default Model') void this.useDefaultModel();
    else if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'k3.modelPath');
    else if (pick && commands[pick]) void vscode.commands.executeCommand(commands[pick]);
  }

  /** The remote backend's API key from SecretStorage (undefined when none is set). */
  async remoteApiKey(): Promise<string | undefined> {
    try {
      return (await this.extension.secrets.get(REMOTE_API_KEY_SECRET)) || undefined;
    } catch (e) {
      this.output.warn(`Reading the remote API key from the secret storage failed: ${String(e)}`);
      return undefined;
    }
  }

  /**
   * Keeps `key` in SecretStorage (empty: removes it) and hands it to a running server that
   * uses the remote backend, which checks the server again with it. The key itself is never
   * logged.
   */
  async setRemoteApiKey(key: string): Promise<void> {
    if (key) await this.extension.secrets.store(REMOTE_API_KEY_SECRET, key);
    else await this.extension.secrets.delete(REMOTE_API_KEY_SECRET);
    await this.pushRemoteApiKey();
  }

  /** Hands the stored key to a running server that uses the remote backend. */
  private async pushRemoteApiKey(): Promise<void> {
    this.reportedProblem = undefined;
    if (this.settings.backend !== 'remote' || !this.client?.isRunning()) return;
    try {
      await this.client.sendRequest(RemoteApiKeyRequest.type, { apiKey: (await this.remoteApiKey()) ?? '' });
      await this.refreshStatus();
    } catch (e) {
      this.output.warn(`k3/remote/setApiKey failed: ${describeRequestError(e)}; restarting the engine with the new key`);
      await this.restart('K3: connecting to the remote server');
    }
  }

  /** Clears k3.modelPath wherever it is set, so the embedded default model is used. */
  async useDefaultModel(): Promise<void> {
    const config = vscode.workspace.getConfiguration('k3');
    const i = config.inspect('modelPath');
    if (i?.workspaceFolderValue !== undefined && vscode.workspace.workspaceFolders?.[0]) {
      await vscode.workspace
        .getConfiguration('k3', vscode.workspace.workspaceFolders[0].uri)
        .update('modelPath', undefined, vscode.ConfigurationTarget.WorkspaceFolder);
    }
    if (i?.workspaceValue !== undefined) await config.update('modelPath', undefined, vscode.ConfigurationTarget.Workspace);
    if (i?.globalValue !== undefined) await config.update('modelPath', undefined, vscode.ConfigurationTarget.Global);
  }

  private settingsChanged(): void {
    const before = this.settings;
    this.settings = this.readSettings();
    if (before.modelPath !== this.settings.modelPath) {
      void this.restart('K3: loading the engine with the new model folder');
      return;
    }
    if (before.backend !== this.settings.backend || JSON.stringify(before.remote) !== JSON.stringify(this.settings.remote)) {
      void this.restart(this.settings.backend === 'remote' ? 'K3: connecting to the remote server' : 'K3: loading the local engine');
      return;
    }
    if (before.preset !== this.settings.preset || before.presetExplicit !== this.settings.presetExplicit) {
      void this.choosePreset(this.settings.preset);
    }
    if (!this.settings.completions.enabled) this.completions.cancelAll();
    if (this.client?.isRunning()) {
      void this.client
        .sendNotification(DidChangeConfigurationNotification.type, { settings: { k3: serverSection(this.settings) } })
        .catch((e: unknown) => this.output.warn(`workspace/didChangeConfiguration failed: ${String(e)}`));
    }
    this.paint();
  }

  /**
   * Makes `preset` this workspace's preset: k3/presets/set saves it and reloads a loaded
   * model with it, with a progress notification until the engine is ready again. With no
   * server running, the next start takes it from the setting (which holds it when the
   * setting changed): `restart` starts one now.
   */
  async choosePreset(preset: string): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) return this.restart(`K3: reloading the engine with preset ${preset}`);
    this.showLoadProgress(`K3: reloading the engine with preset ${preset}`, true);
    try {
      const result = await client.sendRequest(PresetsSetRequest.type, { preset });
      this.serverPreset = result.preset;
      this.paint();
      await this.refreshStatus();
    } catch (e) {
      this.output.error(`k3/presets/set ${preset}: ${describeRequestError(e)}`);
      void vscode.window
        .showErrorMessage(`K3: could not switch to preset ${preset}: ${describeRequestError(e)}`, 'Show Logs')
        .then((pick) => this.runPick(pick));
    } finally {
      this.presetSwitching = false;
      for (const l of [...this.engineListeners]) l();
    }
  }

  /**
   * A cancellable notification from now until the engine is past starting and loading, with
   * the time so far and, when the engine reports them, the percentage and the time left.
   * Cancelling stops the server, which is what stops a load.
   */
  private showLoadProgress(title: string, presetSwitch = false): void {
    if (presetSwitch) this.presetSwitching = true;
    if (this.progressOpen) return;
    this.progressOpen = true;
    const started = Date.now();
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          let reported = 0;
          let timer: ReturnType<typeof setInterval> | undefined;
          const finish = () => {
            clearInterval(timer);
            this.engineListeners.delete(update);
            this.progressOpen = false;
            resolve();
          };
          const update = () => {
            const e = this.engine;
            if (e.kind !== 'starting' && e.kind !== 'loading' && !this.presetSwitching) return finish();
            const parts = [`${formatDuration(Date.now() - started)} elapsed`];
            if (e.kind === 'loading' && e.etaMs !== undefined) parts.push(`about ${formatDuration(e.etaMs)} left`);
            let increment: number | undefined;
            if (e.kind === 'loading' && e.percent !== undefined && e.percent > reported) {
              increment = e.percent - reported;
              reported = e.percent;
            }
            progress.report({ message: parts.join(' · '), increment });
          };
          timer = setInterval(update, 1000);
          this.engineListeners.add(update);
          token.onCancellationRequested(() => {
            finish();
            void this.cancelLoad();
          });
          update();
        }),
    );
  }

  /** Cancelling a load: k3/model/unload abandons it; a server that cannot is stopped instead. */
  private async cancelLoad(): Promise<void> {
    const reason = 'You cancelled the model load; K3: Restart Engine loads it again';
    try {
      if (!this.client?.isRunning()) throw new Error('not running');
      await this.client.sendRequest(ModelUnloadRequest.type);
      await this.refreshStatus();
    } catch {
      await this.serially(async () => {
        await this.doStop();
        this.setEngine({ kind: 'stopped', reason });
      });
    }
  }

  /**
   * Deletes this workspace's chat history, saved engine state and chosen preset: through
   * k3/state/clear when the server runs, else by removing its storage folder.
   */
  async clearWorkspaceState(): Promise<void> {
    this.chat.controller.reset();
    if (this.client?.isRunning()) {
      await this.client.sendRequest(StateClearRequest.type);
      await this.refreshStatus();
    } else {
      await fs.promises.rm(this.storagePath, { recursive: true, force: true });
    }
    await this.chat.controller.refresh();
  }

  private clearTimers(): void {
    clearTimeout(this.thinkingTimer);
    clearTimeout(this.quietLoadTimer);
  }
}
