// addon.ts - finds and loads the native engine addon (k3.node). The server bundle lives in
// dist/ beside dist/k3.node, so that is the default; K3_ADDON overrides it (tests, tools).
// This is the only file that calls require() on the addon: everything else imports the
// typed facades in this folder.
import * as path from 'node:path';

/** A loaded checkpoint (native/addon/engine.cc). */
export interface NativeModel {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly layerCount: number;
  /** undefined while the model is still the one loaded; else the Error its next pass throws
   * (code "io", naming the shard that changed on disk: k3_model_check). */
  check(): Error | undefined;
  close(): void;
}

export interface NativeContextOptions {
  /** Positions the sequence may reach (sizes the MLA cache). */
  maxContext?: number;
  /** Worker threads; any count gives the same bits. */
  threads?: number;
  /** Tokens per forward pass when decoding many. */
  batch?: number;
}

export interface NativeDecodeResult {
  /** (nLogits, vocab): logits of the last nLogits positions of the call. */
  logits: Float32Array;
  /** The greedy next token after every position, when asked for. */
  argmax?: Int32Array;
}

/** One sequence's decode state. Synchronous: each call blocks until the engine returns. */
export interface NativeContext {
  readonly length: number;
  readonly tokens: Int32Array;
  decode(ids: Int32Array, nLogits?: number, argmax?: boolean): NativeDecodeResult;
  /** Makes the sequence exactly ids, resuming from held state; returns the tokens not recomputed. */
  sync(ids: Int32Array): number;
  /** Remembers the state at the current length for later sync() calls. */
  checkpoint(): void;
  reset(): void;
  close(): void;
}

/** A model open running on a worker thread (native/addon/session.cc). */
export interface NativeModelOpen {
  promise: Promise<NativeModel>;
  /** The open stops at its next progress report (or is discarded when it returns) and the
   * promise rejects with code "cancelled". */
  cancel(): void;
}

export interface NativeOpenProgress {
  /** The engine's phase name ("trunk": reading the pinned trunk layers). */
  phase: string;
  bytesDone: number;
  bytesTotal: number;
}

export interface NativeOpenOptions {
  /** A preset name from presets(), "auto" (sized for this machine), or "mapped"/absent. */
  preset?: string;
  /** Called on the JS thread with the latest report; may still come after the promise settles. */
  onProgress?: (p: NativeOpenProgress) => void;
}

/** What a context needs on a model, in bytes (k3_model_plan). */
export interface NativePlan {
  recurrentState: number;
  kvCache: number;
  buffers: number;
  contextTotal: number;
  modelTotal: number;
  total: number;
  /** MemAvailable when planned; 0: unknown. */
  available: number;
  fits: boolean;
}

/** One row of the engine's preset table (k3_preset). */
/** Time to first token of a prompt of `tokens` tokens (k3_prefill_forecast): prefilled in
 * `passes` passes of `batch`, the batch the plan allows on this machine. */
export interface FirstTokenForecast {
  tokens: number;
  seconds: number;
  batch: number;
  passes: number;
}

/** How the engine's forecasts did on the machine their profile describes (k3_forecast's check). */
export interface ForecastCheck {
  configurations: number;
  within: number;
  worst: number;
}

export interface NativePreset {
  name: string;
  trunkBytes: number;
  expertCacheBytes: number;
  fullScalePeakRss: number;
  fullScalePlan: number;
  note: string;
}

export interface NativeGenerateOptions {
  maxTokens?: number;
  /** 0: plain greedy; 1..16: draft up to this many tokens per forward pass. */
  specMax?: number;
  stopIds?: Int32Array | readonly number[];
  /** Drafting material (tokens of the suffix, other files, earlier output). */
  contextIds?: Int32Array | readonly number[];
  /** Token healing (k3.h): the first generated tokens spell `bytes`; `tokenizer` is the
   * model's NativeTokenizer, held (read only) while the call runs. */
  heal?: { bytes: Uint8Array; tokenizer: object };
}

export interface NativeGenerateStats {
  emitted: number;
  forwardPasses: number;
  rounds: number;
  drafted: number;
  accepted: number;
  /** Tokens emitted while the heal constraint was active. */
  healed: number;
  stopReason: 'length' | 'token' | 'callback';
}

/** One sequence whose long calls run on worker threads (native/addon/session.cc). At most
 * one call at a time: another while `busy` throws. Failures reject with Errors carrying
 * `code` and `status`; a cancelled generate's error also carries `stats`. */
export interface NativeSession {
  readonly busy: boolean;
  /** Throw while busy. */
  readonly length: number;
  readonly tokens: Int32Array;
  sync(ids: Int32Array): Promise<{ reused: number; length: number }>;
  /** onTokens receives every generated id, in order, in batches, before the promise settles. */
  generate(options: NativeGenerateOptions, onTokens: (ids: Int32Array) => void): Promise<NativeGenerateStats>;
  checkpoint(): Promise<void>;
  saveState(path: string): Promise<{ length: number }>;
  loadState(path: string): Promise<{ length: number }>;
  reset(): void;
  /** Generation ends after the token being produced (the promise resolves). */
  stop(): void;
  /** The running call stops within one forward pass (the promise rejects, code "cancelled").
   * Returns the tokens the running generation had emitted when asked (0 for other calls). */
  cancel(): number;
  setCheckpointLimit(bytes: number): void;
  checkpointUsage(): { count: number; bytes: number };
  close(): void;
}

/** What the addon exports, as the C++ side in native/addon/*.cc registers it. Engine
 * failures are thrown as Errors with `code` (the k3 status name) and `status` set. */
export interface NativeAddon {
  version(): string;
  Model: new (dir: string) => NativeModel;
  Context: new (model: NativeModel, options?: NativeContextOptions) => NativeContext;
  openModel(dir: string, options?: NativeOpenOptions): NativeModelOpen;
  presets(): NativePreset[];
  /** Forecast seconds per token of the full release with each preset's budgets on this
   * machine, by preset name, from its measured profile (`npm run bench -- scale`); empty
   * when none exists. Reads the profile: for listing, not for every status. */
  presetForecasts(): Record<string, number>;
  /** How those forecasts did where the profile was measured: forecast against measured on
   * `configurations` configurations of the slice, `within` of them within 15 %, the
   * largest miss `worst` (a fraction); null without a profile or a recorded check. */
  forecastCheck(): ForecastCheck | null;
  /** Time to first token of the full release per preset on this machine, for a 512- and a
   * 2,048-token prompt; empty without a machine profile. */
  presetFirstTokens(): Record<string, FirstTokenForecast[]>;
  modelPlan(model: NativeModel, options?: { maxContext?: number; batch?: number }): NativePlan;
  Session: new (model: NativeModel, options?: NativeContextOptions) => NativeSession;
}

let loaded: NativeAddon | undefined;

export function addonPath(): string {
  return process.env.K3_ADDON ?? path.join(__dirname, 'k3.node');
}

export function loadAddon(): NativeAddon {
  if (!loaded) {
    const file = addonPath();
    try {
      // A real require at run time; esbuild must not try to bundle the binary.
      loaded = (module.require as (id: string) => unknown)(file) as NativeAddon;
    } catch (e) {
      throw new Error(`cannot load the K3 engine addon from ${file}: ${(e as Error).message}`);
    }
  }
  return loaded;
}
