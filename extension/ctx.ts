// ctx.ts - the extension's one context object: the state every part reads (the settings,
// what the engine is doing as the server last said, the model, the preset in use) and the
// wiring of the parts that each do one job: the client's lifecycle (lifecycle.ts), the
// status bar (statusBar.ts), the load notification (progress.ts), crashes
// (crashPolicy.ts), problem notices (notices.ts), the preset switch (presetSwitch.ts), the
// remote API key (apiKey.ts), the ghost-text policy, the chat view and inline edit
// (edit/inlineEdit.ts). Commands (commands.ts) and main.ts reach everything through it;
// nothing else keeps extension state.
import * as vscode from 'vscode';
import { DidChangeConfigurationNotification, type LanguageClient } from 'vscode-languageclient/node';
import { ContextDefinitionsNotification, type ModelInfo, type StatusResult } from '../protocol/lsp';
import type { ChatActionView } from '../protocol/webview';
import { RemoteApiKey } from './apiKey';
import { ServerChatBackend } from './chatBackend';
import { CHAT_VIEW_ID, ChatViewProvider } from './chatView';
import type { StorageLocation } from './client';
import { CompletionPolicy } from './completions';
import { WarmupNotifier } from './warmup';
import { CrashPolicy } from './crashPolicy';
import { askedDocument, vscodeDefinitions } from './definitionSource';
import { DefinitionGatherer, GATHER_WAIT_MS, waitAtMost } from './definitions';
import { InlineEdits } from './edit/inlineEdit';
import { ClientLifecycle } from './lifecycle';
import { Notices } from './notices';
import { PresetSwitch } from './presetSwitch';
import { LoadNotification } from './progress';
import { REMOTE_API_KEY_SECRET, readSettings, roleApiKeySecret, serverSection, type Settings } from './settings';
import { describeRemote, engineFromStatus, lastSpeed, type EngineView } from './status';
import { StatusBar } from './statusBar';
import { legacyStorageFolders, workspaceIdentity, workspaceStorageFolder } from './storage';

/** What the server is started with for the roles: a role's server counts only while the
 * role is remote, so setting an endpoint before choosing `remote` restarts nothing. */
function rolesKey(s: Settings): string {
  const role = (r: Settings['roles']['chat']): unknown => (r.backend === 'remote' ? r : r.backend);
  return JSON.stringify([role(s.roles.completions), role(s.roles.chat)]);
}

/** The command behind each button of the chat panel's notice (also offered by inline edit). */
const CHAT_ACTION_COMMANDS: Record<ChatActionView, string> = {
  'choose-model-folder': 'k3.selectModelFolder',
  'open-remote-settings': 'k3.openRemoteSettings',
  'choose-chat-backend': 'k3.chooseChatBackend',
  'choose-completion-backend': 'k3.chooseCompletionBackend',
};

export class Ctx {
  readonly output: vscode.LogOutputChannel;
  readonly statusBar: StatusBar;
  readonly completions: CompletionPolicy;
  /** Tells the server when to prefill and compute ahead (k3.completions.warmup). */
  readonly warmup: WarmupNotifier;
  readonly chat: ChatViewProvider;
  readonly lifecycle: ClientLifecycle;
  readonly presets: PresetSwitch;
  readonly apiKey: RemoteApiKey;
  readonly edits: InlineEdits;
  private readonly chatBackend: ServerChatBackend;
  private readonly notices = new Notices();
  /** The definitions near the cursor, sent before each completion request (definitions.ts). */
  private readonly definitions = new DefinitionGatherer(vscodeDefinitions(), (p) => {
    if (this.client?.isRunning()) this.client.sendNotification(ContextDefinitionsNotification.type, p).catch(() => undefined);
  });
  private readonly loadNotice: LoadNotification;
  private readonly crashes: CrashPolicy;
  settings: Settings;
  engine: EngineView = { kind: 'starting' };
  engineVersion: string | undefined;
  lastTokensPerSecond: number | undefined;
  /** The preset the server reports in use (the workspace's choice); the setting until it does. */
  serverPreset: string | undefined;
  /** The remote server and model, as the server reports them, when both roles use it. */
  remoteStatus: string | undefined;
  /** Who serves ghost text and chat, as the server reports it. */
  roles: StatusResult['roles'] | undefined;
  /** The chat role's state when it is not the engine's (a remote chat beside local ghost
   * text, or a chat the server refuses). */
  private chatOverride: EngineView | undefined;
  /** The model the local engine runs or loads, as the server reports it. */
  model: ModelInfo | undefined;
  /** Why the server cannot keep this workspace's chat history now. */
  storageProblem: string | undefined;
  private lastEditor: vscode.TextEditor | undefined;

