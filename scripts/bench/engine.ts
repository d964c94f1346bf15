// engine.ts - the engine benchmark of `npm run bench`: on the `small` fixture, the k3 CLI's
// `bench` command (the f32 multiply-add peak and prefill against it, then rounds of a
// memory-bandwidth triad each followed by a stretch of decode, in the same process) with
// 1 and 2 threads, printed side by side and written to out/bench/engine.json, with a chart of
// prefill and decode against the machine's bounds beside it (engine.svg, from the figures in
// engine-chart.json). Timing lives here, never in tests.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ensureFixture } from '../../test/support/fixtures';
import { benchSpeedFigures, drawFigures } from './lib/charts';
import { k3Cli, repoRoot } from '../../test/support/paths';

interface Round {
  bandwidth_bytes_per_s: number;
  decode_tokens_per_s: number;
  achieved_over_bound: number;
}

interface LayerKind {
  kind: string;
  layers: number;
  prefill_time_share: number;
  prefill_over_peak: number;
  decode_time_share: number;
  decode_weight_bytes_per_token: number;
  decode_over_bound: number;
}

interface BenchResult {
  threads: number;
  bandwidth_bytes_per_s: number;
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
  weight_bytes_per_token: number;
  bound_tokens_per_s: number;
  achieved_over_bound: number;
  peak_rss_bytes: number;
  mapped_file_resident_bytes: number;
  mapped_file_huge_page_bytes: number;
  kernels: string;
  fma_peak_flops_per_s: number;
  prefill_flops_per_s: number;
  prefill_over_peak: number;
  rounds: Round[];
  layer_kinds: LayerKind[];
}

const range = (values: number[], digits: number) =>
  `${Math.min(...values).toFixed(digits)}..${Math.max(...values).toFixed(digits)}`;
/* Decode over the whole run against the fastest triad of any round: the harshest reading,
 * printed next to the median round so neither hides the machine's drift. */
const againstPeak = (r: BenchResult) =>
  (r.decode_tokens_per_s * r.weight_bytes_per_token) / Math.max(...r.rounds.map((x) => x.bandwidth_bytes_per_s));

const outDir = path.join(repoRoot, 'out/bench');
fs.mkdirSync(outDir, { recursive: true });
const model = ensureFixture({ size: 'small' });
const results: BenchResult[] = [];
for (const threads of [1, 2]) {
  const json = path.join(outDir, `engine-${threads}.json`);
  execFileSync(k3Cli, ['bench', model, '--threads', String(threads), '--prompt-tokens', '128', '--gen', '256', '--out', json], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  results.push(JSON.parse(fs.readFileSync(json, 'utf8')) as BenchResult);
}

const rows: [string, (r: BenchResult) => string][] = [
  ['memory bandwidth (triad, median), GB/s', (r) => (r.bandwidth_bytes_per_s / 1e9).toFixed(2)],
  ['  triad, rounds, GB/s', (r) => range(r.rounds.map((x) => x.bandwidth_bytes_per_s / 1e9), 1)],
  ['prefill, tokens/s', (r) => r.prefill_tokens_per_s.toFixed(1)],
  ['prefill compute, GFLOP/s', (r) => (r.prefill_flops_per_s / 1e9).toFixed(1)],
  ['f32 multiply-add peak, GFLOP/s', (r) => `${(r.fma_peak_flops_per_s / 1e9).toFixed(1)} ${r.kernels}`],
  ['prefill / peak', (r) => `${(100 * r.prefill_over_peak).toFixed(1)} %`],
  ['decode, tokens/s', (r) => r.decode_tokens_per_s.toFixed(2)],
  ['weight MB per decoded token', (r) => (r.weight_bytes_per_token / 1e6).toFixed(1)],
  ['bandwidth-bound decode, tokens/s', (r) => r.bound_tokens_per_s.toFixed(2)],
  ['achieved / bound (median round)', (r) => `${(100 * r.achieved_over_bound).toFixed(1)} %`],
  ['  rounds, %', (r) => range(r.rounds.map((x) => 100 * x.achieved_over_bound), 0)],
  ['  whole run / fastest triad', (r) => `${(100 * againstPeak(r)).toFixed(1)} %`],
  ['peak RSS, MB (measured, no triad)', (r) => (r.peak_rss_bytes / 1e6).toFixed(0)],
  // Decode reads 4 kB pages slower than 2 MB ones (docs/PERFORMANCE.md): say which it had.
  ['  mapped weights in 2 MB pages, MB', (r) => `${(r.mapped_file_huge_page_bytes / 1e6).toFixed(0)} of ${(r.mapped_file_resident_bytes / 1e6).toFixed(0)}`],
];
/* Per layer kind (k3 bench's observer): where each phase's time goes and how close each kind
 * comes to its bound, so the next gap shows without a profiler. */
const pct = (v: number) => `${(100 * v).toFixed(1)} %`;
const kindOf = (r: BenchResult, kind: string) => r.layer_kinds.find((k) => k.kind === kind);
for (const kind of results[0].layer_kinds.map((k) => k.kind)) {
  const cell = (f: (k: LayerKind) => string) => (r: BenchResult) => {
    const k = kindOf(r, kind);
    return k ? f(k) : '-';
  };
  rows.push(
    [`${kind} (${kindOf(results[0], kind)!.layers}): prefill time / of peak`, cell((k) => `${pct(k.prefill_time_share)} / ${pct(k.prefill_over_peak)}`)],
    [`  decode time / of triad`, cell((k) => `${pct(k.decode_time_share)} / ${pct(k.decode_over_bound)}`)],
  );
}
console.log(`\nengine on the small fixture (${path.basename(model)})`);
console.log(`${''.padEnd(40)}${results.map((r) => `${r.threads} thread${r.threads > 1 ? 's' : ''}`.padStart(18)).join('')}`);
for (const [label, cell] of rows) console.log(`${label.padEnd(40)}${results.map((r) => cell(r).padStart(18)).join('')}`);
fs.writeFileSync(path.join(outDir, 'engine.json'), JSON.stringify({ model: 'small', results }, null, 2) + '\n');

const figures = benchSpeedFigures(`k3 bench on the small fixture, ${new Date().toISOString().slice(0, 10)}`, results);
fs.writeFileSync(path.join(outDir, 'engine-chart.json'), JSON.stringify(figures, null, 2) + '\n');
fs.writeFileSync(path.join(outDir, 'engine.svg'), drawFigures(figures));
