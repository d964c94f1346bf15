// host.ts - the model's lifecycle in the server: load (checks, engine open with the preset's
// budgets on a worker thread, tokenizer, one session for completions and one for chat),
// progress while it loads (phase, bytes, elapsed, estimate), unload, and the phase the
// status reports. A load says `loading` from the moment it is asked for (no `no-model`
// flash before it starts) and anyone may wait for it to end (whenLoadEnds). Loads and
// unloads take the engine exclusively from the scheduler, so no job runs on a model being
// replaced. Saving the load's timing is best effort: storage that cannot be written never
// fails a load. A model whose files change on disk under it is reported as an `error` phase
// naming the file (checkFiles); the engine refuses it until it is loaded again. It decides
// nothing about prompts or results.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Cancelled, K3Failure, modelLoadFailure } from '../errors';
import type { EnginePhase, K3Problem, LoadProgress, ModelInfo } from '../../protocol/lsp';
import type { Scheduler } from '../scheduler';
import type { WorkspaceStore } from '../state/store';
import { EngineError, Model } from './engine';
import { readModelInfo, shards } from './modelInfo';
import { EngineSession } from './runner';
import { Tokenizer } from './tokenizer';

/** A loaded model and everything made from it. */
export interface LoadedEngine {
  modelPath: string;
  model: Model;
  tokenizer: Tokenizer;
  /** The ghost-text session; a host that serves chat only (a second local model) opens
   * none, and nothing asks it for one (ServerCtx.hostFor). */
  completion?: EngineSession;
  chat: EngineSession;
  /** Identifies the checkpoint's bytes (config, index, shard sizes and heads). */
  fingerprint: string;
  /** Name, size and what it was trained for. */
  info: ModelInfo;
  /** What it holds by its plan, model and sessions. */
  need: MemoryNeed;
}

/** A completion checkpoint copies the recurrent state and the prompt's cache rows; room for
 * this many of them (the boundaries of the current prompt and the previous one's end). The
 * budget is that, from the model's plan for the completion context: no floor, so a small
 * model does not keep hundreds of MB of checkpoints it never needs. */
export const COMPLETION_CHECKPOINTS = 4;

/** A cheap identity of a checkpoint: config and index bytes, each shard's name, size and
 * first 64 KiB (a saved state is only reused with the model that wrote it). */
export function fingerprint(dir: string): string {
  const h = crypto.createHash('sha256');
  for (const f of ['config.json', 'model.safetensors.index.json']) {
    const p = path.join(dir, f);
    if (fs.existsSync(p)) h.update(f).update(fs.readFileSync(p));
  }
  const head = Buffer.alloc(65536);
  for (const s of shards(dir)) {
    h.update(`${s.file}:${s.bytes}`);
    const fd = fs.openSync(path.join(dir, s.file), 'r');
    try {
      const n = fs.readSync(fd, head, 0, head.length, 0);
      h.update(head.subarray(0, n));
    } finally {
      fs.closeSync(fd);
    }
  }
  return h.digest('hex').slice(0, 32);
}

/** How the sessions a load opens are sized: read once per load, after the tokenizer opens. */
export interface SessionSizes {
  threads: number;
  /** Positions of the completion session (its prompt budget, generation and margin). */
  completionContext: number;
  /** Positions of the chat session. */
  chatContext: number;
}

/** What a load may be told beyond the folder and the preset. */
export interface LoadOptions {
  /** The load waits for this to settle before it takes the engine (a second model loads
   * after the first, so its memory check sees the first one's plan). */
  after?: Promise<unknown>;
  /** Called with the opened model and the plan of its sessions before they open; a throw
   * (a K3Failure saying why) refuses the model, which is closed. */
  admit?: (need: MemoryNeed) => void;
}

/** What a loaded model holds by its plan (k3_model_plan), in bytes. */
export interface MemoryNeed {
  /** Weights and the preset's budgets. */
  modelBytes: number;
  /** Every session's context (caches, state, buffers) and the completion checkpoints. */
  contextBytes: number;
  /** MemAvailable when planned; 0: unknown. */
  available: number;
}

export interface HostEvents {
  /** The phase or the load's progress changed. */
  changed(): void;
  /** A load's progress, for $/progress. */
  progress(p: LoadProgress): void;
  /** A model is loaded, before it replaces anything: what the server makes from it (the chat
   * renderer) is made here, and a throw fails the load. */
  accept(engine: LoadedEngine): void;
}

