// kernels.ts - the kernel benchmark of `npm run bench`: `k3 bench-kernels` (one token's 16
// routed experts in MXFP4 and three 7168 x 7168 bf16 projections, K3's released shapes,
// streamed from memory by every kernel implementation this CPU runs, each round after a
// memory-bandwidth triad in the same process) for one token on 1 and 2 threads and for 4
// tokens (a prefill's or a verification's few tokens per expert) on 2, side by side;
// written to out/bench/kernels.json, with a chart of each kernel's rate against the triad
// beside it (kernels.svg, from kernels-chart.json).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { k3Cli, repoRoot } from '../../test/support/paths';
import { drawFigures, type BandwidthFigures } from './lib/charts';

interface Round {
  seconds: number;
  triad_bytes_per_s: number;
}

interface Row {
  kernels: string;
  weights: string;
  bytes: number;
  rounds: Round[];
}

interface Result {
  threads: number;
  tokens: number;
  load_average: number[];
  rows: Row[];
}

const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const outDir = path.join(repoRoot, 'out/bench');
fs.mkdirSync(outDir, { recursive: true });
const shapes = [
  { threads: 1, tokens: 1 },
  { threads: 2, tokens: 1 },
  { threads: 2, tokens: 4 },
];
const results: Result[] = shapes.map(({ threads, tokens }) => {
  const json = path.join(outDir, `kernels-${threads}t-${tokens}.json`);
  execFileSync(k3Cli, ['bench-kernels', '--threads', String(threads), '--tokens', String(tokens), '--out', json], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return JSON.parse(fs.readFileSync(json, 'utf8')) as Result;
});

console.log(`\nkernels on K3's shapes, from memory (GB/s of weights, median round; share of the triad just before each round)`);
const heads = results.map((r) => `${r.threads}T ${r.tokens} tok`);
console.log(`${''.padEnd(24)}${heads.map((h) => h.padStart(22)).join('')}`);
for (const [i, row] of results[0].rows.entries()) {
  const cells = results.map((r) => {
    const x = r.rows[i];
    const rate = median(x.rounds.map((q) => x.bytes / q.seconds));
    const share = median(x.rounds.map((q) => x.bytes / q.seconds / q.triad_bytes_per_s));
    return `${(rate / 1e9).toFixed(1)} (${(100 * share).toFixed(0)} %)`;
  });
  console.log(`${`${row.kernels} ${row.weights}`.padEnd(24)}${cells.map((c) => c.padStart(22)).join('')}`);
}
console.log(`load average: ${results.map((r) => r.load_average.join(' ')).join(' | ')}`);
fs.writeFileSync(path.join(outDir, 'kernels.json'), JSON.stringify({ results }, null, 2) + '\n');

const figures: BandwidthFigures = {
  kind: 'bandwidth',
  title: `k3 bench-kernels, ${new Date().toISOString().slice(0, 10)}`,
  panels: results.map((r) => ({
    title: `${r.threads} thread${r.threads > 1 ? 's' : ''}, ${r.tokens} token${r.tokens > 1 ? 's' : ''}`,
    rows: r.rows.map((x) => ({
      label: `${x.kernels} ${x.weights}`,
      rate: median(x.rounds.map((q) => x.bytes / q.seconds)),
      bound: median(x.rounds.map((q) => q.triad_bytes_per_s)),
    })),
  })),
};
fs.writeFileSync(path.join(outDir, 'kernels-chart.json'), JSON.stringify(figures, null, 2) + '\n');
fs.writeFileSync(path.join(outDir, 'kernels.svg'), drawFigures(figures));
