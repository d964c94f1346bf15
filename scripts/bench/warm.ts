// warm.ts - what warm-up (k3.completions.warmup, server/completion/warmup.ts) saves the user
// (`npm run bench -- warm`): the time to the first ghost text after opening a file and after
// accepting a suggestion, with and without warm-up, driving the bundled server
// (dist/server.js) over LSP as the extension does:
//   - open: open a file (one of the project's own sources, a new one each event), send
//     k3/context/didChange at the cursor, wait the user's think time (--think-ms), type the
//     next character, ask for a completion there;
//   - accept: in an opened file, ask for a completion, insert it (the accept), send
//     k3/completion/didAccept, wait the client's debounce (--debounce-ms), ask at the cursor
//     after the accepted text.
// The time measured is the completion request's, sent to answered (the client's own debounce
// before it is not included). Each variant runs on its own server and backend process, so no
// cache crosses between them; events alternate between the variants, so the machine's load
// weighs on both alike. Backends: the local engine on --model (default the embedded
// k3-mini), and, when --llama-server PATH --gguf FILE are given, a llama-server on that GGUF
// (the model folder's tokenizer is offered for prompts as ids; the server's check decides).
// Writes out/bench/warm.json: medians and p90 per backend, scenario and variant, every
// sample, and the machine's 1-minute load before and after.
//   --events N      events per scenario and variant (default 20)
//   --think-ms N    open: from the context change to the keystroke (default 1000)
//   --debounce-ms N accept: from the accept to the request (default 250, the client's least)
//   --threads N     engine threads (local) and llama-server -t (default 1)
//   --backends a,b  which of local,llama-server (default both; llama-server needs the two above)
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { DidCloseTextDocumentNotification } from 'vscode-languageserver-protocol/node';
import { CompletionDidAcceptNotification, ContextDidChangeNotification, type InitializationOptions, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, waitReady } from '../../test/support/lsp';
import { repoRoot } from '../../test/support/paths';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

const MODEL = path.resolve(option('model', path.join(repoRoot, 'media/models/k3-mini')));
const EVENTS = Number(option('events', '20'));
const THINK_MS = Number(option('think-ms', '1000'));
const DEBOUNCE_MS = Number(option('debounce-ms', '250'));
const THREADS = Number(option('threads', '1'));
const LLAMA = option('llama-server', '');
const GGUF = option('gguf', '');
const BACKENDS = option('backends', 'local,llama-server').split(',') as Array<'local' | 'llama-server'>;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- files and cursors ---------------------------------------------------------------------

interface Cursor {
  uri: string;
  text: string;
  line: number;
  character: number;
  /** What the developer types next (the first character of the line's removed rest). */
  next: string;
}

/** The project's own TypeScript sources, largest first (each event opens a new one). */
function sources(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p);
    }
  };
  for (const d of ['server', 'extension', 'scripts', 'test', 'webview']) walk(path.join(repoRoot, d));
  return out.map((f) => [f, fs.statSync(f).size] as const).filter(([, n]) => n > 4000).sort((a, b) => b[1] - a[1]).map(([f]) => f);
}

/** A cursor two thirds down `file`, after the indentation of a line of code; the rest of
 * that line removed, as the developer has not typed it yet. */
function cursorIn(file: string, tag: string): Cursor {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  let line = Math.floor(lines.length * 0.66);
  while (line < lines.length - 1 && (lines[line].trim().length < 20 || lines[line].trim().startsWith('//'))) line++;
  const indent = /^\s*/.exec(lines[line])![0].length;
  const next = lines[line][indent];
  lines[line] = lines[line].slice(0, indent);
  const rel = path.relative(repoRoot, file);
  return { uri: `file:///bench/${tag}/${rel}`, text: lines.join('\n'), line, character: indent, next };
}

// ---- backends ------------------------------------------------------------------------------

