// quality.ts - ghost-text quality through the language server, as the editor asks for it
// (`npm run bench -- quality`): code the default model never trained on, cut where a
// developer's cursor stands, completed by the bundled server (dist/server.js) over LSP,
// compared with the real line. Cases:
//   - sets: the held-out packages of k3-mini's corpus (training/heldout.json, when fetched;
//     else v1's held-out split), the project's own sources (never in the corpus), and
//     repository cases (held-out files that import other files of their package, which are
//     opened first, as a developer's tabs: repo-cases.ts), one-line and block cases;
//   - cursors: after the line's indentation, inside the line's first identifier, right
//     after its first `.` or `(`, and anywhere in the line (mid-line, as training/evaluate.py
//     cuts); the rest of that line is removed (what the developer is about to type) and the
//     rest of the file stays after it.
// Configurations run side by side in one run, one server each: `plain` (no token
// healing, no junk filter, no FIM: the pipeline before them), `healed` (healing only),
// `nofim` (healing and the filter), `nosnippets` (all but the snippets of other open
// documents and the definitions), `nodefs` (all but the definitions) and `default` (and FIM,
// for a model that has it, and the definitions of the names near the cursor, found in the
// files the document imports by symbol-index.ts, the bench's stand-in for the editor's
// language features, gathered and sent by the extension's own DefinitionGatherer before each
// request). Every case is asked of each configuration in turn, so a change of the machine's
// load weighs on all alike. Per set and configuration: exact-line matches, mean
// edit similarity, empty answers, answers starting with whitespace the real line does not
// start with, repetition loops and lines over 160 characters shown, what the filter did,
// p50/p90 latency, snippets and definitions carried and the time to find them; with
// --typing, the latency of a keystroke's request (below); for block cases, blocks
// accepted (the suggestion is the real body) and the characters a user would not type; the
// machine's load before and after. Writes out/bench/quality.json.
//   --model DIR   another model folder (default: the embedded k3-mini)
//   --cases N     cases per set and cursor kind (default 40)
//   --configs a,b which configurations (default plain,healed,default; also nofim, nosnippets,
//                 nodefs)
//   --sets a,b    which sets (default held-out,project,repo)
//   --max-prompt N  completions.maxPromptTokens (default: the server's, 2048)
//   --snippet-tokens N  completions.snippetTokens where a configuration has snippets
//                   (default: the server's)
//   --typing N    also ask as a typing user does: the document opened with the cursor's line
//                 cut N characters earlier (1 or 2), asked once (warm, not scored), then those
//                 characters typed as an incremental change and asked again; that request's
//                 latency is the typing latency, reported beside the cold one (default 0: cold
//                 only)
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DidCloseTextDocumentNotification } from 'vscode-languageserver-protocol/node';
import { DefinitionGatherer } from '../../extension/definitions';
import { loopStart } from '../../server/completion/filters';
import { ContextDefinitionsNotification, type StatusResult, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, waitReady } from '../../test/support/lsp';
import { repoRoot } from '../../test/support/paths';
import { rng } from '../../test/tokenizer/corpus';
import { blockAt, charactersSaved, importsOf, type PackageFile } from './lib/repo-cases';
import { type IndexedDocument, symbolIndex } from './lib/symbol-index';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

