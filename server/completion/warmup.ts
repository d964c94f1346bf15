// warmup.ts - hides the model's latency (k3.completions.warmup, issue 32): work done ahead
// of the keystroke that needs it, in idle time.
// - A context change (k3/context/didChange: a document opened or switched to) lays out the
//   prompt a completion at that cursor would use (CompletionService.prepare, the very layout
//   of a request, so the stable prefix is identical) and runs it prompt-only: the local
//   engine prefills it with the layout's checkpoints; a remote server gets a prefill-only
//   request that fills its prefix cache (server/remote/warmup.ts).
// - An accept (k3/completion/didAccept) computes the suggestion at the cursor after the
//   accepted text and puts it in the completion cache; the request that follows is answered
//   from there, or joins it while it runs. An edit to the document cancels it.
// Both run as background jobs (scheduler.ts): they wait until no user job is in the
// scheduler and the first user job that arrives cancels them. This file decides what to warm
// and counts it; it does not lay out prompts nor talk to a backend itself.
import type { CompletionPositionParams, WarmupStats } from '../../protocol/lsp';
import { Cancelled, engineFailure } from '../errors';
import { Job } from '../scheduler';
import type { StatusReporter } from '../status';
import type { CompletionServiceHost, Prepared } from './service';
import { emptyStats } from './service';

/** What Warmup uses of the completion service (CompletionService implements it). */
export interface WarmupService {
  prepare(uri: string, pos: { line: number; character: number }, t0: number): Prepared | undefined;
  compute(p: Prepared, job: Job, stats: ReturnType<typeof emptyStats>, t0: number): Promise<unknown>;
}

/** A suggestion being computed ahead after an accept. */
interface Ahead {
  job: Job;
  uri: string;
  version: number;
  base: string;
  before: string;
  done: Promise<unknown>;
}

/** An accept whose edit the server has not seen yet (its didChange comes later). */
interface PendingAccept {
  params: CompletionPositionParams;
}

export class Warmup {
  private prefillJob: Job | undefined;
  private ahead: Ahead | undefined;
  private pending: PendingAccept | undefined;
  /** The last context change that found no backend to warm (the model still loading, or
   * unloaded): warmed when one is ready (backendReady), unless the document moved on. */
  private deferred: CompletionPositionParams | undefined;
  /** The text the last suggestion computed ahead was for, until a request is served it. */
  private computed: { base: string; before: string } | undefined;
  readonly stats: WarmupStats = { prefills: 0, prefillsCancelled: 0, ahead: 0, aheadCancelled: 0, aheadServed: 0 };

  constructor(
    private readonly service: WarmupService,
    private readonly ctx: Pick<CompletionServiceHost, 'settings' | 'documents' | 'scheduler' | 'log'> & { readonly status: Pick<StatusReporter, 'warmup' | 'changed'> },
  ) {}

  private get enabled(): boolean {
    return this.ctx.settings.completions.warmup;
  }

  /** k3/context/didChange: prefill the prompt of a completion at the position, in idle time.
   * Resolves when the prefill ended, was cancelled or failed (never rejects). */
  async contextChanged(params: unknown): Promise<void> {
    const p = positionParams(params, 'k3/context/didChange', (m) => this.ctx.log(m));
    if (!p || !this.enabled) return;
    const doc = this.ctx.documents.get(p.uri);
    if (!doc || doc.version !== p.version) return; // the editor has moved on; its next change says where
    this.prefillJob?.cancel('superseded');
    const t0 = Date.now();
    const prepared = this.prepare(p);
    const warm = prepared?.backend.warm?.bind(prepared.backend);
    this.deferred = prepared === undefined ? p : undefined;
    if (prepared === undefined) this.ctx.log(`warm-up waits: no model or server is ready for ${p.uri}; it runs when one is`);
    if (!prepared || !warm) return;
    const job = new Job('completion', 'background');
    this.prefillJob = job;
    this.stats.prefills++;
    this.changed();
    try {
      const r = await this.ctx.scheduler.run(job, () => warm(job, prepared.layout));
      this.stats.lastReusedTokens = r.reused;
      this.stats.lastPrefilledTokens = r.prefilled;
      this.ctx.log(`warm-up: prefilled ${r.prefilled} tokens of ${prepared.layout.ids.length} (reused ${r.reused}) for ${p.uri} at ${p.position.line}:${p.position.character} in ${Date.now() - t0} ms`);
    } catch (e) {
      const f = engineFailure(e);
      if (f instanceof Cancelled) this.stats.prefillsCancelled++;
      else this.ctx.log(`warm-up: the prefill for ${p.uri} failed: ${(f as Error).message}`);
    } finally {
      if (this.prefillJob === job) this.prefillJob = undefined;
      this.changed();
    }
  }

  /** A backend became ready (a model loaded, a remote server answered): the context change
   * that found none is warmed now, if its document is still at that version. */
  backendReady(): void {
    const p = this.deferred;
    this.deferred = undefined;
    if (p && this.ctx.documents.get(p.uri)?.version === p.version) void this.contextChanged(p);
  }

