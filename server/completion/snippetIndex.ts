// snippetIndex.ts - ranked snippets (snippets.ts) over the documents the server has open,
// cached: each document's windows per version, and the last answer, which is kept while the
// user types in one place. Like the ring (context.ts), the answer changes only at quiet
// moments: another target document, another document's new version, the cursor more than
// MOVE_LINES lines from where it was ranked, or REFRESH_IDLE_MS without a request. So Enter
// keeps the snippets, and the checkpoint after the previous prompt still extends to the new
// one. Definitions the editor found (k3/context/definitions) come first, before the ranked
// windows, within the same budget, and are taken at the same quiet moments. It reads
// documents; ranking and budgets are snippets.ts's.
import { REFRESH_IDLE_MS } from './context';
import type { ContextChunk } from './layout';
import { fitSnippets, QUERY_LINES, queryOf, rankSnippets, type SnippetSource, type Window, windowsOf } from './snippets';

/** A cursor this many lines from where the snippets were ranked ranks them again. */
export const MOVE_LINES = QUERY_LINES / 2;

export interface IndexedDocument {
  uri: string;
  languageId: string;
  version: number;
  getText(): string;
}

export interface SnippetRequest {
  target: string;
  /** The cursor's line (0-based). */
  line: number;
  /** The target document's text above the cursor's line. */
  textAbove: string;
  budget: number;
  tokens(text: string): number;
  now: number;
  /** Definitions of the identifiers near the cursor, from the editor (best first). */
  definitions?: readonly ContextChunk[];
}

export class SnippetIndex {
  private readonly windows = new Map<string, { version: number; windows: Window[] }>();
  private last: { target: string; line: number; at: number; versions: string; budget: number; chunks: ContextChunk[] } | undefined;

  constructor(
    private readonly documents: () => readonly IndexedDocument[],
    private readonly displayPath: (uri: string) => string,
  ) {}

  /** The snippets of the other open documents for a completion, within `budget` tokens. */
  snippets(req: SnippetRequest): ContextChunk[] {
    if (req.budget <= 0) return [];
    const others = this.documents().filter((d) => d.uri !== req.target);
    const versions = JSON.stringify(others.map((d) => [d.uri, d.version]));
    const last = this.last;
    if (
      last &&
      last.target === req.target &&
      last.versions === versions &&
      last.budget === req.budget &&
      Math.abs(req.line - last.line) < MOVE_LINES &&
      req.now - last.at < REFRESH_IDLE_MS
    ) {
      last.at = req.now;
      return last.chunks;
    }
    for (const uri of this.windows.keys()) if (!others.some((d) => d.uri === uri)) this.windows.delete(uri);
    const sources: SnippetSource[] = others.map((d) => ({ uri: d.uri, path: this.displayPath(d.uri), languageId: d.languageId, windows: this.windowsOf(d) }));
    const defs = (req.definitions ?? []).map((chunk) => ({ chunk, score: Number.POSITIVE_INFINITY }));
    const chunks = fitSnippets([...defs, ...rankSnippets(queryOf(req.textAbove), sources)], req.budget, req.tokens);
    this.last = { target: req.target, line: req.line, at: req.now, versions, budget: req.budget, chunks };
    return chunks;
  }

  private windowsOf(d: IndexedDocument): Window[] {
    const had = this.windows.get(d.uri);
    if (had?.version === d.version) return had.windows;
    const windows = windowsOf(d.getText());
    this.windows.set(d.uri, { version: d.version, windows });
    return windows;
  }
}
