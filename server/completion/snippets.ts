// snippets.ts - the code the cursor uses, found in the other open documents: sliding windows
// of their lines ranked by how many identifiers they share with the lines above the cursor
// (Jaccard over identifier sets, as Copilot's neighbouring-tab snippets), the best window of
// each document, the best documents first, within a token budget. Pure: it reads texts and
// counts tokens with the function it is given; it does not encode prompts or run anything.
// The query is the lines above the cursor's line, never the line itself, so typing on a line
// leaves the snippets, and the prompt part they make, as they were (docs/PROMPTS.md).
import type { ContextChunk } from './layout';
import { chunkText, splitLines } from './layout';

/** Lines per window (Copilot's neighbouring-tab snippets use about 20). */
export const WINDOW_LINES = 20;
/** Windows start every this many lines. */
export const WINDOW_STEP = 10;
/** Lines above the cursor's line that make the query. */
export const QUERY_LINES = 20;
/** Windows sharing less than this (Jaccard) with the query are not worth their tokens. */
export const MIN_SCORE = 0.05;

/** Words every program has: sharing them says nothing about what the cursor uses. */
const COMMON = new Set([
  'if', 'else', 'elif', 'for', 'while', 'do', 'return', 'break', 'continue', 'switch', 'case', 'default',
  'const', 'let', 'var', 'function', 'def', 'class', 'new', 'this', 'self', 'import', 'from', 'export',
  'as', 'in', 'of', 'is', 'not', 'and', 'or', 'true', 'false', 'null', 'undefined', 'None', 'True', 'False',
  'async', 'await', 'try', 'catch', 'except', 'finally', 'throw', 'raise', 'with', 'pass', 'yield', 'lambda',
  'type', 'interface', 'public', 'private', 'protected', 'static', 'void', 'int', 'string', 'number',
  'boolean', 'fn', 'pub', 'mut', 'func', 'package', 'struct', 'go', 'nil', 'err', 'the', 'a', 'to',
]);

/** The identifiers of a text, less the words every program has. */
export function identifiers(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/[A-Za-z_$][A-Za-z0-9_$]*/g)) if (!COMMON.has(m[0])) out.add(m[0]);
  return out;
}

/** |A∩B| / |A∪B|; 0 when both are empty (nothing shared is no evidence). */
export function jaccardSets(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 0;
  let both = 0;
  for (const x of a.size <= b.size ? a : b) if ((a.size <= b.size ? b : a).has(x)) both++;
  return both / (a.size + b.size - both);
}

/** A window of a document's lines and its identifiers. */
export interface Window {
  start: number;
  text: string;
  ids: Set<string>;
}

/** Windows of WINDOW_LINES lines every WINDOW_STEP lines (the last one ends at the last line);
 * windows without an identifier are left out. */
export function windowsOf(text: string): Window[] {
  const lines = splitLines(text);
  const out: Window[] = [];
  const last = Math.max(0, lines.length - WINDOW_LINES);
  for (let start = 0; ; start = Math.min(last, start + WINDOW_STEP)) {
    const body = lines.slice(start, start + WINDOW_LINES).join('\n');
    const ids = identifiers(body);
    if (ids.size > 0) out.push({ start, text: body, ids });
    if (start === last) break;
  }
  return out;
}

/** The query of a completion: the identifiers of the QUERY_LINES lines above the cursor's line. */
export function queryOf(textAbove: string): Set<string> {
  // textAbove ends with the line break of the line above the cursor's: no line after it.
  const lines = splitLines(textAbove.replace(/\r?\n$/, ''));
  return identifiers(lines.slice(Math.max(0, lines.length - QUERY_LINES)).join('\n'));
}

/** A document that may give a snippet. */
export interface SnippetSource {
  uri: string;
  path: string;
  languageId: string;
  windows: readonly Window[];
}

export interface RankedSnippet {
  chunk: ContextChunk;
  score: number;
}

/** Each source's best window (the earliest on ties), those at MIN_SCORE or above, best first
 * (ties by path, so the order depends on the texts alone). */
export function rankSnippets(query: ReadonlySet<string>, sources: readonly SnippetSource[]): RankedSnippet[] {
  const out: RankedSnippet[] = [];
  for (const s of sources) {
    let best: Window | undefined;
    let bestScore = 0;
    for (const w of s.windows) {
      const score = jaccardSets(query, w.ids);
      if (score > bestScore) {
        best = w;
        bestScore = score;
      }
    }
    if (best && bestScore >= MIN_SCORE) {
      out.push({ score: bestScore, chunk: { key: `snippet:${s.uri}#${best.start}`, path: s.path, languageId: s.languageId, text: best.text } });
    }
  }
  return out.sort((a, b) => b.score - a.score || a.chunk.path.localeCompare(b.chunk.path));
}

/**
 * The snippets that fit `budget` tokens (each counted as its prompt text, chunkText), taken
 * best first, a snippet that does not fit skipped for a smaller one after it; returned in
 * the prompt's order: by path, then line, so the same set is always the same text and its
 * checkpoint survives a change of scores.
 */
export function fitSnippets(ranked: readonly RankedSnippet[], budget: number, tokens: (text: string) => number): ContextChunk[] {
  const kept: ContextChunk[] = [];
  let used = 0;
  for (const r of ranked) {
    const n = tokens(chunkText(r.chunk));
    if (used + n > budget) continue;
    kept.push(r.chunk);
    used += n;
  }
  return kept.sort((a, b) => a.path.localeCompare(b.path) || a.key.localeCompare(b.key));
}
