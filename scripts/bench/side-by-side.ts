// side-by-side.ts - k3 against llama.cpp on the same checkpoint, in alternating pairs: for
// each thread count, PAIRS times llama-bench (prefill of P tokens, then decode of G) and
// then `k3 bench` (the same P and G), so that whatever the machine does in those minutes
// hits both engines alike. Prints every pair and the medians (a ratio is the median of the
// pairs' ratios, not the ratio of the medians) with the 1-minute load at the start and the
// end, and writes side-by-side.json, the chart's figures and side-by-side.svg to --out.
//
//   node scripts/run-ts.mjs scripts/bench/side-by-side.ts --llama-bin LLAMA_BUILD/bin \
//     --gguf small-bf16.gguf --model FIXTURE_DIR [--pairs 3] [--threads 1,2]
//     [--prompt-tokens 128] [--gen 64] [--out out/bench/side-by-side]
//
// The GGUF is the k3 checkpoint converted by llama.cpp's own converter (docs/PERFORMANCE.md
// says how); neither engine is built here. Not run by `npm run bench`: it needs them both.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { k3Cli, repoRoot } from '../../test/support/paths';
import { benchSpeedFigures, drawFigures, type BenchSpeed } from './lib/charts';
import { median } from './lib/scale-profile';

const USAGE = 'usage: side-by-side.ts --llama-bin DIR --gguf FILE --model DIR [--pairs N] [--threads 1,2] [--prompt-tokens N] [--gen N] [--out DIR]';

function options(argv: string[]) {
  const o: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)$/.exec(argv[i]);
    if (!m || i + 1 >= argv.length) throw new Error(`${argv[i]}: expected --name VALUE\n${USAGE}`);
    o[m[1]] = argv[++i];
  }
  const known = ['llama-bin', 'gguf', 'model', 'pairs', 'threads', 'prompt-tokens', 'gen', 'out'];
  for (const k of Object.keys(o)) if (!known.includes(k)) throw new Error(`--${k}: unknown option\n${USAGE}`);
  const count = (name: string, fallback: number) => {
    const v = Number(o[name] ?? fallback);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} ${o[name]}: give a whole number >= 1`);
    return v;
  };
  for (const k of ['llama-bin', 'gguf', 'model']) if (!o[k]) throw new Error(`--${k} is required\n${USAGE}`);
  const llamaBench = path.join(o['llama-bin'], 'llama-bench');
  if (!fs.existsSync(llamaBench)) throw new Error(`--llama-bin ${o['llama-bin']}: no llama-bench in it`);
  if (!fs.existsSync(o.gguf)) throw new Error(`--gguf ${o.gguf}: no such file`);
  if (!fs.existsSync(path.join(o.model, 'config.json'))) throw new Error(`--model ${o.model}: no config.json in it`);
  const threads = (o.threads ?? '1,2').split(',').map(Number);
  if (threads.some((t) => !Number.isInteger(t) || t < 1)) throw new Error(`--threads ${o.threads}: give whole numbers >= 1, comma-separated`);
  return {
    llamaBench,
    gguf: o.gguf,
    model: o.model,
    pairs: count('pairs', 3),
    threads,
    prompt: count('prompt-tokens', 128),
    gen: count('gen', 64),
    out: path.resolve(o.out ?? path.join(repoRoot, 'out/bench/side-by-side')),
  };
}

interface LlamaRow {
  n_prompt: number;
  n_gen: number;
  avg_ts: number;
}

interface Pair {
  threads: number;
  llama_prefill: number;
  llama_decode: number;
  k3: BenchSpeed;
}

const load = () => os.loadavg()[0].toFixed(2);

let o: ReturnType<typeof options>;
try {
  o = options(process.argv.slice(2));
} catch (e) {
  console.error((e as Error).message);
  process.exit(2);
}
fs.mkdirSync(o.out, { recursive: true });
const loadStart = load();
console.log(`side by side: ${path.basename(o.gguf)} (llama.cpp) and ${path.basename(o.model)} (k3), prefill ${o.prompt}, decode ${o.gen}, ${o.pairs} pairs per thread count; load at start ${loadStart}`);

/** A tool's stdout; on failure the command line and the end of its stderr, and exit 1. */
function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status === 0) return r.stdout;
  console.error(`side-by-side: ${[cmd, ...args].join(' ')} failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`})`);
  console.error((r.stderr ?? '').trim().split('\n').slice(-8).join('\n'));
  process.exit(1);
}

