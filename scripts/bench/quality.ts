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
// Configurations run side by side in one run, each on a fresh server: `plain` (no token
// healing, no junk filter, no FIM: the pipeline before them), `healed` (healing only),
// `nofim` (healing and the filter), `nosnippets` (all but the snippets of other open
// documents) and `default` (and FIM, for a model that has it). Per set and configuration: exact-line matches, mean
// edit similarity, empty answers, answers starting with whitespace the real line does not
// start with, repetition loops and lines over 160 characters shown, what the filter did,
// p50/p90 latency, snippets carried and the time to find them; for block cases, blocks
// accepted (the suggestion is the real body) and the characters a user would not type; the
// machine's load before and after. Writes out/bench/quality.json.
//   --model DIR   another model folder (default: the embedded k3-mini)
//   --cases N     cases per set and cursor kind (default 40)
//   --configs a,b which configurations (default plain,healed,default; also nofim, nosnippets)
//   --sets a,b    which sets (default held-out,project,repo)
//   --max-prompt N  completions.maxPromptTokens (default: the server's, 2048)
//   --snippet-tokens N  completions.snippetTokens where a configuration has snippets
//                   (default: the server's, 384)
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DidCloseTextDocumentNotification } from 'vscode-languageserver-protocol/node';
import { loopStart } from '../../server/completion/filters';
import { type StatusResult, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, waitReady } from '../../test/support/lsp';
import { repoRoot } from '../../test/support/paths';
import { rng } from '../../test/tokenizer/corpus';
import { blockAt, charactersSaved, importsOf, type PackageFile } from './lib/repo-cases';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

const MODEL = path.resolve(option('model', path.join(repoRoot, 'media/models/k3-mini')));
const CASES = Number(option('cases', '40'));
const MAX_PROMPT = Number(option('max-prompt', '0')); // 0: the server's default
const SNIPPET_TOKENS = Number(option('snippet-tokens', '0')); // 0: the server's default
const CONFIGS: Record<string, { heal: boolean; filter: boolean; fim: boolean; snippetTokens?: number }> = {
  plain: { heal: false, filter: false, fim: false, snippetTokens: 0 },
  healed: { heal: true, filter: false, fim: false, snippetTokens: 0 },
  // The defaults without fill-in-the-middle (the same as `default` for a model without FIM tokens).
  nofim: { heal: true, filter: true, fim: false },
  // The defaults without the snippets of other open documents (server/completion/snippets.ts).
  nosnippets: { heal: true, filter: true, fim: true, snippetTokens: 0 },
  default: { heal: true, filter: true, fim: true },
};
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
  const withImports: Array<{ file: PackageFile; opened: PackageFile[] }> = [];
  for (const p of j.packages) {
    const files: PackageFile[] = p.files
      .map((f) => ({ path: path.resolve(repoRoot, f.path), name: f.name, languageId: f.language }))
      .filter((f) => fs.existsSync(f.path))
      .map((f) => ({ ...f, text: fs.readFileSync(f.path, 'utf8').replace(/\r\n/g, '\n') }));
    for (const file of files) {
      const opened = importsOf(file, files);
      if (opened.length) withImports.push({ file, opened });
    }
  }
  if (withImports.length === 0) return [];
  const set = 'repository';
  const openedOf = new Map(withImports.map((w) => [w.file.path, w.opened]));
  const out = casesOf(set, withImports.map((w) => ({ path: w.file.path, languageId: w.file.languageId })), seed).map((c) => ({ ...c, opened: openedOf.get(c.file) }));
  const draw = rng(seed + 1);
  let tries = 0;
  let got = 0;
  while (got < CASES && tries++ < CASES * 200) {
    const { file, opened } = withImports[Math.floor(draw() * withImports.length)];
    const lines = file.text.split('\n');
    const line = Math.floor(draw() * lines.length);
    const b = line >= 3 ? blockAt(lines, line, file.languageId) : undefined;
    if (!b) continue;
    const character = lines[line].length;
    out.push({ set, file: file.path, languageId: file.languageId, cursor: 'block', text: b.text, line, character, target: `\n${b.body.join('\n')}`, opened, block: true });
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
  filtered?: string;
  snippets: number;
  contextMs: number;
  /** Where the time went: prompt tokens read, and the engine's prefill and generation. */
  prefilled: number;
  prefillMs: number;
  generated: number;
  generateMs: number;
}

