// soak.ts - the soak benchmark of `npm run bench` (`npm run bench -- soak` alone): the
// language server on the embedded default model under an hour of editing compressed into
// minutes. Each round: a burst of completion requests that supersede each other, a run of
// typing with a completion after each keystroke, a 5 MB document opened, edited, completed
// and closed, and a chat turn; every fifth round the model is loaded again. After each round
// it prints the server's resident set (VmRSS), its high-water mark and its open file
// descriptors, read from /proc, and at the end whether the resident set levelled off: the
// median of the last quarter of the rounds against the second quarter's. Writes
// out/bench/soak.json. K3_SOAK_ROUNDS sets the rounds (default 24). Timing and memory live
// here, never in tests.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChatSendRequest, ModelLoadRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, waitReady } from '../../test/support/lsp';
import { repoRoot } from '../../test/support/paths';

const ROUNDS = Number(process.env.K3_SOAK_ROUNDS ?? 24);
const BURST = 40;
const KEYSTROKES = 60;
const BIG_BYTES = 5 << 20;
const model = path.join(repoRoot, 'media/models/k3-mini');

interface Round {
  round: number;
  rssMB: number;
  hwmMB: number;
  fds: number;
  seconds: number;
  completions: number;
  superseded: number;
  chatTokens: number;
  reloaded: boolean;
}

function procStatus(pid: number): { rssMB: number; hwmMB: number } {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB$`, 'm').exec(s)?.[1] ?? NaN);
  return { rssMB: kb('VmRSS') / 1024, hwmMB: kb('VmHWM') / 1024 };
}

const fds = (pid: number): number => fs.readdirSync(`/proc/${pid}/fd`).length;

/** A Python file of about `bytes` bytes: many small functions, as a generated module is. */
function bigSource(bytes: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = `def f${i}(x, y):\n    return x * ${i % 97} + y - ${i % 13}\n\n`;
    lines.push(line);
    size += line.length;
  }
  return lines.join('');
}

async function round(server: ServerHandle, r: number, big: string): Promise<Omit<Round, 'rssMB' | 'hwmMB' | 'fds' | 'seconds'>> {
  const c = server.connection;
  let completions = 0;
  let superseded = 0;
  const settle = async (p: Promise<unknown>): Promise<void> => {
    try {
      await p;
      completions++;
    } catch {
      superseded++;
    }
  };

  // A burst: requests fired without waiting, each superseding the one before.
  const burstUri = `file:///soak/burst${r % 3}.py`;
  await server.open(burstUri, 'python', `import os\n\ndef handler_${r}(event):\n    path = os.path.join(`);
  await Promise.all(Array.from({ length: BURST }, (_, i) => settle(server.complete(burstUri, 3, 24 - (i % 5)))));

  // Typing: a keystroke, then a completion, as an editor asks after each pause.
  const typeUri = `file:///soak/typing${r % 4}.ts`;
  let text = `export function total${r}(items: number[]): number {\n  let sum = 0;\n  `;
  await server.open(typeUri, 'typescript', text);
  const typed = 'for (const item of items) { sum += item * 2; }\n  return sum;\n}\n';
  let version = 1;
  let line = 2;
  let character = 2;
  for (const ch of typed.slice(0, KEYSTROKES)) {
    await server.type(typeUri, ++version, line, character, ch);
    text += ch;
    if (ch === '\n') {
      line++;
      character = 0;
    } else character++;
    await settle(server.complete(typeUri, line, character));
  }
  await c.sendNotification('textDocument/didClose', { textDocument: { uri: typeUri } });

  // A 5 MB document: opened, edited at its end, completed there, closed.
  const bigUri = `file:///soak/generated${r}.py`;
  await server.open(bigUri, 'python', big);
  const lastLine = big.split('\n').length - 1;
  await server.type(bigUri, 2, lastLine, 0, `def tail_${r}(x):\n    return `);
  await settle(server.complete(bigUri, lastLine + 1, 11));
  await c.sendNotification('textDocument/didClose', { textDocument: { uri: bigUri } });
  await c.sendNotification('textDocument/didClose', { textDocument: { uri: burstUri } });

  // A chat turn, in one of a few conversations that grow.
  const reply = await c.sendRequest(ChatSendRequest.type, { message: `Round ${r}: what does total() return?`, maxTokens: 24 });

  // A model reload now and then (a preset change, a restart of the engine).
  const reloaded = r % 5 === 4;
  if (reloaded) await c.sendRequest(ModelLoadRequest.type, { modelPath: model });
  return { round: r, completions, superseded, chatTokens: reply.stats.generatedTokens, reloaded };
}

async function main(): Promise<void> {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-soak-'));
  const server = await startServer({ modelPath: model, storagePath: storage, settings: { engine: { threads: 1 } } });
  const big = bigSource(BIG_BYTES);
  const rounds: Round[] = [];
  try {
    await waitReady(server);
    const pid = server.proc.pid!;
    const start = procStatus(pid);
    console.log(`\nsoak: the language server on k3-mini, ${ROUNDS} rounds (load ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores)`);
    console.log(`  after load: VmRSS ${start.rssMB.toFixed(1)} MB, fds ${fds(pid)}`);
    console.log('  round   VmRSS MB   VmHWM MB   fds   seconds   completions  superseded  chat tokens  reload');
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = Date.now();
      const done = await round(server, r, big);
      const m = procStatus(pid);
      const row: Round = { ...done, ...m, fds: fds(pid), seconds: (Date.now() - t0) / 1000 };
      rounds.push(row);
      console.log(
        `  ${String(r).padStart(5)} ${row.rssMB.toFixed(1).padStart(10)} ${row.hwmMB.toFixed(1).padStart(10)} ${String(row.fds).padStart(5)} ${row.seconds.toFixed(1).padStart(9)} ${String(row.completions).padStart(13)} ${String(row.superseded).padStart(11)} ${String(row.chatTokens).padStart(12)}  ${row.reloaded ? 'yes' : ''}`,
      );
    }
  } finally {
    await server.shutdown();
    fs.rmSync(storage, { recursive: true, force: true });
  }

  // Levelled off: the JS heap's collections make VmRSS swing by tens of MB from round to
  // round, so halves are compared by their medians: the last quarter's median may exceed the
  // second quarter's by at most a tenth plus 8 MB, and the fds must not grow.
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const q = Math.max(1, Math.floor(rounds.length / 4));
  const second = median(rounds.slice(q, 2 * q).map((x) => x.rssMB));
  const last = median(rounds.slice(rounds.length - q).map((x) => x.rssMB));
  const level = last <= second * 1.1 + 8 && rounds[rounds.length - 1].fds <= rounds[q].fds;
  console.log(
    `  VmRSS median ${second.toFixed(1)} MB over rounds ${q}..${2 * q - 1}, ${last.toFixed(1)} MB over the last ${q}; ` +
      `peak ${Math.max(...rounds.map((x) => x.hwmMB)).toFixed(1)} MB; fds ${rounds[q].fds} -> ${rounds[rounds.length - 1].fds}: ` +
      `${level ? 'levelled off' : 'STILL GROWING'}`,
  );
  const outDir = path.join(repoRoot, 'out/bench');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'soak.json'), JSON.stringify({ model: 'k3-mini', rounds, level }, null, 2) + '\n');
  if (!level) process.exitCode = 1;
}

void main();
