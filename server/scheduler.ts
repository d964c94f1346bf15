// scheduler.ts - one engine, one queue. Every engine call (a "slice": one sync chunk or one
// run of generation) goes through Scheduler.slice(), which runs one call at a time across
// all jobs. When several jobs wait, lanes take turns (completion, chat, completion, ...), so
// a long chat reply cannot starve completions nor the reverse. A Job can be cancelled at
// any moment: waiting, it leaves the queue; running, its session is cancelled and the
// engine stops within one forward pass. A background job (a warm-up: a prompt prefilled
// ahead of need, a suggestion computed ahead) waits until no user job is in the scheduler,
// and any user job that arrives cancels it, so it never delays what the user waits for.
// It knows nothing about prompts or results.
import { Cancelled } from './errors';
import type { JobStatus } from '../protocol/lsp';

export type Lane = 'completion' | 'chat';

/** `user`: someone waits for it. `background`: work ahead of need, run only when no user
 * job is in the scheduler and cancelled ('superseded') by the first that arrives. */
export type Priority = 'user' | 'background';

/** What a running job's work can be told: an engine Session, or a remote request. */
export interface JobTarget {
  /** Ends the work now; it rejects with Cancelled. An engine Session returns the tokens its
   * running generate() had emitted (see Job.sliceStart). */
  cancel(): number | void;
  /** Ends generation after the current token; the work resolves with what it has. */
  stop(): void;
}

/** One request's work on the engine: a series of slices, cancellable as a whole. */
export class Job {
  readonly startedAt = Date.now();
  stage: JobStatus['stage'] = 'prefill';
  /** Tokens prefilled or generated so far in the current stage. */
  tokens = 0;
  private reason: 'cancelled' | 'superseded' | undefined;
  private stopRequested = false;
  /** The session (or remote request) running this job's work now, if any. */
  active: JobTarget | undefined;
  /** Rejects this job's wait for a turn (set while it waits). */
  abortWait: ((e: Error) => void) | undefined;
  /** Tokens counted when the cancellation was asked for (see CompletionStats). */
  tokensAtCancel: number | undefined;
  /** The job's tokens before the engine call now running: with what that call had emitted,
   * the exact count at a cancel, whatever has reached JS. */
  sliceStart = 0;

  private cancelListeners: Array<(e: Cancelled) => void> = [];

  /** Raised to `user` by Scheduler.promote() when someone starts waiting for the job. */
  priority: Priority;

  constructor(
    readonly lane: Lane,
    priority: Priority = 'user',
  ) {
    this.priority = priority;
  }

  /** Rejects with Cancelled when the job is cancelled (never resolves). */
  whenCancelled(): Promise<never> {
    return new Promise<never>((_, reject) => {
      if (this.reason) reject(new Cancelled(this.reason));
      else this.cancelListeners.push(reject);
    });
  }

  get cancelled(): boolean {
    return this.reason !== undefined;
  }

  get cancelReason(): 'cancelled' | 'superseded' | undefined {
    return this.reason;
  }

  get stopped(): boolean {
    return this.stopRequested;
  }

  /** Ends the job: a waiting slice rejects with Cancelled, a running one is cancelled in the engine. */
  cancel(reason: 'cancelled' | 'superseded' = 'cancelled'): void {
    if (this.reason) return;
    this.reason = reason;
    const emitted = this.active?.cancel();
    this.tokensAtCancel = this.stage === 'generate' && typeof emitted === 'number' ? this.sliceStart + emitted : this.tokens;
    this.abortWait?.(new Cancelled(reason));
    for (const l of this.cancelListeners) l(new Cancelled(reason));
    this.cancelListeners = [];
  }

  /** Ends generation gracefully: the running generate() returns after its current token and
   * no further generation slice starts (prefill still ends in Cancelled). */
  stop(): void {
    this.stopRequested = true;
    this.active?.stop();
  }

  throwIfCancelled(): void {
    if (this.reason) throw new Cancelled(this.reason);
  }

  status(now = Date.now()): JobStatus {
    return { kind: this.lane, stage: this.stage, tokens: this.tokens, elapsedMs: now - this.startedAt };
  }
}

interface Waiter {
  job: Job | null; // null: an exclusive section
  grant: () => void;
}

