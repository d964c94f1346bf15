// debounce.ts - when to ask the engine for a completion: an adaptive debounce that follows
// the user's typing rhythm, a cancellable wait, a "latest request wins" gate, and a tracker
// that tells typing apart from cursor moves. Pure logic with injected time, so unit tests
// drive it; it knows nothing of LSP or the engine.

/** The part of a cancellation token this needs (vscode.CancellationToken fits). */
export interface CancelToken {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

export interface DebounceOptions {
  /** Shortest wait, ms. */
  min: number;
  /** Longest wait, ms. */
  max: number;
  /** Wait = factor x the average gap between recent keystrokes. */
  factor: number;
  /** How many recent gaps the average covers. */
  samples: number;
  /** Gaps longer than this are pauses, not rhythm, and are not counted. */
  pauseMs: number;
  /** Wait used until enough gaps are known. */
  initial: number;
}

export const DEFAULT_DEBOUNCE: DebounceOptions = { min: 250, max: 1500, factor: 2.5, samples: 20, pauseMs: 2000, initial: 500 };

/**
 * Adaptive debounce (Tabby's idea): a fast typist gets a short wait, a slow one a longer
 * wait, so a request starts when the user pauses rather than between two keystrokes. With
 * an engine that needs seconds, every request started mid-word is work thrown away.
 */
export class AdaptiveDebounce {
  private readonly gaps: number[] = [];
  private last: number | undefined;

  constructor(private readonly options: DebounceOptions = DEFAULT_DEBOUNCE) {}

  /** Records a keystroke at time `now` (ms). */
  keystroke(now: number): void {
    if (this.last !== undefined) {
      const gap = now - this.last;
      if (gap >= 0 && gap <= this.options.pauseMs) {
        this.gaps.push(gap);
        if (this.gaps.length > this.options.samples) this.gaps.shift();
      }
    }
    this.last = now;
  }

  /** The wait before the next request, ms; `fixed` (a setting) overrides the adaptive value. */
  delay(fixed: number | null = null): number {
    if (fixed !== null) return fixed;
    const { min, max, factor, initial } = this.options;
    if (this.gaps.length < 3) return initial;
    const mean = this.gaps.reduce((a, b) => a + b, 0) / this.gaps.length;
    return Math.round(Math.min(max, Math.max(min, mean * factor)));
  }
}

/**
 * Waits `ms`, or less if `token` is cancelled first. Resolves true when the full wait
 * passed, false when cancelled (never rejects).
 */
export function cancellableWait(
  ms: number,
  token: CancelToken,
  timers: { set(fn: () => void, ms: number): unknown; clear(handle: unknown): void } = {
    set: (fn, t) => setTimeout(fn, t),
    clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
  },
): Promise<boolean> {
  if (token.isCancellationRequested) return Promise.resolve(false);
  return new Promise((resolve) => {
    const sub = token.onCancellationRequested(() => {
      timers.clear(handle);
      sub.dispose();
      resolve(false);
    });
    const handle = timers.set(() => {
      sub.dispose();
      resolve(true);
    }, ms);
  });
}

/** A token source whose token is also cancelled when any of `parents` is. */
export class LinkedCancellation {
  private cancelled = false;
  private readonly listeners = new Set<() => void>();
  private readonly subscriptions: { dispose(): void }[] = [];
  readonly token: CancelToken;

  constructor(parents: CancelToken[] = []) {
    const self = this;
    this.token = {
      get isCancellationRequested() {
        return self.cancelled;
      },
      onCancellationRequested(listener: () => void) {
        if (self.cancelled) {
          listener();
          return { dispose() {} };
        }
        self.listeners.add(listener);
        return { dispose: () => self.listeners.delete(listener) };
      },
    };
    for (const p of parents) {
      if (p.isCancellationRequested) this.cancel();
      else this.subscriptions.push(p.onCancellationRequested(() => this.cancel()));
    }
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    for (const l of [...this.listeners]) l();
    this.listeners.clear();
    this.dispose();
  }

  dispose(): void {
    for (const s of this.subscriptions.splice(0)) s.dispose();
  }
}

/**
 * Cancel-previous: each `begin()` cancels the request begun before it, so at most one
 * completion is in flight and the engine never works on a stale prefix.
 */
export class LatestOnly {
  private current: LinkedCancellation | undefined;

  begin(parent: CancelToken): LinkedCancellation {
    this.current?.cancel();
    const next = new LinkedCancellation([parent]);
    this.current = next;
    return next;
  }

  /** Ends `c` if it is still the latest (its token stays as it is). */
  end(c: LinkedCancellation): void {
    c.dispose();
    if (this.current === c) this.current = undefined;
  }

  cancelAll(): void {
    this.current?.cancel();
    this.current = undefined;
  }
}

export interface Pos {
  line: number;
  character: number;
}

/** One text edit as VS Code reports it: the replaced range's start and the inserted text. */
export interface EditInfo {
  start: Pos;
  text: string;
}

/** Where the cursor is after inserting `text` at `start`. */
export function endOfInsert(start: Pos, text: string): Pos {
  const lines = text.split('\n');
  if (lines.length === 1) return { line: start.line, character: start.character + text.length };
  return { line: start.line + lines.length - 1, character: lines[lines.length - 1].length };
}

/**
 * Tells typing from cursor moves: an automatic request is wanted only at the spot the user
 * just typed at, in the document version that typing produced. Moving the cursor, undo,
 * multi-cursor edits and edits by other extensions do not count as typing.
 */
export class TypingTracker {
  private readonly last = new Map<string, { version: number; from: Pos; to: Pos }>();

  /** Records a change of `uri` to `version`; `edits` empty or several, or `typed` false, clears. */
  change(uri: string, version: number, edits: EditInfo[], typed: boolean): void {
    if (!typed || edits.length !== 1) {
      this.last.delete(uri);
      return;
    }
    this.last.set(uri, { version, from: edits[0].start, to: endOfInsert(edits[0].start, edits[0].text) });
  }

  forget(uri: string): void {
    this.last.delete(uri);
  }

  /**
   * True when `version` of `uri` came from typing and `pos` lies within the text it
   * inserted (an auto-closed bracket leaves the cursor inside the inserted pair).
   */
  isTypingAt(uri: string, version: number, pos: Pos): boolean {
    const t = this.last.get(uri);
    return t !== undefined && t.version === version && !before(pos, t.from) && !before(t.to, pos);
  }
}

function before(a: Pos, b: Pos): boolean {
  return a.line < b.line || (a.line === b.line && a.character < b.character);
}
