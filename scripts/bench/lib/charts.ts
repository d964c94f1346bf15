// charts.ts - what the benchmarks draw, and the figures each chart is drawn from: speed
// (prefill and decode in tokens per second, k3 beside llama.cpp where it was measured and
// beside the machine's bound), the forecast check (each configuration's forecast error in
// one or more runs, against the tolerance) and the kernels' streaming rate against the
// memory triad. The benchmarks write the figures as JSON
// and the chart as SVG beside their own JSON; scripts/doc-charts.ts draws the committed
// figures under docs/images/ the same way. Drawing itself is scripts/bench/lib/svg.ts.
import { chart, shortNumber, type Panel } from './svg';

/** One engine configuration's speeds, tokens per second. A bound is what the machine allows
 * that configuration: prefill at the f32 multiply-add peak, decode at the memory triad over
 * the weight bytes a token streams. */
export interface SpeedRow {
  label: string;
  k3_prefill: number;
  prefill_bound: number;
  k3_decode: number;
  decode_bound: number;
  llama_prefill?: number;
  llama_decode?: number;
}

export interface SpeedFigures {
  kind: 'speed';
  /** What was measured, when, on which commit and machine: the chart's heading. */
  title: string;
  rows: SpeedRow[];
}

/** The forecast's error (forecast / measured - 1) per configuration, one row per run. */
export interface ForecastFigures {
  kind: 'forecast';
  title: string;
  /** The error a configuration must stay within to count as held, e.g. 0.15. */
  tolerance: number;
  configs: string[];
  runs: { name: string; errors: (number | null)[] }[];
}

/** Weight bytes streamed per second against the memory triad measured beside them, in
 * panels (one per thread and token count, say), a row per kernel. */
export interface BandwidthFigures {
  kind: 'bandwidth';
  title: string;
  panels: { title: string; rows: { label: string; rate: number; bound: number }[] }[];
}

export type ChartFigures = SpeedFigures | ForecastFigures | BandwidthFigures;

/** What `k3 bench --out` writes that the speed chart uses. */
export interface BenchSpeed {
  threads: number;
  prefill_tokens_per_s: number;
  /** Prefill's multiply-add rate over the peak measured just before it. */
  prefill_over_peak: number;
  decode_tokens_per_s: number;
  /** The median round's triad over the weight bytes a decoded token streams. */
  bound_tokens_per_s: number;
}

/** The speed figures of `k3 bench` runs, one row per run. */
export function benchSpeedFigures(title: string, runs: BenchSpeed[], llama: { prefill: number; decode: number }[] = []): SpeedFigures {
  return {
    kind: 'speed',
    title,
    rows: runs.map((r, i) => ({
      label: `${r.threads} thread${r.threads > 1 ? 's' : ''}`,
      ...(llama[i] ? { llama_prefill: llama[i].prefill, llama_decode: llama[i].decode } : {}),
      k3_prefill: r.prefill_tokens_per_s,
      prefill_bound: r.prefill_over_peak > 0 ? r.prefill_tokens_per_s / r.prefill_over_peak : 0,
      k3_decode: r.decode_tokens_per_s,
      decode_bound: r.bound_tokens_per_s,
    })),
  };
}

const K3 = '#1f77b4';
const LLAMA = '#ff7f0e';
const BOUND = '#c7c7c7';
const RUNS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];

function speedPanel(figures: SpeedFigures, what: 'prefill' | 'decode', title: string): Panel {
  const rows = figures.rows;
  const withLlama = rows.some((r) => (what === 'prefill' ? r.llama_prefill : r.llama_decode) !== undefined);
  return {
    title,
    unit: 'tokens/s',
    categories: rows.map((r) => r.label),
    series: [
      ...(withLlama ? [{ name: 'llama.cpp', color: LLAMA, mark: 'bar' as const, labels: true, values: rows.map((r) => (what === 'prefill' ? r.llama_prefill : r.llama_decode) ?? null) }] : []),
      { name: 'k3', color: K3, mark: 'bar', labels: true, values: rows.map((r) => (what === 'prefill' ? r.k3_prefill : r.k3_decode)) },
      { name: what === 'prefill' ? "machine's bound (multiply-add peak)" : "machine's bound (memory triad / bytes per token)", color: BOUND, mark: 'bar', labels: true, values: rows.map((r) => (what === 'prefill' ? r.prefill_bound : r.decode_bound)) },
    ],
    format: (v) => shortNumber(v),
  };
}