export class Scheduler {
  private owner: Job | null | undefined = undefined; // undefined: free; null: exclusive
  private readonly waiting: Waiter[] = [];
  private lastLane: Lane | undefined;
  private readonly jobs = new Set<Job>();
  private readonly laneTail: Record<Lane, Promise<void>> = { completion: Promise.resolve(), chat: Promise.resolve() };
  /** Called when the last user job settles (background jobs wait for it). */
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly onChange: () => void = () => undefined) {}

  /** The job whose slice runs now. */
  get running(): Job | undefined {
    return this.owner ?? undefined;
  }

  /** Jobs waiting, per lane; `working` tells which jobs run outside slices (remote requests). */
  queued(working: (j: Job) => boolean = () => false): { completion: number; chat: number } {
    const q = { completion: 0, chat: 0 };
    for (const j of this.jobs) if (j !== this.owner && !working(j)) q[j.lane]++;
    return q;
  }

  /** Runs a job's body once the lane's previous jobs have settled (jobs of one lane share
   * a session, so they run one after another; slices of different lanes interleave).
   * The job counts for status and cancelAll() from now until it settles. */
  /** A user job first cancels every background job (a running one stops within a forward
   * pass or closes its stream); a background job first waits until no user job is here. */
  async run<T>(job: Job, body: () => Promise<T>): Promise<T> {
    if (job.priority === 'user') for (const j of this.jobs) if (j.priority === 'background') j.cancel('superseded');
    this.jobs.add(job);
    this.onChange();
    const previous = this.laneTail[job.lane];
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    this.laneTail[job.lane] = previous.then(() => mine);
    try {
      if (!job.cancelled) await Promise.race([previous, job.whenCancelled()]);
      if (job.priority === 'background') await this.whenIdle(job);
      job.throwIfCancelled();
      return await body();
    } finally {
      done();
      this.jobs.delete(job);
      if (!this.hasUserJob()) for (const w of this.idleWaiters.splice(0)) w();
      this.onChange();
    }
  }

  /** Makes a background job a user job (a request now waits for its result): it no longer
   * waits for idle time, and user jobs that arrive no longer cancel it. */
  promote(job: Job): void {
    if (job.priority === 'user') return;
    job.priority = 'user';
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Whether a user job other than a promoted one waiting for idle is queued or running. */
  private hasUserJob(): boolean {
    for (const j of this.jobs) if (j.priority === 'user') return true;
    return false;
  }

  /** Resolves when no user job is here; rejects with Cancelled when `job` is cancelled first. */
  private async whenIdle(job: Job): Promise<void> {
    while (!job.cancelled && job.priority === 'background' && this.hasUserJob()) {
      await Promise.race([new Promise<void>((resolve) => this.idleWaiters.push(resolve)), job.whenCancelled()]);
    }
  }

  /** Runs `call` on `session` for `job` when it is the job's turn. Rejects with Cancelled
   * when the job is cancelled before its turn; a cancel during the call reaches the engine. */
  async slice<T>(job: Job, session: JobTarget, call: () => Promise<T>): Promise<T> {
    job.throwIfCancelled();
    await this.acquire(job);
    try {
      job.throwIfCancelled();
      job.active = session;
      this.onChange();
      return await call();
    } finally {
      job.active = undefined;
      this.release(job.lane);
    }
  }

  /** Runs body with the engine to itself (model load and unload). Jobs keep their place. */
  async exclusive<T>(body: () => Promise<T>): Promise<T> {
    await new Promise<void>((resolve) => {
      if (this.owner === undefined) {
        this.owner = null;
        resolve();
      } else {
        this.waiting.unshift({ job: null, grant: resolve });
      }
    });
    try {
      return await body();
    } finally {
      this.release(undefined);
    }
  }

  /** Cancels every job, waiting or running. */
  cancelAll(): void {
    for (const j of this.jobs) j.cancel();
  }

  private acquire(job: Job): Promise<void> {
    if (this.owner === undefined && this.waiting.length === 0) {
      this.owner = job;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        job,
        grant: () => {
          job.abortWait = undefined;
          resolve();
        },
      };
      job.abortWait = (e) => {
        const i = this.waiting.indexOf(w);
        if (i >= 0) this.waiting.splice(i, 1);
        job.abortWait = undefined;
        this.onChange();
        reject(e);
      };
      this.waiting.push(w);
      this.onChange();
    });
  }

  private release(lane: Lane | undefined): void {
    if (lane) this.lastLane = lane;
    this.owner = undefined;
    const next = this.pick();
    if (next) {
      this.waiting.splice(this.waiting.indexOf(next), 1);
      this.owner = next.job;
      next.grant();
    }
    this.onChange();
  }

  /** Exclusive sections first; then user jobs: the oldest waiter of the other lane, else the
   * oldest; background jobs last. */
  private pick(): Waiter | undefined {
    const exclusive = this.waiting.find((w) => w.job === null);
    if (exclusive) return exclusive;
    const user = this.waiting.filter((w) => w.job?.priority === 'user');
    const pool = user.length > 0 ? user : this.waiting;
    return pool.find((w) => w.job && w.job.lane !== this.lastLane) ?? pool[0];
  }
}
