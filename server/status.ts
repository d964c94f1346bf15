// status.ts - what k3/status answers and k3/didChangeStatus announces: the engine's phase
// (or the remote backend's), who serves each role (ghost text, chat: backend, model, where,
// state), the model (name, size, whether it chats), the load's progress,
// the job running now, the queue, whether the workspace's state can be kept, and the last
// completion and chat turn as measured. Notifications are coalesced: at once when the phase or the running
// job changes, otherwise at most every NOTIFY_MS.
import type { Connection } from 'vscode-languageserver';
import { loadAddon } from './engine/addon';
import type { EngineHost } from './engine/host';
import * as path from 'node:path';
import {
  type ChatTurnStats,
  type CompletionStats,
  type WarmupStats,
  DidChangeStatusNotification,
  type Role,
  type RoleStatus,
  type StatusResult,
} from '../protocol/lsp';
import type { RemoteBackend } from './remote/backend';
import { ROLES, type RolesPlan } from './roles';
import type { Scheduler } from './scheduler';
import type { WorkspaceStore } from './state/store';

export const NOTIFY_MS = 250;

/** What the status reads of the server that holds it (ServerCtx implements it), afresh for
 * every snapshot, and where it sends k3/didChangeStatus. */
export interface StatusHost {
  readonly host: StatusEngine;
  /** The local model that serves chat: `host`, or chat's own second model. */
  readonly chatHost: StatusEngine;
  readonly scheduler: Pick<Scheduler, 'running' | 'queued'>;
  /** Each role's remote server; undefined: the local engine serves the role. */
  readonly remotes: Record<Role, StatusRemote | undefined>;
  readonly plan: Pick<RolesPlan, Role>;
  /** The preset in use. */
  readonly preset: string;
  readonly store: Pick<WorkspaceStore, 'storage'>;
  readonly connection: Pick<Connection, 'sendNotification'>;
}

type StatusEngine = Pick<EngineHost, 'phase' | 'loaded' | 'loadingInfo' | 'progress' | 'problem'>;
type StatusRemote = Pick<RemoteBackend, 'phase' | 'problem' | 'running' | 'isRunning' | 'status'>;

/** The scheduler's lane of each role. */
const LANE = { completions: 'completion', chat: 'chat' } as const;

export class StatusReporter {
  lastCompletion: CompletionStats | undefined;
  /** What warm-up did (server/completion/warmup.ts). */
  warmup: WarmupStats | undefined;
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
    return this.engineSnapshot(now, { completions: this.role('completions', now), chat: this.role('chat', now) });
  }

  /** The top-level fields: the local engine's when a role uses it, else the remote server's. */
  private engineSnapshot(now: number, roles: StatusResult['roles']): StatusResult {
    const { host, scheduler, remotes } = this.ctx;
    const remoteList = ROLES.map((r) => remotes[r]).filter((r): r is StatusRemote => r !== undefined);
    const remoteWorking = (j: Parameters<StatusRemote['isRunning']>[0]): boolean => remoteList.some((r) => r.isRunning(j));
    const remote = remotes.completions ?? remotes.chat;
    if (remote && remotes.completions && remotes.chat) {
      const job = remote.running(now);
      const r: StatusResult = {
        engineVersion: loadAddon().version(),
        phase: remote.phase === 'ready' && job ? 'busy' : remote.phase,
        preset: this.ctx.preset,
        queued: scheduler.queued(remoteWorking),
        remote: remote.status(),
        storage: this.ctx.store.storage(),
        roles,
      };
      if (remote.problem && remote.phase !== 'ready') r.error = remote.problem;
      if (job) r.job = job;
      if (this.lastCompletion) r.lastCompletion = this.lastCompletion;
      if (this.warmup) r.warmup = this.warmup;
      if (this.lastChat) r.lastChat = this.lastChat;
      return r;
    }
    const running = scheduler.running;
    const s: StatusResult = {
      engineVersion: loadAddon().version(),
      phase: host.phase === 'ready' && running ? 'busy' : host.phase,
      preset: this.ctx.preset,
      queued: scheduler.queued(remoteWorking),
      storage: this.ctx.store.storage(),
      roles,
    };
    const modelPath = host.progress?.modelPath ?? host.loaded?.modelPath;
    if (modelPath) s.modelPath = modelPath;
    const model = host.loadingInfo ?? host.loaded?.info;
    if (model) s.model = { ...model };
    if (host.progress) s.load = { ...host.progress };
    if (host.problem && host.phase !== 'ready') s.error = host.problem;
    if (running) s.job = running.status(now);
    if (this.lastCompletion) s.lastCompletion = this.lastCompletion;
    if (this.warmup) s.warmup = this.warmup;
    if (this.lastChat) s.lastChat = this.lastChat;
    if (remote) s.remote = remote.status();
    const completion = host.loaded?.completion?.session;
    if (completion && !completion.busy && completion.checkpointLimit !== undefined) {
      s.completionCheckpoints = { ...completion.checkpointUsage(), limit: completion.checkpointLimit };
    }
    return s;
  }

  /** Who serves `role`, and in what state. */
  private role(role: Role, now: number): RoleStatus {
    const plan = this.ctx.plan[role];
    const remote = this.ctx.remotes[role];
    if (remote) {
      const rs = remote.status();
      const busy = remote.phase === 'ready' && remote.running(now)?.kind === LANE[role];
      const r: RoleStatus = { backend: 'remote', where: rs.endpoint, phase: busy ? 'busy' : remote.phase, remote: rs };
      if (rs.model) r.model = rs.model;
      if (remote.problem && remote.phase !== 'ready') r.error = remote.problem;
      return r;
    }
    const { scheduler } = this.ctx;
    const host = role === 'chat' ? this.ctx.chatHost : this.ctx.host;
    const where = host.progress?.modelPath ?? host.loaded?.modelPath ?? plan.modelPath;
    const info = host.loadingInfo ?? host.loaded?.info;
    const busy = host.phase === 'ready' && scheduler.running?.lane === LANE[role];
    const r: RoleStatus = { backend: plan.backend, where, phase: busy ? 'busy' : host.phase };
    const name = info?.name ?? (where ? path.basename(where) : '');
    if (name) r.model = name;
    if (info) r.chats = info.chat;
    const need = host.loaded?.need;
    if (need) r.memoryBytes = need.modelBytes + need.contextBytes;
    if (host.problem && host.phase !== 'ready') r.error = host.problem;
    return r;
  }

  /** What makes a change worth sending at once. */
  private static shape(s: StatusResult): string {
    const roles = ROLES.map((r) => s.roles[r].phase).join(',');
    return `${s.phase}|${s.job?.kind ?? ''}|${s.job?.stage ?? ''}|${s.load?.phase ?? ''}|${s.storage.problem?.message ?? ''}|${roles}`;
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