interface Variant {
  name: string;
  warmup: boolean;
  ls: ServerHandle;
  version: Map<string, number>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A llama-server on the GGUF, resolved once /health answers 200. */
async function startLlama(): Promise<{ base: string; proc: ChildProcess }> {
  const port = await freePort();
  const logFile = path.join(repoRoot, 'out/bench', `warm-llama-server-${port}.log`);
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.openSync(logFile, 'w');
  const proc = spawn(LLAMA, ['-m', GGUF, '--port', String(port), '--host', '127.0.0.1', '-c', '4096', '-np', '1', '-t', String(THREADS), '--no-webui'], { stdio: ['ignore', log, log] });
  proc.on('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM') console.error(`\nllama-server exited (${code ?? signal}); its log: ${path.relative(repoRoot, logFile)}`);
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) throw new Error(`llama-server exited (${proc.exitCode}) before it answered`);
    const ok = await fetch(`${base}/health`).then((r) => r.status === 200, () => false);
    if (ok) return { base, proc };
    await sleep(100);
  }
  throw new Error('llama-server did not answer /health within 60 s');
}

async function variant(backend: 'local' | 'llama-server', warmup: boolean): Promise<Variant> {
  const settings = { engine: { threads: THREADS }, completions: { warmup } };
  let llama: { base: string; proc: ChildProcess } | undefined;
  let init: InitializationOptions;
  if (backend === 'local') init = { modelPath: MODEL, settings };
  else {
    llama = await startLlama();
    init = { modelPath: MODEL, settings, backend: 'remote', remote: { endpoint: llama.base, timeoutMs: 60_000 } };
  }
  const ls = await startServer(init);
  let stopping = false;
  // A server that dies would leave the bench waiting for an answer: stop, saying why.
  ls.proc.on('exit', (code, signal) => {
    if (stopping) return;
    console.error(`\nthe ${backend} language server (warm-up ${warmup ? 'on' : 'off'}) exited (${code ?? signal}); its last log lines:\n${ls.logs.slice(-8).join('\n')}`);
    process.exit(1);
  });
  await waitReady(ls);
  return {
    name: warmup ? 'warm-up' : 'none',
    warmup,
    ls,
    version: new Map(),
    async stop() {
      stopping = true;
      await ls.shutdown();
      if (llama) {
        llama.proc.kill('SIGTERM');
        await once(llama.proc, 'exit');
      }
    },
  };
}

// ---- events --------------------------------------------------------------------------------

/** Asks for a completion at (line, character); resolves with its text and milliseconds. */
async function complete(v: Variant, uri: string, line: number, character: number): Promise<{ text: string; ms: number }> {
  const t0 = performance.now();
  const list = await v.ls.complete(uri, line, character);
  const ms = performance.now() - t0;
  const t = list?.items[0]?.insertText;
  return { text: typeof t === 'string' ? t : (t?.value ?? ''), ms };
}

async function type(v: Variant, uri: string, line: number, character: number, text: string): Promise<number> {
  const version = (v.version.get(uri) ?? 1) + 1;
  v.version.set(uri, version);
  await v.ls.type(uri, version, line, character, text);
  return version;
}

/** Open a file, (warm-up), think, type a character, ask. */
async function openEvent(v: Variant, c: Cursor): Promise<number> {
  await v.ls.open(c.uri, 'typescript', c.text);
  v.version.set(c.uri, 1);
  if (v.warmup) await v.ls.connection.sendNotification(ContextDidChangeNotification.type, { uri: c.uri, version: 1, position: { line: c.line, character: c.character } });
  await sleep(THINK_MS);
  await type(v, c.uri, c.line, c.character, c.next);
  return (await complete(v, c.uri, c.line, c.character + 1)).ms;
}

/** In an opened file: ask, accept what was shown, (compute ahead), debounce, ask after it.
 * Undefined when nothing was shown to accept. */
async function acceptEvent(v: Variant, c: Cursor): Promise<number | undefined> {
  await type(v, c.uri, c.line, c.character + 1, ' ');
  const first = await complete(v, c.uri, c.line, c.character + 2);
  const accepted = first.text.split('\n')[0];
  if (!accepted) return undefined;
  const version = await type(v, c.uri, c.line, c.character + 2, accepted);
  const after = c.character + 2 + accepted.length;
  if (v.warmup) await v.ls.connection.sendNotification(CompletionDidAcceptNotification.type, { uri: c.uri, version, position: { line: c.line, character: after } });
  await sleep(DEBOUNCE_MS);
  return (await complete(v, c.uri, c.line, after)).ms;
}

