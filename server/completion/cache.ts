// cache.ts - completions already computed, served again without the engine: an LRU keyed
// by what the completion depends on besides the text before the cursor (the model, the
// extra context, the text after the cursor, the settings), each entry remembering the text
// before the cursor it was computed for (its length and digest). A lookup also finds an
// entry computed further back in the same text: when everything typed since the entry's
// cursor is the start of its completion, the rest of it is the answer (zero-latency
// type-through). That covers typing a suggestion's first characters and accepting it a line
// at a time (Ctrl+Down), where the text after the cursor stays the same. It holds strings
// and digests only.
import * as crypto from 'node:crypto';

interface Entry {
  /** Length of the text before the cursor the completion was computed for. */
  beforeLength: number;
  /** Its digest. */
  beforeDigest: string;
  completion: string;
}

function digest(text: string): string {
  return crypto.createHash('sha1').update(text).digest('hex');
}

export class CompletionCache {
  /** key -> entry, in least-recently-used order. */
  private readonly map = new Map<string, Entry>();
  /** base -> keys of its entries. */
  private readonly byBase = new Map<string, Set<string>>();

  constructor(readonly capacity = 256) {}

  get size(): number {
    return this.map.size;
  }

  /** Remembers `completion` for the text `before` the cursor under `base`. */
  put(base: string, before: string, completion: string): void {
    const beforeDigest = digest(before);
    const key = `${base}\u0000${before.length}\u0000${beforeDigest}`;
    this.map.delete(key);
    this.map.set(key, { beforeLength: before.length, beforeDigest, completion });
    let keys = this.byBase.get(base);
    if (!keys) this.byBase.set(base, (keys = new Set()));
    keys.add(key);
    while (this.map.size > this.capacity) this.evict(this.map.keys().next().value as string);
  }

  /** The completion for the text `before` the cursor: a cached one for it, or the rest of
   * one cached for an earlier cursor in the same text whose start the user has typed (or
   * accepted) since. Undefined when none. */
  get(base: string, before: string): string | undefined {
    const keys = this.byBase.get(base);
    if (!keys) return undefined;
    // The entry nearest the cursor first: its completion saw the most of what is there now.
    const entries = [...keys].map((k) => [k, this.map.get(k)!] as const).sort((a, b) => b[1].beforeLength - a[1].beforeLength);
    for (const [key, e] of entries) {
      const typed = before.length - e.beforeLength;
      if (typed < 0 || typed >= e.completion.length) continue;
      if (!e.completion.startsWith(before.slice(e.beforeLength))) continue;
      if (digest(before.slice(0, e.beforeLength)) !== e.beforeDigest) continue;
      this.map.delete(key);
      this.map.set(key, e); // most recently used
      return e.completion.slice(typed);
    }
    return undefined;
  }

  clear(): void {
    this.map.clear();
    this.byBase.clear();
  }

  private evict(key: string): void {
    this.map.delete(key);
    const base = key.slice(0, key.indexOf('\u0000'));
    const keys = this.byBase.get(base);
    keys?.delete(key);
    if (keys?.size === 0) this.byBase.delete(base);
  }
}
