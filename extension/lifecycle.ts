// lifecycle.ts - the language client's lifecycle: start (not when the model folder is
// unusable: its ways out are offered instead), stop and restart, one at a time in the order
// asked; a started client gets the chat attached, is asked for its status, and its status
// and problem notifications go to the host; cancelling a load abandons it through
// k3/model/unload, or stops a server that cannot. What a crash means is crashPolicy.ts's,
// what the user sees of the state is the status bar's and the load notification's.
import * as vscode from 'vscode';
import { State, type LanguageClient } from 'vscode-languageclient/node';
import { DidChangeStatusNotification, DidReportProblemNotification, ModelUnloadRequest, StatusRequest, type Role, type StatusResult } from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import { createClient, type StorageLocation } from './client';
import type { CompletionPolicy } from './completions';
import type { CrashPolicy } from './crashPolicy';
import { checkModelFolder } from './modelFolder';
import type { Notices } from './notices';
import type { LoadNotification } from './progress';
import type { Settings } from './settings';
import type { EngineView } from './status';

export interface LifecycleHost {
  readonly extension: vscode.ExtensionContext;
  readonly output: vscode.LogOutputChannel;
  readonly completions: CompletionPolicy;
  /** The settings now. */
  settings(): Settings;
  /** Reads the settings afresh and keeps them (a start uses the newest). */
  rereadSettings(): void;
  /** Where the server keeps this workspace's state. */
  storage(): StorageLocation;
  /** Each remote role's API key (a role without one is absent). */
  apiKeys(): Promise<Partial<Record<Role, string>>>;
  setEngine(engine: EngineView): void;
  /** The engine version the started server reports. */
  started(engineVersion: string | undefined): void;
  /** A server's status: k3/status's answer or a k3/didChangeStatus. */
  applyStatus(status: StatusResult): void;
  /** The client the chat talks to; undefined while none runs. */
  attachChat(client: LanguageClient | undefined): void;
  /** The chat reads its conversations again (the server that keeps them started). */
  refreshChat(): Promise<void>;
}

export class ClientLifecycle {
  client: LanguageClient | undefined;
  /** The last start or stop asked for: the next one waits for it to end. */
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly host: LifecycleHost,
    private readonly crashes: CrashPolicy,
    private readonly loadNotice: LoadNotification,
    private readonly notices: Notices,
  ) {}

  /** Starts the server unless the model folder is unusable (then the action is shown instead). */
  start(): Promise<void> {
    return this.serially(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.serially(() => this.doStop());
  }

  /** Stop and start again, with a progress notification until the engine is loaded or fails. */
  restart(title: string): Promise<void> {
    this.crashes.reset();
    this.loadNotice.show(title);
    return this.serially(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Asks the server what the engine is doing (k3/didChangeStatus keeps it current after). */
  async refreshStatus(): Promise<void> {
    const client = this.client;
    if (!client || !client.isRunning()) return;
    try {
      const status = await client.sendRequest(StatusRequest.type);
      if (client === this.client) this.host.applyStatus(status);
    } catch (e) {
      this.host.output.warn(`k3/status failed: ${describeRequestError(e)}`);
    }
  }

  /** Cancelling a load: k3/model/unload abandons it; a server that cannot is stopped instead. */
  async cancelLoad(): Promise<void> {
    const reason = 'You cancelled the model load; K3: Restart Engine loads it again';
    try {
      if (!this.client?.isRunning()) throw new Error('not running');
      await this.client.sendRequest(ModelUnloadRequest.type);
      await this.refreshStatus();
    } catch {
      await this.serially(async () => {
        await this.doStop();
        this.host.setEngine({ kind: 'stopped', reason });
      });
    }
  }

  private serially(work: () => Promise<void>): Promise<void> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async doStart(): Promise<void> {
    this.host.rereadSettings();
    if (this.host.settings().modelPathIgnored) {
      this.host.output.warn('This workspace is not trusted: its k3.modelPath setting is ignored.');
    }
    if (this.host.settings().remoteIgnored) {
      this.host.output.warn('This workspace is not trusted: its k3.backend and k3.remote.endpoint settings are ignored.');
    }
    // With the remote backend the model folder only supplies the tokenizer, if it has one.
    const roles = this.host.settings().roles;
    if (this.host.settings().modelPath && (roles.completions.backend === 'local' || roles.chat.backend === 'local')) {
      const check = checkModelFolder(this.host.settings().modelPath);
      if (!check.ok) {
        this.host.setEngine({ kind: 'no-model', reason: check.problem });
        this.host.output.error(`Not starting the engine: ${check.problem}`);
        this.notices.offerModelActions(check.problem);
        return;
      }
    }
    this.crashes.knownFailure = undefined;
    this.host.setEngine({ kind: 'starting' });
    const keys = await this.host.apiKeys();
    const client = createClient(
      this.host.extension,
      this.host.settings(),
      {
        output: this.host.output,
        completions: this.host.completions,
        crashed: () => this.crashes.crashed(),
      },
      this.host.storage(),
      keys,
    );
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) {
        this.host.attachChat(client);
        void this.refreshStatus().then(() => this.host.refreshChat());
      } else if (e.newState === State.Stopped) this.host.attachChat(undefined);
    });
    client.onNotification(DidChangeStatusNotification.type, (status) => {
      if (this.client === client) this.host.applyStatus(status);
    });
    client.onNotification(DidReportProblemNotification.type, (problem) => {
      this.host.output.warn(`${problem.message}${problem.detail ? ` (${problem.detail})` : ''}`);
    });
    try {
      await client.start();
      this.host.started(client.initializeResult?.serverInfo?.version);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.host.output.error(`The language server did not start: ${message}`);
      this.host.setEngine({ kind: 'error', message: `The engine did not start: ${message}` });
      void vscode.window
        .showErrorMessage(`K3: the engine did not start (${message}).`, 'Show Logs', 'Restart Engine')
        .then((pick) => this.notices.runPick(pick));
    }
  }

  private async doStop(): Promise<void> {
    this.host.completions.cancelAll();
    this.host.attachChat(undefined);
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(10_000);
      } catch (e) {
        this.host.output.warn(`Stopping the language server: ${String(e)}`);
      }
    }
  }
}
