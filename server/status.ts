// status.ts - what k3/status answers and k3/didChangeStatus announces: the engine's phase
// (or the remote backend's), the model (name, size, whether it chats), the load's progress,
// the job running now, the queue, whether the workspace's state can be kept, and the last
// completion and chat turn as measured. Notifications are coalesced: at once when the phase or the running
// job changes, otherwise at most every NOTIFY_MS.
import type { Connection } from 'vscode-languageserver';
import { loadAddon } from './engine/addon';
import type { EngineHost } from './engine/host';
import {
  type ChatTurnStats,
  type CompletionStats,
  DidChangeStatusNotification,
  type StatusResult,
} from '../protocol/lsp';
import type { RemoteBackend } from './remote/backend';
import type { Scheduler } from './scheduler';
import type { WorkspaceStore } from './state/store';

export const NOTIFY_MS = 250;

/** What the status reads of the server that holds it (ServerCtx implements it), afresh for
 * every snapshot, and where it sends k3/didChangeStatus. */
export interface StatusHost {
  readonly host: Pick<EngineHost, 'phase' | 'loaded' | 'loadingInfo' | 'progress' | 'problem'>;
  readonly scheduler: Pick<Scheduler, 'running' | 'queued'>;
  readonly remote: Pick<RemoteBackend, 'phase' | 'problem' | 'running' | 'isRunning' | 'status'> | undefined;
  /** The preset in use. */
  readonly preset: string;
  readonly store: Pick<WorkspaceStore, 'storage'>;
  readonly connection: Pick<Connection, 'sendNotification'>;
}

export class StatusReporter {
  lastCompletion: CompletionStats | undefined;
  lastChat: ChatTurnStats | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastSent = 0;
  private lastShape = '';
  private enabled = false;

  constructor(private readonly ctx: StatusHost) {}

  /** Starts notifying (after `initialized`). */
  enable(): void {
    this.enabled = true;
    this.changed();
  }

  snapshot(now = Date.now()): StatusResult {
    const { host, scheduler, remote } = this.ctx;
    if (remote) {
      const job = remote.running(now);
      const r: StatusResult = {
        engineVersion: loadAddon().version(),
        phase: remote.phase === 'ready' && job ? 'busy' : remote.phase,
        preset: this.ctx.preset,
        queued: scheduler.queued((j) => remote.isRunning(j)),
        remote: remote.status(),
        storage: this.ctx.store.storage(),
      };
      if (remote.problem && remote.phase !== 'ready') r.error = remote.problem;
      if (job) r.job = job;
      if (this.lastCompletion) r.lastCompletion = this.lastCompletion;
      if (this.lastChat) r.lastChat = this.lastChat;
      return r;
    }
    const running = scheduler.running;
    const s: StatusResult = {
      engineVersion: loadAddon().version(),
      phase: host.phase === 'ready' && running ? 'busy' : host.phase,
      preset: this.ctx.preset,
      queued: scheduler.queued(),
      storage: this.ctx.store.storage(),
    };
    const modelPath = host.progress?.modelPath ?? host.loaded?.modelPath;
    if (modelPath) s.modelPath = modelPath;
    const model = host.loadingInfo ?? host.loaded?.info;
    if (model) s.model = { ...model };
    if (host.progress) s.load = { ...host.progress };
    if (host.problem && host.phase !== 'ready') s.error = host.problem;
    if (running) s.job = running.status(now);
    if (this.lastCompletion) s.lastCompletion = this.lastCompletion;
    if (this.lastChat) s.lastChat = this.lastChat;
    const completion = host.loaded?.completion.session;
    if (completion && !completion.busy && completion.checkpointLimit !== undefined) {
      s.completionCheckpoints = { ...completion.checkpointUsage(), limit: completion.checkpointLimit };
    }
    return s;
  }

  /** What makes a change worth sending at once. */
  private static shape(s: StatusResult): string {
    return `${s.phase}|${s.job?.kind ?? ''}|${s.job?.stage ?? ''}|${s.load?.phase ?? ''}|${s.storage.problem?.message ?? ''}`;
  }

  /** Something the status shows changed. */
  changed(): void {
    if (!this.enabled) return;
    const shape = StatusReporter.shape(this.snapshot());
    const now = Date.now();
    if (shape !== this.lastShape || now - this.lastSent >= NOTIFY_MS) {
      this.send();
      return;
    }
    this.timer ??= setTimeout(() => this.send(), NOTIFY_MS - (now - this.lastSent));
  }

  private send(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.lastSent = Date.now();
    const snap = this.snapshot();
    this.lastShape = StatusReporter.shape(snap);
    void this.ctx.connection.sendNotification(DidChangeStatusNotification.type, snap);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.enabled = false;
  }
}
