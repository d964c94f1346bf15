// definitions.ts - the definitions of the identifiers near the cursor, as the editor's own
// language features give them (vscode.executeDefinitionProvider, then
// executeTypeDefinitionProvider when that finds nothing), sent to the server as
// k3/context/definitions before a completion request, which lays them out with its snippets
// (docs/PROMPTS.md, "Snippets the cursor uses"). It asks through the functions it is given, so
// it is tested without VS Code; the wiring to `vscode` is in ctx.ts. Gathered once per
// document version and line; a request cancelled meanwhile sends nothing; a language without
// a language server finds nothing and sends nothing (the server's ring and snippets remain).
import type { ContextDefinitionsParams, ContextDefinition } from '../protocol/lsp';

/** Longest the completion request waits for the gathering (ctx.ts); what comes later is
 * still sent, for the next request. */
export const GATHER_WAIT_MS = 150;
/** Identifiers looked up, nearest the cursor first. */
export const MAX_LOOKUPS = 6;
/** Definitions sent. */
export const MAX_DEFINITIONS = 4;
/** Lines of a definition sent: its first line and those after it (the signature and the start
 * of its body). */
export const DEFINITION_LINES = 12;

/** A position in a document (vscode.Position's shape). */
export interface Spot {
  line: number;
  character: number;
}

/** What is asked of the editor. */
export interface DefinitionSource {
  /** Where the symbol at `at` in `uri` is defined (definition provider, then type definition). */
  locate(uri: string, at: Spot): Promise<Array<{ uri: string; line: number }>>;
  /** The lines and language of a document (opening it when needed), or undefined. */
  read(uri: string): Promise<{ languageId: string; lines: readonly string[] } | undefined>;
}

/** The document a completion is asked in (vscode.TextDocument's shape, the part used). */
export interface AskedDocument {
  uri: string;
  version: number;
  lineAt(line: number): string;
}

/** The identifiers of the cursor's line up to the cursor and of the line above, nearest the
 * cursor first, each once, at most MAX_LOOKUPS, with a position inside each. */
export function identifiersNear(doc: AskedDocument, at: Spot): Spot[] {
  const found: Array<{ name: string; spot: Spot }> = [];
  const scan = (line: number, text: string): void => {
    for (const m of text.matchAll(/[A-Za-z_$][A-Za-z0-9_$]*/g)) {
      if (m[0].length >= 3) found.push({ name: m[0], spot: { line, character: (m.index ?? 0) + 1 } });
    }
  };
  if (at.line > 0) scan(at.line - 1, doc.lineAt(at.line - 1));
  // The word being typed at the cursor has no definition yet: only the complete ones before it.
  scan(at.line, doc.lineAt(at.line).slice(0, at.character).replace(/[A-Za-z0-9_$]+$/, ''));
  const seen = new Set<string>();
  const out: Spot[] = [];
  for (const f of found.reverse()) {
    if (seen.has(f.name)) continue;
    seen.add(f.name);
    out.push(f.spot);
    if (out.length === MAX_LOOKUPS) break;
  }
  return out;
}

export class DefinitionGatherer {
  private last: string | undefined;
  private lastSent: string | undefined;

  constructor(
    private readonly source: DefinitionSource,
    private readonly send: (params: ContextDefinitionsParams) => void,
  ) {}

  /** Gathers the definitions near `at` and sends them when they changed. Resolves when done;
   * `cancelled()` true at any step stops it without sending. */
  async gather(doc: AskedDocument, at: Spot, cancelled: () => boolean): Promise<void> {
    const key = `${doc.uri}@${doc.version}:${at.line}`;
    if (key === this.last) return;
    const definitions: ContextDefinition[] = [];
    const seen = new Set<string>();
    // All lookups at once (a language server answers them in parallel), read in order.
    const found = await Promise.all(identifiersNear(doc, at).map((spot) => this.source.locate(doc.uri, spot).catch(() => [])));
    if (cancelled()) return;
    for (const places of found) {
      for (const p of places) {
        const id = `${p.uri}#${p.line}`;
        if (p.uri === doc.uri || seen.has(id) || definitions.length >= MAX_DEFINITIONS) continue;
        seen.add(id);
        const target = await this.source.read(p.uri);
        if (cancelled()) return;
        if (!target) continue;
        const text = target.lines.slice(p.line, p.line + DEFINITION_LINES).join('\n');
        if (text.trim()) definitions.push({ uri: p.uri, languageId: target.languageId, line: p.line, text });
      }
    }
    this.last = key;
    const sent = JSON.stringify([doc.uri, definitions]);
    if (definitions.length === 0 || sent === this.lastSent) return;
    this.lastSent = sent;
    this.send({ uri: doc.uri, version: doc.version, definitions });
  }
}

/** Resolves when `work` does or after `ms`, whichever is first (work goes on; its failure is
 * dropped: the server keeps its own context). */
export function waitAtMost(work: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    work.catch(() => undefined).finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