  /** k3/completion/didAccept: compute the next suggestion at the position, in idle time, into
   * the completion cache. Resolves when it ended, was cancelled or failed (never rejects). */
  async accepted(params: unknown): Promise<void> {
    const p = positionParams(params, 'k3/completion/didAccept', (m) => this.ctx.log(m));
    if (!p || !this.enabled) return;
    this.cancelAhead();
    const doc = this.ctx.documents.get(p.uri);
    if (!doc || doc.version > p.version) return; // typed past it already
    if (doc.version < p.version) {
      this.pending = { params: p }; // the accept's own edit is still on its way
      return;
    }
    await this.computeAhead(p);
  }

  /** A document changed: an accept waiting for this edit starts; a suggestion computed ahead
   * in that document no longer fits (a keystroke after the accept) and is cancelled. */
  edited(uri: string): void {
    const doc = this.ctx.documents.get(uri);
    if (this.ahead && this.ahead.uri === uri && doc?.version !== this.ahead.version) this.cancelAhead();
    const pending = this.pending;
    if (pending && pending.params.uri === uri && doc) {
      if (doc.version >= pending.params.version) this.pending = undefined;
      if (doc.version === pending.params.version) void this.computeAhead(pending.params);
    }
  }

  /** The suggestion being computed ahead for exactly this text, promoted to a user job,
   * for a request to wait on; undefined when none. */
  join(base: string, before: string): Promise<unknown> | undefined {
    const a = this.ahead;
    if (!a || a.base !== base || a.before !== before || a.job.cancelled) return undefined;
    this.ctx.scheduler.promote(a.job);
    return a.done;
  }

  /** A request for this text was answered from the cache: counted as served ahead when the
   * last suggestion computed ahead (or `joined`) put it there. */
  answeredFromCache(base: string, before: string, joined: boolean): void {
    const c = this.computed;
    if (!joined && !(c && c.base === base && c.before === before)) return;
    this.computed = undefined;
    this.stats.aheadServed++;
    this.changed();
  }

  /** Stops every warm-up (settings changed, model replaced). */
  cancel(): void {
    this.deferred = undefined;
    this.prefillJob?.cancel('superseded');
    this.pending = undefined;
    this.cancelAhead();
  }

  /** A request for other text is coming: the suggestion computed ahead (joined or not) and an
   * accept waiting for its edit are of no use. */
  supersede(): void {
    this.cancelAhead();
  }

  private cancelAhead(): void {
    this.pending = undefined;
    this.ahead?.job.cancel('superseded');
  }

  private async computeAhead(p: CompletionPositionParams): Promise<void> {
    const t0 = Date.now();
    const prepared = this.prepare(p);
    if (!prepared) return;
    const job = new Job('completion', 'background');
    const stats = emptyStats('engine');
    const done = this.service.compute(prepared, job, stats, t0);
    const ahead: Ahead = { job, uri: p.uri, version: p.version, base: prepared.base, before: prepared.before, done };
    this.ahead = ahead;
    this.stats.ahead++;
    this.changed();
    try {
      await done;
      this.computed = { base: prepared.base, before: prepared.before };
      this.ctx.log(`warm-up: the next suggestion at ${p.uri} ${p.position.line}:${p.position.character} is cached (prompt ${stats.promptTokens} tokens, reused ${stats.reusedTokens}, generated ${stats.generatedTokens}) in ${Date.now() - t0} ms`);
    } catch (e) {
      if (e instanceof Cancelled) this.stats.aheadCancelled++;
      else this.ctx.log(`warm-up: the next suggestion at ${p.uri} failed: ${(engineFailure(e) as Error).message}`);
    } finally {
      if (this.ahead === ahead) this.ahead = undefined;
      this.changed();
    }
  }

  /** The prepared completion, or undefined (logged) when the position no longer fits. */
  /** The prompt at p; undefined when no backend is ready (or the document is not open), null
   * when it cannot be laid out (logged). */
  private prepare(p: CompletionPositionParams): Prepared | undefined | null {
    try {
      return this.service.prepare(p.uri, p.position, Date.now());
    } catch (e) {
      this.ctx.log(`warm-up skipped: ${(e as Error).message}`);
      return null;
    }
  }

  private changed(): void {
    this.ctx.status.warmup = { ...this.stats };
    this.ctx.status.changed();
  }
}

/** The params of a warm-up notification, or undefined (logged) when malformed. */
function positionParams(params: unknown, method: string, log: (m: string) => void): CompletionPositionParams | undefined {
  const p = params as { uri?: unknown; version?: unknown; position?: { line?: unknown; character?: unknown } } | null;
  if (typeof p?.uri === 'string' && Number.isInteger(p.version) && Number.isInteger(p.position?.line) && Number.isInteger(p.position?.character)) {
    return { uri: p.uri, version: p.version as number, position: { line: p.position!.line as number, character: p.position!.character as number } };
  }
  log(`${method} refused: it needs { uri, version, position: { line, character } } of string and integers`);
  return undefined;
}
