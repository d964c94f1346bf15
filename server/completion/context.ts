// context.ts - extra context for completions: chunks of the other open documents (their
// top, or the region around their most recent edit), kept in a ring, oldest first. The
// ring changes only at quiet moments (the first completion, a completion in another
// document, or after REFRESH_IDLE_MS without completions), never between two keystrokes
// in one document, so the prompt's first part and its checkpoint stay valid while the user
// types. It reads documents; it does not encode or run anything.
import * as path from 'node:path';
import type { ContextChunk } from './layout';
import { splitLines } from './layout';

/** Lines per chunk. */
export const CHUNK_LINES = 32;
/** Chunks kept. */
export const MAX_CHUNKS = 8;
/** Idle time after which the ring takes in what changed. */
export const REFRESH_IDLE_MS = 3000;

export interface ContextDocument {
  uri: string;
  languageId: string;
  getText(): string;
}

/** Line-set similarity of two texts (|A∩B| / |A∪B| over trimmed non-blank lines). */
export function jaccard(a: string, b: string): number {
  const sa = new Set(splitLines(a).map((l) => l.trim()).filter(Boolean));
  const sb = new Set(splitLines(b).map((l) => l.trim()).filter(Boolean));
  if (sa.size === 0 && sb.size === 0) return 1;
  let both = 0;
  for (const l of sa) if (sb.has(l)) both++;
  return both / (sa.size + sb.size - both);
}

export class ContextRing {
  private ring: ContextChunk[] = [];
  /** Documents opened or edited since the ring last took them in, with the edited line. */
  private readonly touched = new Map<string, number | undefined>();
  private lastTarget: string | undefined;
  private lastRequest = 0;
  private built = false;
  private version = 0;

  constructor(
    private readonly documents: (uri: string) => ContextDocument | undefined,
    private readonly roots: () => string[],
  ) {}

  /** A document was opened. */
  opened(uri: string): void {
    if (!this.touched.has(uri)) this.touched.set(uri, undefined);
  }

  /** A document was edited at `line`. */
  edited(uri: string, line: number): void {
    this.touched.set(uri, line);
  }

  closed(uri: string): void {
    this.touched.delete(uri);
  }

  /** Identifies the ring's content (changes whenever the chunks do). */
  get id(): number {
    return this.version;
  }

  /** The chunks for a completion in `target`, taking in changes first if it is a quiet moment. */
  snapshot(target: string, now: number): ContextChunk[] {
    const quiet = !this.built || target !== this.lastTarget || now - this.lastRequest >= REFRESH_IDLE_MS;
    this.lastRequest = now;
    this.lastTarget = target;
    if (quiet) this.refresh(target);
    return this.ring.filter((c) => !c.key.startsWith(`${target}#`));
  }

  private refresh(target: string): void {
    this.built = true;
    let changed = false;
    for (const [uri, line] of this.touched) {
      if (uri === target) continue;
      this.touched.delete(uri);
      const doc = this.documents(uri);
      if (!doc) continue;
      const chunk = this.chunkOf(doc, line);
      if (!chunk || chunk.text.trim() === '') continue;
      // A chunk of the same document, or nearly the same lines, is replaced.
      if (this.ring.some((c) => c.key === chunk.key && c.text === chunk.text)) continue;
      this.ring = this.ring.filter((c) => !c.key.startsWith(`${uri}#`) && jaccard(c.text, chunk.text) <= 0.9);
      this.ring.push(chunk);
      changed = true;
    }
    if (this.ring.length > MAX_CHUNKS) {
      // Evict half at once: every eviction invalidates the checkpoint after it.
      this.ring = this.ring.slice(this.ring.length - Math.ceil(MAX_CHUNKS / 2));
      changed = true;
    }
    if (changed) this.version++;
  }

  private chunkOf(doc: ContextDocument, line: number | undefined): ContextChunk | undefined {
    const lines = splitLines(doc.getText());
    let start = 0;
    if (line !== undefined) start = Math.max(0, Math.min(lines.length - CHUNK_LINES, line - CHUNK_LINES / 2));
    const text = lines.slice(start, start + CHUNK_LINES).join('\n');
    return { key: `${doc.uri}#${start}`, path: this.displayPath(doc.uri), languageId: doc.languageId, text };
  }

  /** Workspace-relative path of a URI, else its file name. */
  displayPath(uri: string): string {
    let p = uri;
    try {
      const u = new URL(uri);
      p = u.protocol === 'file:' ? decodeURIComponent(u.pathname) : `${u.pathname}`;
    } catch {
      return uri;
    }
    for (const root of this.roots()) {
      const rel = path.posix.relative(root, p);
      if (rel && !rel.startsWith('..') && !path.posix.isAbsolute(rel)) return rel;
    }
    return path.posix.basename(p);
  }
}