const pairs: Pair[] = [];
for (const threads of o.threads) {
  for (let i = 1; i <= o.pairs; i++) {
    const llama = JSON.parse(run(o.llamaBench, ['-m', o.gguf, '-p', String(o.prompt), '-n', String(o.gen), '-r', '1', '-t', String(threads), '-o', 'json'])) as LlamaRow[];
    const prefill = llama.find((r) => r.n_prompt > 0 && r.n_gen === 0);
    const decode = llama.find((r) => r.n_gen > 0 && r.n_prompt === 0);
    if (!prefill || !decode) throw new Error(`llama-bench gave no prefill-only or decode-only row: ${JSON.stringify(llama)}`);
    const json = path.join(o.out, `k3-${threads}t-${i}.json`);
    run(k3Cli, ['bench', o.model, '--threads', String(threads), '--prompt-tokens', String(o.prompt), '--gen', String(o.gen), '--out', json]);
    const k3 = JSON.parse(fs.readFileSync(json, 'utf8')) as BenchSpeed;
    pairs.push({ threads, llama_prefill: prefill.avg_ts, llama_decode: decode.avg_ts, k3 });
    const p = pairs[pairs.length - 1];
    console.log(
      `  ${threads}T pair ${i}: prefill llama.cpp ${p.llama_prefill.toFixed(1)}, k3 ${k3.prefill_tokens_per_s.toFixed(1)} (${(k3.prefill_tokens_per_s / p.llama_prefill).toFixed(2)}x); ` +
        `decode llama.cpp ${p.llama_decode.toFixed(1)}, k3 ${k3.decode_tokens_per_s.toFixed(1)} (${(k3.decode_tokens_per_s / p.llama_decode).toFixed(2)}x)`,
    );
  }
}
const loadEnd = load();

const summary = o.threads.map((threads) => {
  const mine = pairs.filter((p) => p.threads === threads);
  const m = (f: (p: Pair) => number) => median(mine.map(f));
  return {
    threads,
    llama_prefill: m((p) => p.llama_prefill),
    k3_prefill: m((p) => p.k3.prefill_tokens_per_s),
    prefill_ratio: m((p) => p.k3.prefill_tokens_per_s / p.llama_prefill),
    prefill_over_peak: m((p) => p.k3.prefill_over_peak),
    llama_decode: m((p) => p.llama_decode),
    k3_decode: m((p) => p.k3.decode_tokens_per_s),
    decode_ratio: m((p) => p.k3.decode_tokens_per_s / p.llama_decode),
    decode_bound: m((p) => p.k3.bound_tokens_per_s),
  };
});
console.log(`medians (load at end ${loadEnd}):`);
for (const s of summary)
  console.log(
    `  ${s.threads}T: prefill ${s.llama_prefill.toFixed(1)} / ${s.k3_prefill.toFixed(1)} = ${s.prefill_ratio.toFixed(2)}x (k3 at ${(100 * s.prefill_over_peak).toFixed(0)} % of the multiply-add peak); ` +
      `decode ${s.llama_decode.toFixed(1)} / ${s.k3_decode.toFixed(1)} = ${s.decode_ratio.toFixed(2)}x (k3 at ${((100 * s.k3_decode) / s.decode_bound).toFixed(0)} % of the memory bound)`,
  );

const figures = benchSpeedFigures(
  `${path.basename(o.model)}, ${new Date().toISOString().slice(0, 10)}, load ${loadStart} -> ${loadEnd}`,
  summary.map((s) => ({ threads: s.threads, prefill_tokens_per_s: s.k3_prefill, prefill_over_peak: s.prefill_over_peak, decode_tokens_per_s: s.k3_decode, bound_tokens_per_s: s.decode_bound })),
  summary.map((s) => ({ prefill: s.llama_prefill, decode: s.llama_decode })),
);
fs.writeFileSync(path.join(o.out, 'side-by-side.json'), JSON.stringify({ gguf: o.gguf, model: o.model, prompt_tokens: o.prompt, gen: o.gen, load: [loadStart, loadEnd], pairs, summary }, null, 2) + '\n');
fs.writeFileSync(path.join(o.out, 'side-by-side-chart.json'), JSON.stringify(figures, null, 2) + '\n');
fs.writeFileSync(path.join(o.out, 'side-by-side.svg'), drawFigures(figures));
console.log(`written: side-by-side.json, side-by-side-chart.json and side-by-side.svg in ${o.out}`);