async function complete(server: ServerHandle, c: Case, n: number): Promise<Result> {
  const uri = `file:///bench/${n}/${path.basename(c.file)}`;
  const opened = (c.opened ?? []).map((f) => ({ uri: `file:///bench/${n}/${f.name}`, f }));
  for (const o of opened) await server.open(o.uri, o.f.languageId, o.f.text);
  await server.open(uri, c.languageId, c.text);
  const list = await server.complete(uri, c.line, c.character);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  for (const u of [uri, ...opened.map((o) => o.uri)]) await server.connection.sendNotification(DidCloseTextDocumentNotification.type, { textDocument: { uri: u } });
  const item = list?.items[0];
  const shown = item ? String(typeof item.insertText === 'string' ? item.insertText : item.insertText.value) : '';
  const f = s.lastCompletion?.filtered;
  return {
    // A block case is scored on the whole suggestion, the others on its first line.
    shown: c.block ? shown.trimEnd() : shown.split('\n')[0],
    ms: s.lastCompletion?.totalMs ?? 0,
    filtered: f ? `${f.rule} ${f.action}` : undefined,
    snippets: s.lastCompletion?.snippets ?? 0,
    contextMs: s.lastCompletion?.contextMs ?? 0,
    prefilled: s.lastCompletion?.prefilledTokens ?? 0,
    prefillMs: s.lastCompletion?.prefillMs ?? 0,
    generated: s.lastCompletion?.generatedTokens ?? 0,
    generateMs: s.lastCompletion?.generateMs ?? 0,
  };
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
  /** Mean snippets per prompt, and the time to find them (p50 / p90, ms). */
  snippets: number;
  context_p50_ms: number;
  context_p90_ms: number;
  /** Means per case: tokens prefilled, prefill ms, tokens generated, generation ms. */
  mean_prefilled: number;
  mean_prefill_ms: number;
  mean_generated: number;
  mean_generate_ms: number;
  /** Block cases: characters of the real bodies a user would not type, of all of them. */
  chars_saved?: number;
  chars_total?: number;
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
  for (const config of chosen) {
    // Every case but a block case is scored against the rest of one real line: one-line
    // completions; block cases get the extension's default, multi-line auto.
    const serverFor = async (multiline: 'never' | 'auto'): Promise<ServerHandle> => {
      const completions = {
        ...(SNIPPET_TOKENS ? { snippetTokens: SNIPPET_TOKENS } : {}),
        ...CONFIGS[config],
        multiline,
        ...(MAX_PROMPT ? { maxPromptTokens: MAX_PROMPT } : {}),
      };
      const s = await startServer({ modelPath: MODEL, settings: { engine: { threads: 1 }, completions } });
      await waitReady(s);
      return s;
    };
    let n = 0;
    for (const set of sets) {
      const server = await serverFor(set.cases.some((c) => c.block) ? 'auto' : 'never');
      const results: Result[] = [];
      for (const c of set.cases) {
        const r = await complete(server, c, n++);
        results.push(r);
        byCursor.push({ config, cursor: c.cursor, exact: r.shown === c.target, similarity: similarity(r.shown, c.target) });
        const file = path.relative(repoRoot, c.file);
        const sample = samples.find((s) => s.file === file && s.target === c.target && s.cursor === c.cursor);
        if (sample) sample[config] = r.shown;
        else samples.push({ set: set.name, file, cursor: c.cursor, target: c.target, [config]: r.shown });
      }
      const filtered: Record<string, number> = {};
      for (const r of results) if (r.filtered) filtered[r.filtered] = (filtered[r.filtered] ?? 0) + 1;
      rows.push({
        set: set.name,
        config,
        cases: results.length,
        exact: results.filter((r, i) => r.shown === set.cases[i].target).length,
        edit_similarity: results.reduce((a, r, i) => a + similarity(r.shown, set.cases[i].target), 0) / results.length,
        empty: results.filter((r) => r.shown === '').length,
        leading_whitespace: results.filter((r, i) => /^\s/.test(r.shown) && !/^\s/.test(set.cases[i].target)).length,
        loops_shown: results.filter((r) => loopStart(r.shown) >= 0).length,
        long_lines_shown: results.filter((r, i) => set.cases[i].text.split('\n')[set.cases[i].line].length + r.shown.length > LONG_LINE).length,
        filtered,
        p50_ms: percentile(results.map((r) => r.ms), 0.5),
        p90_ms: percentile(results.map((r) => r.ms), 0.9),
        snippets: results.reduce((a, r) => a + r.snippets, 0) / Math.max(1, results.length),
        context_p50_ms: percentile(results.map((r) => r.contextMs), 0.5),
        context_p90_ms: percentile(results.map((r) => r.contextMs), 0.9),
        mean_prefilled: mean(results.map((r) => r.prefilled)),
        mean_prefill_ms: mean(results.map((r) => r.prefillMs)),
        mean_generated: mean(results.map((r) => r.generated)),
        mean_generate_ms: mean(results.map((r) => r.generateMs)),
        ...(set.cases.some((c) => c.block)
          ? {
              chars_saved: results.reduce((a, r, i) => a + charactersSaved(r.shown, set.cases[i].target), 0),
              chars_total: set.cases.reduce((a, c) => a + c.target.length, 0),
            }
          : {}),
      });
      await server.shutdown();
    }
  }
  const load1 = os.loadavg()[0];

  console.log(`\nghost-text quality through the language server: ${path.relative(repoRoot, MODEL) || MODEL}, ${CASES} cases per set and cursor kind, one engine thread, prompts of at most ${MAX_PROMPT || 2048} tokens`);
  console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores; 1-minute load ${load0.toFixed(2)} before, ${load1.toFixed(2)} after\n`);
  console.log('Exact lines of a block set are blocks accepted (the suggestion is the real body); saved: the characters of the real bodies before the first difference.\n');
  console.log('| set | configuration | cases | exact lines | edit similarity | empty | leading whitespace | loops shown | lines > 160 shown | filter acted | p50 ms | p90 ms | snippets | context p50/p90 ms | saved |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = Object.entries(r.filtered).map(([k, v]) => `${k} ${v}`).join(', ') || '-';
    const saved = r.chars_total ? `${r.chars_saved} of ${r.chars_total} (${((100 * (r.chars_saved ?? 0)) / r.chars_total).toFixed(1)} %)` : '-';
    console.log(
      `| ${r.set} | ${r.config} | ${r.cases} | ${r.exact} (${((100 * r.exact) / r.cases).toFixed(1)} %) | ${(100 * r.edit_similarity).toFixed(1)} % | ${r.empty} | ${r.leading_whitespace} | ${r.loops_shown} | ${r.long_lines_shown} | ${f} | ${r.p50_ms} | ${r.p90_ms} | ${r.snippets.toFixed(2)} | ${r.context_p50_ms.toFixed(2)} / ${r.context_p90_ms.toFixed(2)} | ${saved} |`,
    );
  }
  console.log('\nWhere the time went (means per case):\n');
  console.log('| set | configuration | tokens prefilled | prefill ms | tokens generated | generation ms |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.set} | ${r.config} | ${r.mean_prefilled.toFixed(0)} | ${r.mean_prefill_ms.toFixed(0)} | ${r.mean_generated.toFixed(1)} | ${r.mean_generate_ms.toFixed(0)} |`);
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
  fs.writeFileSync(path.join(out, 'quality.json'), JSON.stringify({ model: MODEL, cases: CASES, load: [load0, load1], rows, samples }, null, 2));
  console.log(`\nevery case's real line and answers: out/bench/quality.json`);
}

run().catch((e) => {
  console.error(e);
  process.exit(1);
});
