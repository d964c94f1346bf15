// restart.ts - what to do when the language server dies: restart it after an ordinary
// crash, but never loop. After an out-of-memory or a missing model a restart would only
// fail again (and a reload of a large model costs minutes), so the user gets the action
// instead; after too many crashes in a short window, too. Pure: the error handler in
// client.ts asks it and acts.

/** Why the engine last failed, as far as the client knows. */
export type KnownFailure = 'out-of-memory' | 'model-missing' | undefined;

export type CrashDecision =
  | { restart: true }
  | { restart: false; reason: 'out-of-memory' | 'model-missing' | 'crash-loop' };

export class RestartPolicy {
  private crashes: number[] = [];

  /** At most `maxRestarts` restarts within `windowMs`. */
  constructor(
    private readonly maxRestarts = 3,
    private readonly windowMs = 3 * 60_000,
  ) {}

  onCrash(now: number, failure: KnownFailure): CrashDecision {
    if (failure) return { restart: false, reason: failure };
    this.crashes = this.crashes.filter((t) => now - t < this.windowMs);
    this.crashes.push(now);
    if (this.crashes.length > this.maxRestarts) return { restart: false, reason: 'crash-loop' };
    return { restart: true };
  }

  /** A deliberate restart (the user's command) starts counting afresh. */
  reset(): void {
    this.crashes = [];
  }
}
