// runner.ts - prefill and generation cut into scheduler slices on one Session. Prefill
// syncs the sequence to the prompt in chunks, taking a checkpoint at each stable boundary
// the caller names, so the next prompt that shares that prefix resumes there; generation
// runs in chunks of tokens, streaming them. Chunks are sized from measured speed to take
// about SLICE_MS each, so another lane waits at most about that long. A mirror of what the
// session holds (its live sequence and the checkpoints taken) tells where to resume; the
// engine decides what it actually reuses and reports it. `k3 serve` does the same in one
// piece per request (prefill in native/tools/serve_checkpoints.c).
import { Cancelled } from '../errors';
import type { Job, Scheduler } from '../scheduler';
import { EngineError, type GenerateStats, type Session } from './engine';
import type { Tokenizer } from './tokenizer';

/** Target duration of one slice. */
export const SLICE_MS = 250;
const MIRRORED_CHECKPOINTS = 32;

/** Length of the common prefix of two token lists. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Tokens per slice from measured milliseconds per token. */
class SliceClock {
  private msPerToken: number | undefined;

  constructor(
    private readonly initial: number,
    private readonly min: number,
    private readonly max: number,
  ) {}

  tokens(): number {
    if (this.msPerToken === undefined) return this.initial;
    return Math.max(this.min, Math.min(this.max, Math.floor(SLICE_MS / Math.max(this.msPerToken, 1e-3))));
  }

  measure(tokens: number, ms: number): void {
    if (tokens <= 0) return;
    const sample = ms / tokens;
    this.msPerToken = this.msPerToken === undefined ? sample : 0.7 * this.msPerToken + 0.3 * sample;
  }
}

export interface PrefillResult {
  promptTokens: number;
  reused: number;
  prefilled: number;
  ms: number;
}

export type GenerateEnd = 'stop-token' | 'length' | 'stopped';

export interface GenerateResult {
  ids: number[];
  end: GenerateEnd;
  drafted: number;
  accepted: number;
  /** Leading ids that spelled the healed bytes (while the constraint was active). */
  healed: number;
  ms: number;
}

export interface GenerateRequest {
  maxTokens: number;
  specMax: number;
  stopIds: readonly number[];
  contextIds: readonly number[];
  /** Token healing: the first ids must spell these bytes (the engine's constraint, carried
   * across slices: each slice gets what the earlier ones have not spelled yet). */
  heal?: { bytes: Uint8Array; tokenizer: Tokenizer };
  /** New ids as they come; may call job.stop() to end generation. */
  onTokens(ids: Int32Array): void;
}

/** A Session with the mirror and the sliced operations. */
export class EngineSession {
  /** The sequence the session holds (as far as we know). */
  private live: number[] = [];
  private checkpoints: number[][] = [];
  private readonly prefillClock = new SliceClock(64, 16, 4096);
  private readonly generateClock = new SliceClock(16, 4, 1024);

  constructor(
    readonly session: Session,
    private readonly scheduler: Scheduler,
    /** Told of every failed engine call before it is thrown (the host asks the model
     * whether its files changed). */
    private readonly onFailure?: (e: unknown) => void,
  ) {}

  /** One engine call as a scheduler slice; a failure is reported, then thrown. */
  private async slice<T>(job: Job, call: () => Promise<T>): Promise<T> {
    try {
      return await this.scheduler.slice(job, this.session, call);
    } catch (e) {
      this.onFailure?.(e);
      throw e;
    }
  }

  get maxContext(): number {
    return this.session.maxContext;
  }

  /** Forget what the session holds (after loading a saved state or a reset). */
  resetMirror(live: ArrayLike<number>): void {
    this.live = Array.from(live);
  }

  /** The longest prefix of ids the session can resume from, as far as we know. */
  resumePoint(ids: readonly number[]): number {
    let best = commonPrefix(this.live, ids) === this.live.length ? this.live.length : 0;
    for (const c of this.checkpoints) {
      if (c.length > best && c.length <= ids.length && commonPrefix(c, ids) === c.length) best = c.length;
    }
    return best;
  }

  /** The length of the live sequence when it is a prefix of ids, else 0. */
  holdsPrefixOf(ids: readonly number[]): number {
    return commonPrefix(this.live, ids) === this.live.length ? this.live.length : 0;
  }