const MODEL = path.resolve(option('model', path.join(repoRoot, 'media/models/k3-mini')));
const CASES = Number(option('cases', '40'));
const MAX_PROMPT = Number(option('max-prompt', '0')); // 0: the server's default
const SNIPPET_TOKENS = Number(option('snippet-tokens', '0')); // 0: the server's default
const TYPING = Number(option('typing', '0'));
/** The server's completion settings, and whether the bench gathers and sends definitions. */
const CONFIGS: Record<string, { definitions: boolean; completions: { heal: boolean; filter: boolean; fim: boolean; snippetTokens?: number } }> = {
  plain: { definitions: false, completions: { heal: false, filter: false, fim: false, snippetTokens: 0 } },
  healed: { definitions: false, completions: { heal: true, filter: false, fim: false, snippetTokens: 0 } },
  // The defaults without fill-in-the-middle (the same as `default` for a model without FIM tokens).
  nofim: { definitions: true, completions: { heal: true, filter: true, fim: false } },
  // The defaults without the snippets of other open documents (server/completion/snippets.ts)
  // and without definitions (which share the snippets' budget: none would be laid out).
  nosnippets: { definitions: false, completions: { heal: true, filter: true, fim: true, snippetTokens: 0 } },
  // The defaults without the definitions the editor would send.
  nodefs: { definitions: false, completions: { heal: true, filter: true, fim: true } },
  default: { definitions: true, completions: { heal: true, filter: true, fim: true } },
};
for (const c of option('configs', 'plain,healed,default').split(',')) {
  if (!CONFIGS[c]) throw new Error(`--configs: no configuration "${c}" (known: ${Object.keys(CONFIGS).join(', ')})`);
}
if (!Number.isInteger(TYPING) || TYPING < 0 || TYPING > 2) throw new Error(`--typing: ${option('typing', '0')} is not 0, 1 or 2`);
const chosen = option('configs', 'plain,healed,default').split(',');
const SETS = option('sets', 'held-out,project,repo').split(',');
const LONG_LINE = 160;

// ---- cases -------------------------------------------------------------------------------

type Cursor = 'indent' | 'identifier' | 'punct' | 'mid-line' | 'block';
const CURSORS: readonly Cursor[] = ['indent', 'identifier', 'punct', 'mid-line'];

interface Case {
  set: string;
  /** Files opened before this one, as a developer's tabs (repository cases). */
  opened?: PackageFile[];
  /** Every file of its package it imports: where its definitions are looked up. */
  imported?: PackageFile[];
  /** A block case: the target is the block's body after the line break. */
  block?: boolean;
  file: string;
  languageId: string;
  cursor: Cursor;
  /** The document as the developer has it: the line cut at the cursor. */
  text: string;
  line: number;
  character: number;
  /** The rest of the real line after the cursor. */
  target: string;
}

/** A source file and its VS Code language id. */
interface Source {
  path: string;
  languageId: string;
}

function languageOf(file: string): string {
  if (file.endsWith('.py')) return 'python';
  if (/\.(ts|mts|cts|tsx)$/.test(file)) return 'typescript';
  return 'javascript';
}