// ---- report --------------------------------------------------------------------------------

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))];
}

interface Row {
  backend: string;
  scenario: 'open' | 'accept';
  variant: string;
  events: number;
  medianMs: number;
  p90Ms: number;
  samples: number[];
  warmup?: unknown;
}

async function bench(backend: 'local' | 'llama-server', files: string[]): Promise<Row[]> {
  const variants = [await variant(backend, false), await variant(backend, true)];
  const samples: Record<string, { open: number[]; accept: number[] }> = { none: { open: [], accept: [] }, 'warm-up': { open: [], accept: [] } };
  try {
    for (let i = 0, f = 0; samples.none.accept.length < EVENTS || samples['warm-up'].accept.length < EVENTS; i++, f++) {
      if (f >= files.length) throw new Error(`only ${files.length} source files; fewer events (--events)`);
      // Alternate which variant goes first, so drift in the machine's load falls on both.
      const order = i % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const c = cursorIn(files[f], `${backend}-${v.name}`);
        const s = samples[v.name];
        const open = await openEvent(v, c);
        if (s.open.length < EVENTS) s.open.push(open);
        const accept = await acceptEvent(v, c);
        if (accept !== undefined && s.accept.length < EVENTS) s.accept.push(accept);
        // A tab closed: the open files' snippets stay those of one file (as in quality.ts).
        await v.ls.connection.sendNotification(DidCloseTextDocumentNotification.type, { textDocument: { uri: c.uri } });
      }
      process.stdout.write('.');
    }
    const rows: Row[] = [];
    for (const v of variants) {
      const st = v.warmup ? (await v.ls.connection.sendRequest(StatusRequest.type)).warmup : undefined;
      for (const scenario of ['open', 'accept'] as const) {
        const xs = samples[v.name][scenario];
        rows.push({ backend, scenario, variant: v.name, events: xs.length, medianMs: quantile(xs, 0.5), p90Ms: quantile(xs, 0.9), samples: xs, ...(st ? { warmup: st } : {}) });
      }
    }
    return rows;
  } finally {
    for (const v of variants) await v.stop();
  }
}

async function main(): Promise<void> {
  const files = sources();
  const load0 = os.loadavg()[0];
  const rows: Row[] = [];
  const backends = BACKENDS.filter((b) => b === 'local' || (LLAMA && GGUF));
  if (BACKENDS.includes('llama-server') && !(LLAMA && GGUF)) console.log('llama-server: skipped (give --llama-server PATH --gguf FILE)');
  for (const b of backends) {
    console.log(`${b}: ${EVENTS} events per scenario and variant`);
    rows.push(...(await bench(b, files)));
    console.log('');
    write(rows, load0);
  }
  const load1 = os.loadavg()[0];
  console.log(`\ntime to the first ghost text (the completion request, sent to answered), ms; think ${THINK_MS} ms, debounce ${DEBOUNCE_MS} ms, ${THREADS} thread(s)`);
  console.log('backend       scenario  variant   events  median     p90');
  for (const r of rows) console.log(`${r.backend.padEnd(13)} ${r.scenario.padEnd(9)} ${r.variant.padEnd(9)} ${String(r.events).padStart(6)} ${r.medianMs.toFixed(0).padStart(7)} ${r.p90Ms.toFixed(0).padStart(7)}`);
  for (const r of rows) if (r.warmup && r.scenario === 'open') console.log(`${r.backend} warm-up counts: ${JSON.stringify(r.warmup)}`);
  console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores; 1-minute load ${load0.toFixed(2)} before, ${load1.toFixed(2)} after`);
  write(rows, load0, load1);
}

/** out/bench/warm.json, rewritten after each backend so a later failure keeps the earlier rows. */
function write(rows: Row[], load0: number, load1?: number): void {
  const out = path.join(repoRoot, 'out/bench');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(
    path.join(out, 'warm.json'),
    JSON.stringify({ model: MODEL, gguf: GGUF || undefined, events: EVENTS, thinkMs: THINK_MS, debounceMs: DEBOUNCE_MS, threads: THREADS, load: [load0, load1 ?? os.loadavg()[0]], rows }, null, 2),
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