function forecastPanel(figures: ForecastFigures): Panel {
  return {
    title: figures.title,
    unit: 'forecast error against the measured mean pass, %',
    categories: figures.configs,
    band: { from: -100 * figures.tolerance, to: 100 * figures.tolerance, name: `within ${Math.round(100 * figures.tolerance)} %` },
    series: figures.runs.map((run, i) => ({
      name: run.name,
      color: RUNS[i % RUNS.length],
      mark: 'dot' as const,
      values: run.errors.map((e) => (e === null ? null : 100 * e)),
    })),
    format: (v) => `${v > 0 ? '+' : ''}${shortNumber(v)}`,
  };
}

function bandwidthPanel(title: string, rows: BandwidthFigures['panels'][number]['rows']): Panel {
  return {
    title,
    unit: 'GB/s of weights',
    categories: rows.map((r) => r.label),
    series: [
      { name: 'k3 kernel', color: K3, mark: 'bar', labels: true, values: rows.map((r) => r.rate / 1e9) },
      { name: "machine's bound (memory triad)", color: BOUND, mark: 'bar', labels: true, values: rows.map((r) => r.bound / 1e9) },
    ],
  };
}

/** The SVG of a figures file, whichever kind it is. */
export function drawFigures(figures: ChartFigures): string {
  switch (figures.kind) {
    case 'speed':
      return chart([speedPanel(figures, 'prefill', `Prefill, ${figures.title}`), speedPanel(figures, 'decode', `Decode, ${figures.title}`)]);
    case 'forecast':
      return chart([forecastPanel(figures)]);
    case 'bandwidth':
      return chart(figures.panels.map((p) => bandwidthPanel(`${figures.title}: ${p.title}`, p.rows)));
  }
}

/** Parses a figures file, saying which field is wrong. */
export function parseFigures(json: unknown, file: string): ChartFigures {
  type Loose = {
    kind?: unknown;
    title?: unknown;
    tolerance?: unknown;
    configs?: unknown;
    rows?: Record<string, unknown>[];
    runs?: { errors?: unknown }[];
    panels?: { title?: unknown; rows?: Record<string, unknown>[] }[];
  };
  const f = json as Loose;
  const fail = (what: string) => new Error(`${file}: ${what}`);
  if (typeof f !== 'object' || f === null) throw fail('not a JSON object');
  if (typeof f.title !== 'string') throw fail('"title" must be a string');
  if (f.kind === 'speed') {
    if (!Array.isArray(f.rows) || f.rows.length === 0) throw fail('"rows" must be a non-empty array');
    f.rows.forEach((r, i) => {
      for (const key of ['k3_prefill', 'prefill_bound', 'k3_decode', 'decode_bound'])
        if (typeof r[key] !== 'number' || !((r[key] as number) >= 0)) throw fail(`rows[${i}].${key} must be a number >= 0, found ${JSON.stringify(r[key])}`);
      if (typeof r.label !== 'string') throw fail(`rows[${i}].label must be a string`);
    });
    return f as unknown as SpeedFigures;
  }
  if (f.kind === 'forecast') {
    if (!Array.isArray(f.configs)) throw fail('"configs" must be an array');
    if (typeof f.tolerance !== 'number' || !(f.tolerance > 0)) throw fail(`"tolerance" must be a number > 0, found ${JSON.stringify(f.tolerance)}`);
    if (!Array.isArray(f.runs)) throw fail('"runs" must be an array');
    f.runs.forEach((r, i) => {
      if (!Array.isArray(r.errors) || r.errors.length !== (f.configs as string[]).length)
        throw fail(`runs[${i}].errors has ${Array.isArray(r.errors) ? r.errors.length : 'no'} entries for ${(f.configs as string[]).length} configs`);
    });
    return f as unknown as ForecastFigures;
  }
  if (f.kind === 'bandwidth') {
    if (!Array.isArray(f.panels) || f.panels.length === 0) throw fail('"panels" must be a non-empty array');
    f.panels.forEach((p, i) => {
      if (!Array.isArray(p.rows)) throw fail(`panels[${i}].rows must be an array`);
      p.rows.forEach((r, j) => {
        for (const key of ['rate', 'bound'])
          if (typeof r[key] !== 'number' || !((r[key] as number) >= 0)) throw fail(`panels[${i}].rows[${j}].${key} must be a number >= 0, found ${JSON.stringify(r[key])}`);
      });
    });
    return f as unknown as BandwidthFigures;
  }
  throw fail(`"kind" must be "speed", "forecast" or "bandwidth", found ${JSON.stringify(f.kind)}`);
}
