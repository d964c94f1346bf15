// quality.ts - ghost-text quality through the language server, as the editor asks for it
// (`npm run bench -- quality`): code the default model never trained on, cut where a
// developer's cursor stands, completed by the bundled server (dist/server.js) over LSP,
// compared with the real line. Cases:
//   - sets: the held-out packages of k3-mini's corpus (training/heldout.json, when fetched;
//     else v1's held-out split) and the project's own sources (never in the corpus);
//   - cursors: after the line's indentation, inside the line's first identifier, right
//     after its first `.` or `(`, and anywhere in the line (mid-line, as training/evaluate.py
//     cuts); the rest of that line is removed (what the developer is about to type) and the
//     rest of the file stays after it.
// Configurations run side by side in one run, each on a fresh server: `plain` (no token
// healing, no junk filter, no FIM: the pipeline before them), `healed` (healing only),
// `nofim` (healing and the filter) and `default` (and FIM, for a model that has it). Per set and configuration: exact-line matches, mean
// edit similarity, empty answers, answers starting with whitespace the real line does not
// start with, repetition loops and lines over 160 characters shown, what the filter did,
// p50/p90 latency; the machine's load before and after. Writes out/bench/quality.json.
//   --model DIR   another model folder (default: the embedded k3-mini)
//   --cases N     cases per set and cursor kind (default 40)
//   --configs a,b which configurations (default plain,healed,default; also nofim)
//   --max-prompt N  completions.maxPromptTokens (default: the server's, 2048)
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

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

const MODEL = path.resolve(option('model', path.join(repoRoot, 'media/models/k3-mini')));
const CASES = Number(option('cases', '40'));
const MAX_PROMPT = Number(option('max-prompt', '0')); // 0: the server's default
const CONFIGS: Record<string, { heal: boolean; filter: boolean; fim: boolean }> = {
  plain: { heal: false, filter: false, fim: false },
  healed: { heal: true, filter: false, fim: false },
  // The defaults without fill-in-the-middle (the same as `default` for a model without FIM tokens).
  nofim: { heal: true, filter: true, fim: false },
  default: { heal: true, filter: true, fim: true },
};
const chosen = option('configs', 'plain,healed,default').split(',');
const LONG_LINE = 160;

// ---- cases -------------------------------------------------------------------------------

type Cursor = 'indent' | 'identifier' | 'punct' | 'mid-line';
const CURSORS: readonly Cursor[] = ['indent', 'identifier', 'punct', 'mid-line'];

interface Case {
  set: string;
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
}

async function complete(server: ServerHandle, c: Case, n: number): Promise<Result> {
  const uri = `file:///bench/${n}/${path.basename(c.file)}`;
  await server.open(uri, c.languageId, c.text);
  const list = await server.complete(uri, c.line, c.character);
  const s: StatusResult = await server.connection.sendRequest(StatusRequest.type);
  await server.connection.sendNotification(DidCloseTextDocumentNotification.type, { textDocument: { uri } });
  const item = list?.items[0];
  const shown = item ? String(typeof item.insertText === 'string' ? item.insertText : item.insertText.value) : '';
  const f = s.lastCompletion?.filtered;
  return { shown: shown.split('\n')[0], ms: s.lastCompletion?.totalMs ?? 0, filtered: f ? `${f.rule} ${f.action}` : undefined };
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
}

async function run(): Promise<void> {
  const load0 = os.loadavg()[0];
  const held = heldOut();
  const sets = [
    { name: held.name, cases: casesOf(held.name, held.files, 7) },
    { name: 'project sources', cases: casesOf('project sources', projectFiles(), 11) },
  ];
  const rows: Row[] = [];
  const byCursor: Array<{ config: string; cursor: Cursor; exact: boolean; similarity: number }> = [];
  const samples: Array<{ set: string; file: string; cursor: string; target: string } & Record<string, string>> = [];
  for (const config of chosen) {
    // Every case is scored against the rest of one real line: one-line completions.
    const completions = { ...CONFIGS[config], multiline: 'never' as const, ...(MAX_PROMPT ? { maxPromptTokens: MAX_PROMPT } : {}) };
    const settings = { engine: { threads: 1 }, completions };
    const server = await startServer({ modelPath: MODEL, settings });
    await waitReady(server);
    let n = 0;
    for (const set of sets) {
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
      });
    }
    await server.shutdown();
  }
  const load1 = os.loadavg()[0];

  console.log(`\nghost-text quality through the language server: ${path.relative(repoRoot, MODEL) || MODEL}, ${CASES} cases per set and cursor kind, one engine thread, prompts of at most ${MAX_PROMPT || 2048} tokens`);
  console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores; 1-minute load ${load0.toFixed(2)} before, ${load1.toFixed(2)} after\n`);
  console.log('| set | configuration | cases | exact lines | edit similarity | empty | leading whitespace | loops shown | lines > 160 shown | filter acted | p50 ms | p90 ms |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = Object.entries(r.filtered).map(([k, v]) => `${k} ${v}`).join(', ') || '-';
    console.log(
      `| ${r.set} | ${r.config} | ${r.cases} | ${r.exact} (${((100 * r.exact) / r.cases).toFixed(1)} %) | ${(100 * r.edit_similarity).toFixed(1)} % | ${r.empty} | ${r.leading_whitespace} | ${r.loops_shown} | ${r.long_lines_shown} | ${f} | ${r.p50_ms} | ${r.p90_ms} |`,
    );
  }
  console.log('\nBy cursor, both sets together:\n');
  console.log('| configuration | cursor | cases | exact lines | edit similarity |');
  console.log('|---|---|---|---|---|');
  for (const config of chosen) {
    for (const cursor of CURSORS) {
      const mine = byCursor.filter((r) => r.config === config && r.cursor === cursor);
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