export class EngineHost {
  phase: EnginePhase = 'no-model';
  loaded: LoadedEngine | undefined;
  progress: LoadProgress | undefined;
  /** Why there is no model, or what failed. */
  problem: K3Problem | undefined;
  /** The conversation whose sequence the chat session holds (chat service bookkeeping). */
  chatHeld: string | undefined;
  /** The model being loaded, while `phase` is `loading`. */
  loadingInfo: ModelInfo | undefined;
  private loading: { cancel(): void; settled: Promise<unknown> } | undefined;
  /** Counts load requests: only the newest one's ending sets the phase. */
  private loadSeq = 0;
  /** Loads numbered up to this were cancelled (cancelLoad). */
  private cancelledUpTo = 0;
  private loadEnded: Array<() => void> = [];

  /** `serves`: the roles whose sessions a load opens (both, unless this host holds the
   * chat role's own model). */
  constructor(
    private readonly scheduler: Scheduler,
    private readonly store: () => WorkspaceStore,
    private readonly sizes: () => SessionSizes,
    private readonly events: HostEvents,
    private readonly serves: 'both' | 'chat' = 'both',
  ) {}

  /** The loaded engine, or a K3Failure saying why there is none. */
  ready(): LoadedEngine {
    if (this.loaded) return this.loaded;
    if (this.phase === 'loading') throw new K3Failure('no-model', 'The model is still loading.');
    const p = this.problem;
    throw new K3Failure(p?.kind === 'model-missing' ? 'model-missing' : 'no-model', p?.message ?? 'No model is loaded.', p?.status, p?.detail, p?.action.kind);
  }

  /** Resolves when no load is in progress (at once when none is). */
  whenLoadEnds(): Promise<void> {
    if (this.phase !== 'loading') return Promise.resolve();
    return new Promise((resolve) => this.loadEnded.push(resolve));
  }

  /** Loads the model in modelPath with `preset`, replacing any loaded one. A second load
   * cancels the first. The phase is `loading` as soon as this is called (synchronously,
   * once the folder is checked). Resolves when it is ready; rejects with a K3Failure or
   * Cancelled. */
  async load(modelPath: string, preset: string, options: LoadOptions = {}): Promise<LoadedEngine> {
    const dir = path.resolve(modelPath);
    let info: ModelInfo;
    try {
      if (!fs.existsSync(path.join(dir, 'config.json'))) {
        throw new K3Failure(
          'model-missing',
          fs.existsSync(dir) ? `${dir} holds no config.json: it is not a Kimi K3 checkpoint folder.` : `The model folder ${dir} does not exist.`,
          undefined,
          dir,
        );
      }
      info = readModelInfo(dir);
    } catch (e) {
      // Checked before anything is replaced: a wrong folder leaves a loaded model alone.
      if (!this.loaded && this.phase !== 'loading') {
        this.phase = e instanceof K3Failure && e.kind === 'model-missing' ? 'no-model' : 'error';
        this.problem = e instanceof K3Failure ? e.problem() : undefined;
        this.events.changed();
      }
      throw e;
    }
    const seq = ++this.loadSeq;
    this.loading?.cancel();
    const previous = this.loading?.settled;
    const last = this.store().readWorkspace().lastLoad;
    this.progress = { modelPath: dir, phase: 'opening', bytesTotal: info.bytes, elapsedMs: 0 };
    if (last && last.bytes > 0) this.progress.estimateMs = Math.round((last.ms * info.bytes) / last.bytes);
    this.loadingInfo = info;
    this.phase = 'loading';
    this.problem = undefined;
    this.events.changed();
    await previous?.catch(() => undefined);
    await options.after?.catch(() => undefined);
    const newest = (): boolean => seq === this.loadSeq;
    let cancelled = !newest() || seq <= this.cancelledUpTo;
    let open: { cancel(): void } | undefined;
    const run = this.scheduler.exclusive(async () => {
      if (cancelled || !newest()) throw new Cancelled();
      this.scheduler.cancelAll();
      this.closeLoaded();
      const bytesTotal = info.bytes;
      const t0 = Date.now();
      this.events.changed();
      const tick = setInterval(() => this.report(t0), 500);
      try {
        const load = Model.open(dir, {
          preset,
          onProgress: (p) => {
            if (this.progress && this.phase === 'loading') {
              this.progress.bytesLoaded = p.bytesDone;
              this.report(t0);
            }
          },
        });
        open = load;
        if (cancelled) load.cancel();
        const model = await load.promise;
        let tokenizer: Tokenizer | undefined;
        try {
          this.setPhase('tokenizer', t0);
          tokenizer = await Tokenizer.openAsync(dir);
          this.setPhase('sessions', t0);
          const { threads, completionContext, chatContext } = this.sizes();
          const both = this.serves === 'both';
          const chatPlan = model.plan(chatContext);
          const completionPlan = both ? model.plan(completionContext) : undefined;
          const checkpointBytes = completionPlan ? COMPLETION_CHECKPOINTS * (completionPlan.recurrentState + completionPlan.kvCache) : 0;
          const need: MemoryNeed = {
            modelBytes: chatPlan.modelTotal,
            contextBytes: chatPlan.contextTotal + (completionPlan?.contextTotal ?? 0) + checkpointBytes,
            available: chatPlan.available,
          };
          options.admit?.(need);
          const completion = both ? model.session({ maxContext: completionContext, threads, checkpointBytes }) : undefined;
          let chat;
          try {
            // Chat takes no checkpoints: a turn resumes from the live sequence or a saved state.
            chat = model.session({ maxContext: chatContext, threads, checkpointBytes: 0 });
          } catch (e) {
            completion?.close();
            throw e;
          }
          const loaded: LoadedEngine = {
            modelPath: dir,
            model,
            tokenizer,
            ...(completion ? { completion: new EngineSession(completion, this.scheduler, () => this.checkFiles()) } : {}),
            chat: new EngineSession(chat, this.scheduler, () => this.checkFiles()),
            fingerprint: fingerprint(dir),
            info,
            need,
          };
          this.events.accept(loaded);
          // Best effort: a failed write is the store's problem to report, never the load's.
          void this.store().updateWorkspace({ lastLoad: { bytes: bytesTotal, ms: Date.now() - t0 } });
          return loaded;
        } catch (e) {
          tokenizer?.close();
          model.close();
          throw e;
        }
      } finally {
        clearInterval(tick);
      }
    });
    this.loading = {
      cancel: () => {
        cancelled = true;
        open?.cancel();
      },
      settled: run,
    };
    try {
      const loaded = await run;
      this.loaded = loaded;
      this.chatHeld = undefined;
      if (newest()) {
        this.phase = 'ready';
        this.progress = undefined;
        this.problem = undefined;
      }
      return loaded;
    } catch (e) {
      const cancelledNow = cancelled || e instanceof Cancelled || (e instanceof EngineError && e.cancelled);
      const failure = cancelledNow ? undefined : modelLoadFailure(e, dir);
      // A newer load has its own phase and progress; this one only says how it ended.
      if (newest()) {
        this.progress = undefined;
        this.phase = failure && failure.kind !== 'model-missing' ? 'error' : 'no-model';
        this.problem = failure?.problem() ?? { kind: 'no-model', action: { kind: 'load-model', title: 'Load the Model' }, message: 'The model load was cancelled.' };
      }
      throw failure ?? new Cancelled();
    } finally {
      if (this.loading?.settled === run) this.loading = undefined;
      if (newest()) {
        this.loadingInfo = undefined;
        for (const wake of this.loadEnded.splice(0)) wake();
      }
      this.events.changed();
    }
  }

