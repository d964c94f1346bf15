// engine.ts - the typed facade over the native engine that server code imports (with
// tokenizer.ts): opening a model off the JS thread, and Sessions whose long calls (sync,
// generate, checkpoint, saved state) run on worker threads and stream tokens back. Engine
// failures become EngineErrors carrying the status name and number and the engine's
// detail. It decides nothing about prompts, caching or scheduling (server/scheduler.ts
// and the features do).
import { loadAddon, type FirstTokenForecast, type ForecastCheck, type NativeGenerateStats, type NativeModel, type NativeOpenProgress, type NativePlan, type NativePreset, type NativeSession } from './addon';
import type { Tokenizer } from './tokenizer';

/** k3_status names (native/src/version.c), fixed forever like the numbers. */
export type EngineStatusName =
  | 'invalid-argument'
  | 'io'
  | 'format'
  | 'config'
  | 'tensor'
  | 'out-of-memory'
  | 'budget'
  | 'context-full'
  | 'token'
  | 'tokenizer'
  | 'state'
  | 'cancelled'
  | 'expert-read'
  | 'internal';

export class EngineError extends Error {
  constructor(
    /** The k3_status name, e.g. "io". */
    readonly code: EngineStatusName,
    /** The k3_status number. */
    readonly status: number,
    /** The engine's detail: file, tensor, field, numbers. */
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'EngineError';
  }

  get cancelled(): boolean {
    return this.code === 'cancelled';
  }
}

interface NativeError {
  message: string;
  code?: unknown;
  status?: unknown;
  stats?: unknown;
}

/** The addon's Error as an EngineError; anything else (a TypeError: our bug) as it is. */
export function toEngineError(e: unknown): unknown {
  const n = e as NativeError | null;
  if (n && typeof n.code === 'string' && typeof n.status === 'number') {
    return new EngineError(n.code as EngineStatusName, n.status, n.message);
  }
  return e;
}

async function engineCall<T>(p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    throw toEngineError(e);
  }
}

export interface ModelLoad {
  readonly promise: Promise<Model>;
  /** The promise rejects with an EngineError "cancelled". */
  cancel(): void;
}

export interface SessionOptions {
  /** Positions the sequence may reach (sizes the MLA cache). */
  maxContext: number;
  threads?: number;
  /** Tokens per prefill pass; absent or 0: sized by the plan (128 unless weights stream). */
  batch?: number;
  /** Memory the session's checkpoints may hold; least recently used dropped first. */
  checkpointBytes?: number;
}

export class Model {
  private constructor(readonly native: NativeModel, readonly dir: string) {}

  /** Opens the checkpoint in dir on a worker thread with the budgets of `preset` (a name
   * from presets(), "auto", or absent for everything mapped). */
  static open(dir: string, options: { preset?: string; onProgress?: (p: NativeOpenProgress) => void } = {}): ModelLoad {
    const op = loadAddon().openModel(dir, options);
    return {
      promise: engineCall(() => op.promise).then((native) => new Model(native, dir)),
      cancel: () => op.cancel(),
    };
  }

  get vocabSize(): number {
    return this.native.vocabSize;
  }

  /** What a context of maxContext positions needs on this model (k3_model_plan), with the
   * prefill batch sessions get by default (sized by the plan). */
  plan(maxContext: number): NativePlan {
    return loadAddon().modelPlan(this.native, { maxContext, batch: 0 });
  }

  /** A new sequence on this model; throws an EngineError when it cannot be allocated. */
  session(options: SessionOptions): Session {
    try {
      const addon = loadAddon();
      const native = new addon.Session(this.native, {
        maxContext: options.maxContext,
        threads: options.threads ?? 1,
        batch: options.batch ?? 0, // K3_BATCH_AUTO: sized by the plan where weights stream
      });
      if (options.checkpointBytes !== undefined) native.setCheckpointLimit(options.checkpointBytes);
      return new Session(native, options.maxContext, options.checkpointBytes);
    } catch (e) {
      throw toEngineError(e);
    }
  }

  /** undefined while the model is still the one loaded; else the EngineError "io" every
   * pass now fails with, naming the shard that changed on disk (k3_model_check). */
  changed(): EngineError | undefined {
    const e = this.native.check();
    return e ? (toEngineError(e) as EngineError) : undefined;
  }