/** Where the cursor of a kind stands in a line, or -1 when the line has no such place. */
function cursorIn(line: string, kind: Cursor, draw: () => number): number {
  const indent = line.length - line.trimStart().length;
  if (kind === 'indent') return indent;
  if (kind === 'identifier') {
    const m = /[A-Za-z_$][A-Za-z0-9_$]{3,}/.exec(line.slice(indent));
    if (!m) return -1;
    return indent + m.index + 1 + Math.floor(draw() * (m[0].length - 2));
  }
  if (kind === 'mid-line') return line.trimEnd().length - indent < 3 ? -1 : indent + 1 + Math.floor(draw() * (line.trimEnd().length - indent - 2));
  const at = line.slice(indent).search(/[.(]/);
  return at < 0 ? -1 : indent + at + 1;
}

/** Lines worth completing: code left after the cursor (at least 4 characters, or 2 for a
 * mid-line cursor, which stands anywhere in the line), not a comment. */
function usable(line: string, at: number, kind: Cursor): boolean {
  const rest = line.slice(at).trimEnd();
  const t = line.trim();
  return rest.length >= (kind === 'mid-line' ? 2 : 4) && t.length <= 160 && !/^(#|\/\/|\/\*|\*)/.test(t);
}

function casesOf(set: string, files: Source[], seed: number): Case[] {
  const draw = rng(seed);
  const out: Case[] = [];
  for (const cursor of CURSORS) {
    let tries = 0;
    let got = 0;
    while (got < CASES && tries++ < CASES * 200) {
      const { path: file, languageId } = files[Math.floor(draw() * files.length)];
      const text = fs.readFileSync(file, 'utf8').replace(/\r\n/g, '\n');
      const lines = text.split('\n');
      const line = Math.floor(draw() * lines.length);
      const at = cursorIn(lines[line], cursor, draw);
      if (at < 0 || line < 3 || !usable(lines[line], at, cursor)) continue;
      const cut = [...lines.slice(0, line), lines[line].slice(0, at), ...lines.slice(line + 1)].join('\n');
      out.push({ set, file, languageId, cursor, text: cut, line, character: at, target: lines[line].slice(at).trimEnd() });
      got++;
    }
  }
  return out;
}

/** The held-out packages of k3-mini's corpus (training/heldout.json, fetched by
 * `training/corpus.py --fetch`: new in v2, so neither v1 nor v2 trained on them), or, when
 * they are not fetched, v1's held-out split (training/corpus.py). */
function heldOut(): { name: string; files: Source[] } {
  const listed = path.join(repoRoot, 'training/heldout.json');
  if (fs.existsSync(listed)) {
    const j = JSON.parse(fs.readFileSync(listed, 'utf8')) as { packages: Array<{ files: Array<{ path: string; language: string }> }> };
    const files = j.packages
      .flatMap((p) => p.files)
      .map((f) => ({ path: path.resolve(repoRoot, f.path), languageId: f.language }))
      .filter((f) => fs.existsSync(f.path));
    if (files.length) return { name: 'held-out packages', files };
    console.log('training/heldout.json names files that are not fetched (training/corpus.py --fetch): using v1\'s held-out split');
  }
  const py = 'import sys, json; sys.path.insert(0, "training"); import corpus; ' +
    'print(json.dumps([f["path"] for f in corpus.collect(".") if f["split"] == "held_out"]))';
  const paths = JSON.parse(execFileSync('/usr/bin/python3', ['-c', py], { cwd: repoRoot, encoding: 'utf8' })) as string[];
  return { name: 'v1 held-out split', files: paths.map((p) => ({ path: p, languageId: languageOf(p) })) };
}

/** The repository cases: held-out files that import other files of their package (found by
 * repo-cases.ts), one-line cases as casesOf draws them and block cases at the end of a line
 * that opens a block, each with its imported files opened first. */
function repoCases(seed: number): Case[] {
  const listed = path.join(repoRoot, 'training/heldout.json');
  if (!fs.existsSync(listed)) return [];
  const j = JSON.parse(fs.readFileSync(listed, 'utf8')) as { packages: Array<{ files: Array<{ path: string; name: string; language: string }> }> };
  const withImports: Array<{ file: PackageFile; opened: PackageFile[]; imported: PackageFile[] }> = [];
  for (const p of j.packages) {
    const files: PackageFile[] = p.files
      .map((f) => ({ path: path.resolve(repoRoot, f.path), name: f.name, languageId: f.language }))
      .filter((f) => fs.existsSync(f.path))
      .map((f) => ({ ...f, text: fs.readFileSync(f.path, 'utf8').replace(/\r\n/g, '\n') }));
    for (const file of files) {
      const opened = importsOf(file, files);
      if (opened.length) withImports.push({ file, opened, imported: importsOf(file, files, Infinity) });
    }
  }
  if (withImports.length === 0) return [];
  const set = 'repository';
  const of = new Map(withImports.map((w) => [w.file.path, w]));
  const out = casesOf(set, withImports.map((w) => ({ path: w.file.path, languageId: w.file.languageId })), seed).map((c) => ({
    ...c,
    opened: of.get(c.file)?.opened,
    imported: of.get(c.file)?.imported,
  }));
  const draw = rng(seed + 1);
  let tries = 0;
  let got = 0;
  while (got < CASES && tries++ < CASES * 200) {
    const { file, opened, imported } = withImports[Math.floor(draw() * withImports.length)];
    const lines = file.text.split('\n');
    const line = Math.floor(draw() * lines.length);
    const b = line >= 3 ? blockAt(lines, line, file.languageId) : undefined;
    if (!b) continue;
    const character = lines[line].length;
    out.push({ set, file: file.path, languageId: file.languageId, cursor: 'block', text: b.text, line, character, target: `\n${b.body.join('\n')}`, opened, imported, block: true });
    got++;
  }
  return out;
}

function projectFiles(): Source[] {
  const out: Source[] = [];
  for (const dir of ['server', 'extension', 'scripts', 'training', 'webview']) {
    const walk = (d: string): void => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (/\.(ts|mjs|py)$/.test(e.name)) out.push({ path: p, languageId: languageOf(p) });
      }
    };
    walk(path.join(repoRoot, dir));
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

// ---- measuring ---------------------------------------------------------------------------

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur.push(Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = cur;
  }
  return prev[b.length];
}

function similarity(a: string, b: string): number {
  const n = Math.max(a.length, b.length);
  return n === 0 ? 1 : 1 - levenshtein(a, b) / n;
}

interface Result {
  shown: string;
  ms: number;
  /** `cache`: answered from an earlier suggestion the text typed matches (no engine work). */
  source: 'engine' | 'cache';
  filtered?: string;
  snippets: number;
  definitions: number;
  contextMs: number;
  /** Time the bench's symbol index took to gather the definitions (0 without them), and the
   * definitions the gatherer found for this request (it sends them only when they changed). */
  gatherMs: number;
  found: number;
  /** Where the time went: prompt tokens read, and the engine's prefill and generation. */
  prefilled: number;
  prefillMs: number;
  generated: number;
  generateMs: number;
}

/** An open document as the bench holds it: what it tells the server and the gatherer. */
interface Held {
  uri: string;
  languageId: string;
  version: number;
  text: string;
}

/** Asks for a completion in `doc` at `line`:`character` as the editor does: the definitions
 * gathered and sent first (when `gatherer` is given), then the request; reads the server's
 * numbers for it. */
async function ask(server: ServerHandle, doc: Held, line: number, character: number, block: boolean, gatherer?: Gatherer): Promise<Result> {
  let gatherMs = 0;
  if (gatherer) {
    const lines = doc.text.split('\n');
    const g0 = performance.now();
    await gatherer.gatherer.gather({ uri: doc.uri, version: doc.version, lineAt: (i) => lines[i] ?? '' }, { line, character }, () => false);
    gatherMs = performance.now() - g0;
  }
  const list = await server.complete(doc.uri, line, character);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  const item = list?.items[0];
  const shown = item ? String(typeof item.insertText === 'string' ? item.insertText : item.insertText.value) : '';
  const last = s.lastCompletion;
  const f = last?.filtered;
  return {
    // A block case is scored on the whole suggestion, the others on its first line.
    shown: block ? shown.trimEnd() : shown.split('\n')[0],
    ms: last?.totalMs ?? 0,
    source: last?.source ?? 'engine',
    filtered: f ? `${f.rule} ${f.action}` : undefined,
    snippets: last?.snippets ?? 0,
    definitions: last?.definitions ?? 0,
    contextMs: last?.contextMs ?? 0,
    gatherMs,
    found: gatherer?.lastSent ?? 0,
    prefilled: last?.prefilledTokens ?? 0,
    prefillMs: last?.prefillMs ?? 0,
    generated: last?.generatedTokens ?? 0,
    generateMs: last?.generateMs ?? 0,
  };
}

/** The extension's gatherer over a case's symbol index, and how many definitions it last sent. */
interface Gatherer {
  gatherer: DefinitionGatherer;
  lastSent: number;
}

/** What one configuration answered to one case: cold (the document just opened) and, with
 * --typing, typed (the request after a keystroke, the document asked once before). */
interface Outcome {
  cold: Result;
  typed?: Result;
}

/** One case as the editor would have it: its imported files opened as tabs, then the
 * document opened and asked cold; or, `typing`, opened with the cursor's line cut TYPING
 * characters earlier, asked (warm, not scored), those characters typed as an incremental
 * change and asked again (that request's result; undefined for a cursor at the line's start).
 * Cold and typing requests go to different servers: the cold request's answer, cached for
 * the very same text, would answer the typing one. With `definitions`, a DefinitionGatherer
 * per opening (the extension holds one across versions: it sends only what changed) over the
 * case's symbol index. */
async function complete(server: ServerHandle, c: Case, n: number, definitions: boolean, typing: boolean): Promise<Result | undefined> {
  const uri = `file:///bench/${n}/${path.basename(c.file)}`;
  const tabs = (c.opened ?? []).map((f) => ({ uri: `file:///bench/${n}/${f.name}`, f }));
  const imported: IndexedDocument[] = (c.imported ?? []).map((f) => ({ uri: `file:///bench/${n}/${f.name}`, languageId: f.languageId, text: f.text }));
  const gathererFor = (doc: Held): Gatherer | undefined => {
    if (!definitions) return undefined;
    const g: Gatherer = {
      lastSent: 0,
      gatherer: new DefinitionGatherer(symbolIndex(() => doc, imported), (p) => {
        g.lastSent = p.definitions.length;
        void server.connection.sendNotification(ContextDefinitionsNotification.type, p);
      }),
    };
    return g;
  };
  const k = typing ? Math.min(TYPING, c.character) : 0;
  if (typing && k === 0) return undefined;
  for (const t of tabs) await server.open(t.uri, t.f.languageId, t.f.text);
  let result: Result;
  if (!typing) {
    const doc: Held = { uri, languageId: c.languageId, version: 1, text: c.text };
    await server.open(uri, c.languageId, c.text);
    result = await ask(server, doc, c.line, c.character, !!c.block, gathererFor(doc));
  } else {
    const lines = c.text.split('\n');
    const row = lines[c.line];
    const keys = row.slice(c.character - k, c.character);
    lines[c.line] = row.slice(0, c.character - k) + row.slice(c.character);
    const doc: Held = { uri, languageId: c.languageId, version: 1, text: lines.join('\n') };
    const gatherer = gathererFor(doc);
    await server.open(uri, c.languageId, doc.text);
    await ask(server, doc, c.line, c.character - k, !!c.block, gatherer);
    await server.type(uri, 2, c.line, c.character - k, keys);
    // The gatherer reads the document through `doc`: now the typed text, version 2.
    Object.assign(doc, { version: 2, text: c.text });
    result = await ask(server, doc, c.line, c.character, !!c.block, gatherer);
  }
  for (const u of [uri, ...tabs.map((t) => t.uri)]) await server.connection.sendNotification(DidCloseTextDocumentNotification.type, { textDocument: { uri: u } });
  return result;
}

function mean(xs: number[]): number {
  return xs.reduce((a, x) => a + x, 0) / Math.max(1, xs.length);
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0;
}

interface Row {
  set: string;
  config: string;
  cases: number;
  exact: number;
  edit_similarity: number;
  empty: number;
  leading_whitespace: number;
  loops_shown: number;
  long_lines_shown: number;
  filtered: Record<string, number>;
  p50_ms: number;
  p90_ms: number;
  /** Mean snippets per prompt (definitions included), and the server's time to find them
   * (p50 / p90, ms). */
  snippets: number;
  context_p50_ms: number;
  context_p90_ms: number;
  /** Mean definitions per prompt, the mean the gatherer sent, and the bench's symbol index's
   * time to gather them. */
  definitions: number;
  definitions_sent: number;
  gather_p50_ms: number;
  gather_p90_ms: number;
  /** Means per case: tokens prefilled, prefill ms, tokens generated, generation ms. */
  mean_prefilled: number;
  mean_prefill_ms: number;
  mean_generated: number;
  mean_generate_ms: number;
  /** Block cases: characters of the real bodies a user would not type, of all of them. */
  chars_saved?: number;
  chars_total?: number;
  /** With --typing: the keystroke's request (cases whose cursor stands past TYPING characters). */
  typing?: {
    cases: number;
    p50_ms: number;
    p90_ms: number;
    mean_prefilled: number;
    /** Answered from the cache (the typed text followed the warm request's suggestion). */
    from_cache: number;
    /** The others, which the engine answered: latency and tokens prefilled. */
    engine_p50_ms: number;
    engine_p90_ms: number;
    engine_mean_prefilled: number;
    /** The same answer as the cold request (an engine that reuses its state exactly). */
    same_as_cold: number;
    exact: number;
  };
}

/** A set's figures for one configuration. */
function rowOf(set: { name: string; cases: Case[] }, config: string, outcomes: Outcome[]): Row {
  const results = outcomes.map((o) => o.cold);
  const cases = set.cases;
  const filtered: Record<string, number> = {};
  for (const r of results) if (r.filtered) filtered[r.filtered] = (filtered[r.filtered] ?? 0) + 1;
  const typed = outcomes.flatMap((o, i) => (o.typed ? [{ t: o.typed, cold: o.cold, c: cases[i] }] : []));
  const engine = typed.filter((x) => x.t.source === 'engine');
  return {
    set: set.name,
    config,
    cases: results.length,
    exact: results.filter((r, i) => r.shown === cases[i].target).length,
    edit_similarity: results.reduce((a, r, i) => a + similarity(r.shown, cases[i].target), 0) / results.length,
    empty: results.filter((r) => r.shown === '').length,
    leading_whitespace: results.filter((r, i) => /^\s/.test(r.shown) && !/^\s/.test(cases[i].target)).length,
    loops_shown: results.filter((r) => loopStart(r.shown) >= 0).length,
    long_lines_shown: results.filter((r, i) => cases[i].text.split('\n')[cases[i].line].length + r.shown.length > LONG_LINE).length,
    filtered,
    p50_ms: percentile(results.map((r) => r.ms), 0.5),
    p90_ms: percentile(results.map((r) => r.ms), 0.9),
    snippets: mean(results.map((r) => r.snippets)),
    context_p50_ms: percentile(results.map((r) => r.contextMs), 0.5),
    context_p90_ms: percentile(results.map((r) => r.contextMs), 0.9),
    definitions: mean(results.map((r) => r.definitions)),
    definitions_sent: mean(results.map((r) => r.found)),
    gather_p50_ms: percentile(results.map((r) => r.gatherMs), 0.5),
    gather_p90_ms: percentile(results.map((r) => r.gatherMs), 0.9),
    mean_prefilled: mean(results.map((r) => r.prefilled)),
    mean_prefill_ms: mean(results.map((r) => r.prefillMs)),
    mean_generated: mean(results.map((r) => r.generated)),
    mean_generate_ms: mean(results.map((r) => r.generateMs)),
    ...(cases.some((c) => c.block)
      ? {
          chars_saved: results.reduce((a, r, i) => a + charactersSaved(r.shown, cases[i].target), 0),
          chars_total: cases.reduce((a, c) => a + c.target.length, 0),
        }
      : {}),
    ...(typed.length
      ? {
          typing: {
            cases: typed.length,
            p50_ms: percentile(typed.map((x) => x.t.ms), 0.5),
            p90_ms: percentile(typed.map((x) => x.t.ms), 0.9),
            mean_prefilled: mean(typed.map((x) => x.t.prefilled)),
            from_cache: typed.length - engine.length,
            engine_p50_ms: percentile(engine.map((x) => x.t.ms), 0.5),
            engine_p90_ms: percentile(engine.map((x) => x.t.ms), 0.9),
            engine_mean_prefilled: mean(engine.map((x) => x.t.prefilled)),
            same_as_cold: typed.filter((x) => x.t.shown === x.cold.shown).length,
            exact: typed.filter((x) => x.t.shown === x.c.target).length,
          },
        }
      : {}),
  };
}

async function run(): Promise<void> {
  const load0 = os.loadavg()[0];
  const held = heldOut();
  const repo = SETS.includes('repo') ? repoCases(13) : [];
  const sets = [
    ...(SETS.includes('held-out') ? [{ name: held.name, cases: casesOf(held.name, held.files, 7) }] : []),
    ...(SETS.includes('project') ? [{ name: 'project sources', cases: casesOf('project sources', projectFiles(), 11) }] : []),
    ...(repo.length ? [{ name: 'repository, one line', cases: repo.filter((c) => !c.block) }, { name: 'repository, blocks', cases: repo.filter((c) => c.block) }] : []),
  ];
  const rows: Row[] = [];
  const byCursor: Array<{ config: string; cursor: Cursor; exact: boolean; similarity: number }> = [];
  const samples: Array<{ set: string; file: string; cursor: string; target: string } & Record<string, string>> = [];
  // Every case but a block case is scored against the rest of one real line: one-line
  // completions; block cases get the extension's default, multi-line auto.
  const serverFor = async (config: string, multiline: 'never' | 'auto'): Promise<ServerHandle> => {
    const completions = {
      ...(SNIPPET_TOKENS ? { snippetTokens: SNIPPET_TOKENS } : {}),
      ...CONFIGS[config].completions,
      multiline,
      ...(MAX_PROMPT ? { maxPromptTokens: MAX_PROMPT } : {}),
    };
    const s = await startServer({ modelPath: MODEL, settings: { engine: { threads: 1 }, completions } });
    await waitReady(s);
    return s;
  };
  let n = 0;
  for (const set of sets) {
    // One server per configuration, all asked each case in turn: a change of load between
    // the configurations' turns is seconds apart, not minutes.
    const multiline = set.cases.some((c) => c.block) ? 'auto' : 'never';
    const servers: Array<{ cold: ServerHandle; typing?: ServerHandle }> = [];
    for (const config of chosen) servers.push({ cold: await serverFor(config, multiline), typing: TYPING ? await serverFor(config, multiline) : undefined });
    const outcomes: Outcome[][] = chosen.map(() => []);
    for (const c of set.cases) {
      const file = path.relative(repoRoot, c.file);
      let sample = samples.find((s) => s.file === file && s.target === c.target && s.cursor === c.cursor);
      if (!sample) samples.push((sample = { set: set.name, file, cursor: c.cursor, target: c.target }));
      for (const [k, config] of chosen.entries()) {
        const defs = CONFIGS[config].definitions;
        const cold = await complete(servers[k].cold, c, n, defs, false);
        const typed = servers[k].typing ? await complete(servers[k].typing, c, n, defs, true) : undefined;
        n++;
        if (!cold) throw new Error(`${c.file}: the cold request gave no result`);
        const o: Outcome = { cold, typed };
        outcomes[k].push(o);
        byCursor.push({ config, cursor: c.cursor, exact: o.cold.shown === c.target, similarity: similarity(o.cold.shown, c.target) });
        sample[config] = o.cold.shown;
        if (typed) sample[`${config} typing, ${typed.source}`] = typed.shown;
      }
    }
    for (const [k, config] of chosen.entries()) rows.push(rowOf(set, config, outcomes[k]));
    for (const s of servers) for (const h of [s.cold, s.typing]) await h?.shutdown();
  }
  const load1 = os.loadavg()[0];

  console.log(`\nghost-text quality through the language server: ${path.relative(repoRoot, MODEL) || MODEL}, ${CASES} cases per set and cursor kind, one engine thread, prompts of at most ${MAX_PROMPT || 2048} tokens`);
  console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores; 1-minute load ${load0.toFixed(2)} before, ${load1.toFixed(2)} after\n`);
  console.log('Exact lines of a block set are blocks accepted (the suggestion is the real body); saved: the characters of the real bodies before the first difference.');
  console.log('snippets: per prompt, definitions included; found: the server\'s time to rank them; definitions: per prompt, sent by the gatherer and laid out by the server, and the bench\'s symbol index\'s time to gather them.\n');
  console.log('| set | configuration | cases | exact lines | edit similarity | empty | leading whitespace | loops shown | lines > 160 shown | filter acted | p50 ms | p90 ms | snippets | found p50/p90 ms | definitions sent / laid out | gathered p50/p90 ms | saved |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = Object.entries(r.filtered).map(([k, v]) => `${k} ${v}`).join(', ') || '-';
    const saved = r.chars_total ? `${r.chars_saved} of ${r.chars_total} (${((100 * (r.chars_saved ?? 0)) / r.chars_total).toFixed(1)} %)` : '-';
    console.log(
      `| ${r.set} | ${r.config} | ${r.cases} | ${r.exact} (${((100 * r.exact) / r.cases).toFixed(1)} %) | ${(100 * r.edit_similarity).toFixed(1)} % | ${r.empty} | ${r.leading_whitespace} | ${r.loops_shown} | ${r.long_lines_shown} | ${f} | ${r.p50_ms} | ${r.p90_ms} | ${r.snippets.toFixed(2)} | ${r.context_p50_ms.toFixed(2)} / ${r.context_p90_ms.toFixed(2)} | ${r.definitions_sent.toFixed(2)} / ${r.definitions.toFixed(2)} | ${r.gather_p50_ms.toFixed(2)} / ${r.gather_p90_ms.toFixed(2)} | ${saved} |`,
    );
  }
  console.log('\nWhere the time went (means per case):\n');
  console.log('| set | configuration | tokens prefilled | prefill ms | tokens generated | generation ms |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.set} | ${r.config} | ${r.mean_prefilled.toFixed(0)} | ${r.mean_prefill_ms.toFixed(0)} | ${r.mean_generated.toFixed(1)} | ${r.mean_generate_ms.toFixed(0)} |`);
  }
  if (TYPING) {
    console.log(`\nA typing user's request: the line cut ${TYPING} character(s) earlier, asked, then typed and asked again (that request):\n`);
    console.log('| set | configuration | cases | cold p50 / p90 ms | typing p50 / p90 ms | from the cache | by the engine: p50 / p90 ms | tokens prefilled | same answer as cold | exact |');
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      const t = r.typing;
      if (!t) continue;
      console.log(
        `| ${r.set} | ${r.config} | ${t.cases} | ${r.p50_ms} / ${r.p90_ms} | ${t.p50_ms} / ${t.p90_ms} | ${t.from_cache} | ${t.engine_p50_ms} / ${t.engine_p90_ms} | ${t.engine_mean_prefilled.toFixed(1)} | ${t.same_as_cold} | ${t.exact} |`,
      );
    }
  }
  console.log('\nBy cursor, both sets together:\n');
  console.log('| configuration | cursor | cases | exact lines | edit similarity |');
  console.log('|---|---|---|---|---|');
  for (const config of chosen) {
    for (const cursor of [...CURSORS, 'block' as const]) {
      const mine = byCursor.filter((r) => r.config === config && r.cursor === cursor);
      if (mine.length === 0) continue;
      const exact = mine.filter((r) => r.exact).length;
      const sim = mine.reduce((a, r) => a + r.similarity, 0) / Math.max(1, mine.length);
      console.log(`| ${config} | ${cursor} | ${mine.length} | ${exact} (${((100 * exact) / Math.max(1, mine.length)).toFixed(1)} %) | ${(100 * sim).toFixed(1)} % |`);
    }
  }
  const out = path.join(repoRoot, 'out/bench');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'quality.json'), JSON.stringify({ model: MODEL, cases: CASES, typing: TYPING, load: [load0, load1], rows, samples }, null, 2));
  console.log(`\nevery case's real line and answers: out/bench/quality.json`);
}

run().catch((e) => {
  console.error(e);
  process.exit(1);
});