  /** After a failed engine call: when the loaded model's files changed on disk under it
   * (the engine then refuses every pass, naming the file), the phase becomes `error` with
   * that problem and the reload action, until a load replaces the model. */
  checkFiles(): void {
    const l = this.loaded;
    if (!l || this.phase === 'error') return;
    const changed = l.model.changed();
    if (!changed) return;
    this.phase = 'error';
    this.problem = new K3Failure(
      'model-invalid',
      `The model files changed on disk while the engine ran; load the model again: ${changed.detail}`,
      changed.code,
      changed.detail,
      'load-model',
    ).problem();
    this.events.changed();
  }

  /** Abandons a load in progress (its promise rejects with Cancelled). */
  cancelLoad(): void {
    this.cancelledUpTo = this.loadSeq;
    this.loading?.cancel();
  }

  /** Stops every job and frees the model. */
  async unload(): Promise<void> {
    this.cancelLoad();
    await this.loading?.settled.catch(() => undefined);
    await this.scheduler.exclusive(async () => {
      this.scheduler.cancelAll();
      this.closeLoaded();
    });
    this.phase = 'no-model';
    this.problem = { kind: 'no-model', action: { kind: 'load-model', title: 'Load the Model' }, message: 'The model was unloaded.' };
    this.events.changed();
  }

  private closeLoaded(): void {
    const l = this.loaded;
    if (!l) return;
    this.loaded = undefined;
    this.chatHeld = undefined;
    l.completion?.close();
    l.chat.close();
    l.tokenizer.close();
    l.model.close();
  }

  private setPhase(phase: LoadProgress['phase'], t0: number): void {
    if (!this.progress) return;
    this.progress.phase = phase;
    this.report(t0);
  }

  private report(t0: number): void {
    if (!this.progress) return;
    this.progress.elapsedMs = Date.now() - t0;
    this.events.progress({ ...this.progress });
    this.events.changed();
  }
}