  /** Makes the sequence exactly ids, in slices, checkpointing at each of `boundaries`
   * (positions in ids, any order). The first sync reports how much was reused. */
  async prefill(job: Job, ids: readonly number[], boundaries: readonly number[]): Promise<PrefillResult> {
    const t0 = Date.now();
    const n = ids.length;
    if (n > this.maxContext) {
      throw new EngineError('context-full', 8, `the prompt has ${n} tokens, past the context of ${this.maxContext} positions`);
    }
    const stops = [...new Set(boundaries.filter((b) => b > 0 && b <= n))].sort((a, b) => a - b);
    const start = this.resumePoint(ids);
    let reused: number | undefined;
    let pos = -1;
    job.stage = 'prefill';
    job.tokens = 0;
    while (pos < n) {
      let target: number;
      if (pos < 0) {
        target = start > 0 ? start : Math.min(n, this.prefillClock.tokens(), stops[0] ?? n);
      } else {
        const nextStop = stops.find((b) => b > pos) ?? n;
        target = Math.min(n, pos + this.prefillClock.tokens(), nextStop);
      }
      const slice = ids.slice(0, target);
      const s0 = Date.now();
      let r: { reused: number; length: number };
      try {
        r = await this.slice(job, () => this.session.sync(slice));
      } catch (e) {
        this.live = []; // unknown: a cancelled sync keeps an unknown part
        throw e;
      }
      this.live = slice;
      if (reused === undefined) reused = r.reused;
      this.prefillClock.measure(target - r.reused, Date.now() - s0);
      job.tokens = target - reused;
      pos = target;
      if (stops.includes(target)) await this.checkpoint(job, slice);
      if (target === n) break;
    }
    const r = reused ?? 0;
    return { promptTokens: n, reused: r, prefilled: n - r, ms: Date.now() - t0 };
  }

  /** Checkpoints the live sequence (which must be `ids`). */
  async checkpoint(job: Job, ids: readonly number[]): Promise<void> {
    await this.slice(job, () => this.session.checkpoint());
    const at = this.checkpoints.findIndex((c) => c.length === ids.length && commonPrefix(c, ids) === c.length);
    if (at >= 0) this.checkpoints.splice(at, 1);
    this.checkpoints.push(Array.from(ids));
    if (this.checkpoints.length > MIRRORED_CHECKPOINTS) this.checkpoints.shift();
  }

  /** Greedy continuation of `prompt` (already synced by prefill()), in slices. Rejects with
   * Cancelled when the job is cancelled; ends `stopped` when the job is stopped. */
  async generate(job: Job, prompt: readonly number[], req: GenerateRequest): Promise<GenerateResult> {
    const t0 = Date.now();
    const all = Array.from(prompt);
    const ids: number[] = [];
    let drafted = 0;
    let accepted = 0;
    let healed = 0;
    let healLeft = req.heal?.bytes ?? new Uint8Array(0);
    let end: GenerateEnd = 'length';
    job.stage = 'generate';
    job.tokens = 0;
    while (ids.length < req.maxTokens) {
      if (job.stopped) {
        end = 'stopped';
        break;
      }
      if (all.length >= this.maxContext) break; // the context is full: ends like the limit
      job.sliceStart = ids.length;
      if (ids.length > 0) {
        // k3_generate leaves its last token undecoded; decode it before going on.
        const seq = all.slice();
        await this.slice(job, () => this.session.sync(seq));
        this.live = seq;
      }
      const want = Math.min(req.maxTokens - ids.length, this.generateClock.tokens(), this.maxContext - all.length);
      const g0 = Date.now();
      let stats: GenerateStats;
      try {
        stats = await this.slice(job, () =>
          this.session.generate({
            maxTokens: want,
            specMax: req.specMax,
            stopIds: req.stopIds,
            contextIds: req.contextIds,
            heal: req.heal && healLeft.length > 0 ? { bytes: healLeft, tokenizer: req.heal.tokenizer } : undefined,
            onTokens: (t) => {
              for (const id of t) {
                ids.push(id);
                all.push(id);
                if (req.heal && healLeft.length > 0) {
                  healLeft = healLeft.subarray(Math.min(healLeft.length, req.heal.tokenizer.tokenBytes(id).length));
                  healed++;
                }
              }
              job.tokens = ids.length;
              req.onTokens(t);
            },
          }),
        );
      } catch (e) {
        this.live = all.slice(0, -1);
        if (e instanceof EngineError && e.cancelled) throw new Cancelled();
        throw e;
      }
      this.live = all.slice(0, -1);
      this.generateClock.measure(stats.emitted, Date.now() - g0);
      drafted += stats.drafted;
      accepted += stats.accepted;
      if (stats.stopReason === 'token') {
        end = 'stop-token';
        break;
      }
      if (stats.stopReason === 'callback') {
        end = 'stopped';
        break;
      }
    }
    return { ids, end, drafted, accepted, healed, ms: Date.now() - t0 };
  }

  /** Saves the live sequence's state to path. */
  async saveState(job: Job, path: string): Promise<void> {
    job.stage = 'save';
    await this.slice(job, () => this.session.saveState(path));
  }

  /** Loads a saved state; the mirror follows. EngineError "state" when unusable. */
  async loadState(job: Job, path: string): Promise<number> {
    const tokens = await this.slice(job, async () => {
      await this.session.loadState(path);
      return this.session.tokens();
    });
    this.live = Array.from(tokens);
    return tokens.length;
  }

  close(): void {
    this.session.close();
  }
}