  constructor(readonly extension: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel('K3', { log: true });
    this.statusBar = new StatusBar(() => ({
      engine: this.engine,
      preset: this.serverPreset ?? this.settings.preset,
      ...(this.remoteStatus ? { remote: this.remoteStatus } : {}),
      ...(this.model ? { model: this.model } : {}),
      ...(this.roles ? { roles: this.roles } : {}),
      completionsEnabled: this.settings.completions.enabled,
      engineVersion: this.engineVersion,
      lastTokensPerSecond: this.lastTokensPerSecond,
    }));
    this.settings = this.readSettings();
    this.completions = new CompletionPolicy({
      settings: () => this.settings.completions,
      thinking: (active) => this.statusBar.thinking(active),
      now: () => Date.now(),
      context: (document, position, token) =>
        waitAtMost(this.definitions.gather(askedDocument(document), position, () => token.isCancellationRequested), GATHER_WAIT_MS),
    });
    this.warmup = new WarmupNotifier({
      settings: () => this.settings.completions,
      sendNotification: (method, params) => {
        if (this.client?.isRunning()) void this.client.sendNotification(method, params).catch(() => undefined);
      },
      activeEditor: () => vscode.window.activeTextEditor,
    });
    this.chatBackend = new ServerChatBackend(() => ({
      engine: this.chatEngine,
      ...(this.model && this.roles?.chat.backend !== 'remote' ? { model: this.model } : {}),
      ...(this.storageProblem ? { storageProblem: this.storageProblem } : {}),
    }));
    this.chat = new ChatViewProvider(extension.extensionUri, this.chatBackend, {
      log: (m) => this.output.warn(m),
      thinking: (active) => this.statusBar.thinking(active),
      speed: (tps) => {
        this.lastTokensPerSecond = tps;
        this.statusBar.paint();
      },
      lastEditor: () => this.lastEditor,
      runAction: (action) => void vscode.commands.executeCommand(CHAT_ACTION_COMMANDS[action]),
      apply: (code, target) => this.edits.apply(code, target),
    });
    this.edits = new InlineEdits({
      client: () => this.client,
      availability: () => ({ view: this.chatBackend.availability(), cannotChat: this.chatBackend.completionModel() }),
      runAction: (action) => void vscode.commands.executeCommand(CHAT_ACTION_COMMANDS[action]),
      lastEditor: () => this.lastEditor,
      log: (m) => this.output.warn(m),
    });
    this.loadNotice = new LoadNotification({
      engine: () => this.engine,
      cancelLoad: () => void this.lifecycle.cancelLoad(),
    });
    this.crashes = new CrashPolicy(
      { output: this.output, completions: this.completions, setEngine: (engine) => this.setEngine(engine) },
      this.notices,
    );
    this.lifecycle = new ClientLifecycle(
      {
        extension,
        output: this.output,
        completions: this.completions,
        settings: () => this.settings,
        rereadSettings: () => {
          this.settings = this.readSettings();
        },
        storage: () => this.storage(),
        apiKeys: () => this.apiKey.keys(),
        setEngine: (engine) => this.setEngine(engine),
        started: (version) => {
          this.engineVersion = version;
          // The file already open when the server (re)started is warmed like one switched to.
          this.warmup.editorChanged(vscode.window.activeTextEditor);
        },
        applyStatus: (status) => this.applyStatus(status),
        attachChat: (client) => this.chatBackend.attach(client),
        refreshChat: () => this.chat.controller.refresh(),
      },
      this.crashes,
      this.loadNotice,
      this.notices,
    );
    this.presets = new PresetSwitch(
      {
        output: this.output,
        client: () => this.client,
        presetChanged: (preset) => {
          this.serverPreset = preset;
          this.statusBar.paint();
        },
        refreshStatus: () => this.lifecycle.refreshStatus(),
        restart: (title) => this.lifecycle.restart(title),
      },
      this.loadNotice,
      this.notices,
    );
    this.apiKey = new RemoteApiKey(extension.secrets, {
      output: this.output,
      settings: () => this.settings,
      client: () => this.client,
      refreshStatus: () => this.lifecycle.refreshStatus(),
      restart: (title) => this.lifecycle.restart(title),
      forgetProblem: () => this.notices.forget(),
    });
    this.lastEditor = vscode.window.activeTextEditor;
    extension.subscriptions.push(
      this.output,
      this.statusBar,
      this.chat,
      this.edits,
      this.chat.watchEditors(),
      vscode.window.registerWebviewViewProvider(CHAT_VIEW_ID, this.chat, { webviewOptions: { retainContextWhenHidden: true } }),
      vscode.workspace.onDidChangeTextDocument((e) => this.completions.documentChanged(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.completions.documentClosed(d.uri.toString())),
      vscode.window.onDidChangeActiveTextEditor((e) => {
        if (e) this.lastEditor = e;
        this.warmup.editorChanged(e);
      }),
      this.warmup,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('k3')) this.settingsChanged();
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.settingsChanged()),
      // A key set in another window reaches this window's server too.
      extension.secrets.onDidChange((e) => {
        if (e.key === REMOTE_API_KEY_SECRET || e.key === roleApiKeySecret('completions') || e.key === roleApiKeySecret('chat')) void this.apiKey.push();
      }),
      this.loadNotice,
    );
    this.statusBar.paint();
    this.statusBar.item.show();
  }

  /** The running language client (undefined while none is). */
  get client(): LanguageClient | undefined {
    return this.lifecycle.client;
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

  /** What the chat panel's notice reads: the chat role's state. */
  get chatEngine(): EngineView {
    if (this.engine.kind === 'starting' || this.engine.kind === 'stopped') return this.engine;
    return this.chatOverride ?? this.engine;
  }

  private setEngine(engine: EngineView): void {
    const wasLoading = this.engine.kind === 'loading';
    this.engine = engine;
    this.statusBar.paint();
    this.chat.controller.availabilityChanged();
    this.loadNotice.engineChanged(wasLoading);
  }

  private applyStatus(status: StatusResult): void {
    this.engineVersion = status.engineVersion;
    this.serverPreset = status.preset || undefined;
    // The older one-server wording only when no role uses the local engine.
    const allRemote = status.roles ? status.roles.completions.backend === 'remote' && status.roles.chat.backend === 'remote' : true;
    this.remoteStatus = status.remote && allRemote ? describeRemote(status.remote) : undefined;
    this.roles = status.roles;
    const chat = status.roles?.chat;
    this.chatOverride =
      chat && !allRemote && (chat.backend === 'remote' || chat.error)
        ? engineFromStatus({ ...status, phase: chat.phase, error: chat.error, remote: chat.remote, load: undefined }, this.chatOverride ?? this.engine, Date.now())
        : undefined;
    this.model = status.model;
    this.storageProblem = status.storage?.problem?.message;
    this.lastTokensPerSecond = lastSpeed(status) ?? this.lastTokensPerSecond;
    const kind = status.error?.kind;
    this.crashes.knownFailure = kind === 'out-of-memory' || kind === 'model-missing' ? kind : undefined;
    const engine = engineFromStatus(status, this.engine, Date.now());
    this.setEngine(engine);
    if ((engine.kind === 'no-model' || engine.kind === 'error') && status.error) {
      this.notices.offerAction(status.error.message, status.error.action, engine.kind === 'error');
    }
  }

  private settingsChanged(): void {
    const before = this.settings;
    this.settings = this.readSettings();
    if (before.modelPath !== this.settings.modelPath) {
      void this.lifecycle.restart('K3: loading the engine with the new model folder');
      return;
    }
    if (rolesKey(before) !== rolesKey(this.settings)) {
      const remote = this.settings.roles.completions.backend === 'remote' && this.settings.roles.chat.backend === 'remote';
      void this.lifecycle.restart(remote ? 'K3: connecting to the remote server' : 'K3: starting the engine for the new backends');
      return;
    }
    if (before.preset !== this.settings.preset || before.presetExplicit !== this.settings.presetExplicit) {
      void this.presets.choose(this.settings.preset);
    }
    if (!this.settings.completions.enabled) this.completions.cancelAll();
    if (this.client?.isRunning()) {
      void this.client
        .sendNotification(DidChangeConfigurationNotification.type, { settings: { k3: serverSection(this.settings) } })
        .catch((e: unknown) => this.output.warn(`workspace/didChangeConfiguration failed: ${String(e)}`));
    }
    this.statusBar.paint();
  }
}