  /** Frees the weights. Close every session first. */
  close(): void {
    this.native.close();
  }
}

export type GenerateStats = NativeGenerateStats;
export type OpenProgress = NativeOpenProgress;
export type EnginePreset = NativePreset;

/** The engine's named memory presets (the same table as the CLI's --list-presets). */
export function enginePresets(): EnginePreset[] {
  return loadAddon().presets();
}

/** Seconds per token of the full release per preset on this machine, where it was measured. */
export function enginePresetForecasts(): Record<string, number> {
  return loadAddon().presetForecasts();
}

/** Time to first token per preset (512- and 2,048-token prompts), or {} without a profile. */
export function enginePresetFirstTokens(): Record<string, FirstTokenForecast[]> {
  return loadAddon().presetFirstTokens();
}

/** How those forecasts did where this machine's profile was measured, or null. */
export function engineForecastCheck(): ForecastCheck | null {
  return loadAddon().forecastCheck();
}

export interface GenerateOptions {
  maxTokens: number;
  specMax?: number;
  stopIds?: readonly number[];
  contextIds?: readonly number[];
  /** Token healing: the first generated ids spell these bytes (UTF-8 of the text the
   * prompt was backed off by), chosen greedily among the tokens that fit them. */
  heal?: { bytes: Uint8Array; tokenizer: Tokenizer };
  /** Every generated id, in order; may call Session.stop(). Must not throw. */
  onTokens?: (ids: Int32Array) => void;
}

/**
 * One sequence of the engine. A call runs on a worker thread; one call at a time (the
 * scheduler guarantees it). After generate(), the sequence holds every generated token but
 * the last (k3_generate leaves it undecoded): sync() to the full token list before going
 * on.
 */
export class Session {
  constructor(
    private readonly native: NativeSession,
    readonly maxContext: number,
    /** What checkpoints may hold, bytes (undefined: the engine's default). */
    readonly checkpointLimit?: number,
  ) {}

  get busy(): boolean {
    return this.native.busy;
  }

  /** The sequence held now (not while busy). */
  tokens(): Int32Array {
    return this.native.tokens;
  }

  /** Makes the sequence exactly ids; returns how many tokens were not recomputed. */
  sync(ids: readonly number[] | Int32Array): Promise<{ reused: number; length: number }> {
    const a = ids instanceof Int32Array ? ids : Int32Array.from(ids);
    return engineCall(() => this.native.sync(a));
  }

  generate(options: GenerateOptions): Promise<GenerateStats> {
    const onTokens = options.onTokens ?? (() => undefined);
    return engineCall(() =>
      this.native.generate(
        {
          maxTokens: options.maxTokens,
          specMax: options.specMax ?? 0,
          stopIds: options.stopIds ?? [],
          contextIds: options.contextIds ?? [],
          heal: options.heal && options.heal.bytes.length > 0 ? { bytes: options.heal.bytes, tokenizer: options.heal.tokenizer.handle } : undefined,
        },
        (ids) => {
          try {
            onTokens(ids);
          } catch (e) {
            // A throwing callback would surface as an uncaught exception in the server.
            process.emitWarning(`k3: token callback threw: ${(e as Error).message}`);
          }
        },
      ),
    );
  }

  /** Remembers the state at the current length, so a later sync() to a longer or
   * different sequence with this prefix resumes here. */
  checkpoint(): Promise<void> {
    return engineCall(() => this.native.checkpoint());
  }

  saveState(path: string): Promise<{ length: number }> {
    return engineCall(() => this.native.saveState(path));
  }

  /** Replaces the sequence by a saved one; EngineError "state" when the file is not one
   * this model can use (the session is unchanged then). */
  loadState(path: string): Promise<{ length: number }> {
    return engineCall(() => this.native.loadState(path));
  }

  reset(): void {
    this.native.reset();
  }

  /** Generation ends after the token being produced. */
  stop(): void {
    this.native.stop();
  }

  /** The running call ends within one forward pass and rejects with "cancelled". Returns
   * the tokens the running generate() had emitted at that moment (0 for other calls); its
   * onTokens may not have seen them all yet. */
  cancel(): number {
    return this.native.cancel();
  }

  checkpointUsage(): { count: number; bytes: number } {
    return this.native.checkpointUsage();
  }

  close(): void {
    this.native.close();
  }
}
