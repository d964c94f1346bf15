// cache.ts - completions already computed, served again without the engine: an LRU keyed
// by everything the completion depends on (the prompt's stable part, the text after the
// cursor, the settings) plus the cursor's line prefix. A lookup also tries shorter line
// prefixes: when the user has typed the start of a cached completion since, the rest of it
// is the answer (zero-latency type-through). It holds strings only.

/** How far back (characters) a lookup searches for a completion typed into. */
export const TYPE_THROUGH_CHARS = 64;

export class CompletionCache {
  private readonly map = new Map<string, string>();

  constructor(readonly capacity = 256) {}

  private static key(base: string, linePrefix: string): string {
    return `${base}\u0000${linePrefix}`;
  }

  get size(): number {
    return this.map.size;
  }

  put(base: string, linePrefix: string, completion: string): void {
    const k = CompletionCache.key(base, linePrefix);
    this.map.delete(k);
    this.map.set(k, completion);
    while (this.map.size > this.capacity) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
    }
  }

  /** The completion for this line prefix: a cached one for it, or the rest of one cached
   * for a shorter prefix whose start the user has typed since. Undefined when none. */
  get(base: string, linePrefix: string): string | undefined {
    const max = Math.min(TYPE_THROUGH_CHARS, linePrefix.length);
    for (let back = 0; back <= max; back++) {
      const k = CompletionCache.key(base, linePrefix.slice(0, linePrefix.length - back));
      const c = this.map.get(k);
      if (c === undefined) continue;
      const typed = linePrefix.slice(linePrefix.length - back);
      if (c.startsWith(typed) && c.length > typed.length) {
        this.map.delete(k);
        this.map.set(k, c); // most recently used
        return c.slice(typed.length);
      }
    }
    return undefined;
  }

  clear(): void {
    this.map.clear();
  }
}
