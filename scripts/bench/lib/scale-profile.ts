// scale-profile.ts - reads `k3 bench-scale` JSON and turns it into the figures of
// docs/SCALE.md and the machine profile the engine forecasts from (its format is specified
// at the top of native/src/forecast.h). Pure functions: the bench (scripts/bench/scale.ts)
// runs the engine, this file only does arithmetic, and test/bench/scale-profile.test.ts
// checks it on hand-made runs.
import type { MemoryReport } from './memory-report';

/** One layer of one pass, as cmd_scale.c writes it. */
export type LayerRecord = [
  mixerSeconds: number,
  ffnSeconds: number,
  mixerBytes: number,
  ffnBytes: number,
  trunkWait: number,
  expertWait: number,
  expertRequests: number,
  expertBytesRead: number,
];

export interface Pass {
  seconds: number;
  cpu_s: number;
  embed_s: number;
  head_s: number;
  head_bytes: number;
  bandwidth: number;
  /** What the readers did during the pass: expert bytes, their reader-seconds inside pread,
   * trunk bytes, their seconds (runs before these were recorded have none). */
  reads?: [number, number, number, number];
  layers: LayerRecord[];
}

export interface DiskProbe {
  block: number;
  readers: number;
  bytes: number;
  seconds: number;
  read_seconds: number;
  cpu_seconds: number;
}

export interface ScaleRun {
  model: string;
  threads: number;
  io_threads: number;
  repeat: number;
  cold_each_token: number;
  load_average: number[];
  peak_rss_bytes: number;
  open_seconds: number;
  layers: { mixer: string; ffn: string }[];
  steps: Pass[];
  prefill: PrefillRecord | null;
  verify: { positions: number; pass: Pass }[];
  disk_sequential: DiskProbe[];
  disk_random: DiskProbe[];
  disk_mixed: DiskProbe[];
  /** The probes again after the steps (--disk-after), else empty. */
  disk_sequential_after: DiskProbe[];
  disk_random_after: DiskProbe[];
  disk_mixed_after: DiskProbe[];
  /** The triad alone and while expert-sized reads run beside it, and (--repeat) the steps
   * again beside such reads (--beside-reads). */
  beside_reads: { triad_alone: number; triad_reading: number; triad_read_bytes_per_s: number; steps_read_bytes_per_s: number; steps: number[] } | null;
  /** The run's memory report (`scale` reads the budgets, the reads and waits, and the plan). */
  memory: MemoryReport;
}

/** The prefill record of `k3 bench-scale --prefill N` (native/tools/cmd_scale.c). */
export interface PrefillRecord {
  tokens: number;
  /** The batch the plan gave the context (or --prefill-batch), and whether it was sized to memory. */
  batch: number;
  batch_sized: number;
  /** Forward passes of the prefill, and layer reads of the streamed trunk during it. */
  passes: number;
  trunk_layer_reads: number;
  /** Layers the plan streams (not pinned). */
  streamed_layers: number;
  pass: Pass;
}

export type KindName = 'dense' | 'kda_moe' | 'mla_moe' | 'lm_head';

export interface KindFigure {
  seconds: number;
  ffn_seconds: number;
  bytes: number;
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median of nothing');
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The kind of layer l: KDA + dense MLP, KDA + MoE, MLA + MoE. */
export function layerKind(run: ScaleRun, l: number): KindName {
  const { mixer, ffn } = run.layers[l];
  if (ffn === 'mlp') return 'dense';
  return mixer === 'kda' ? 'kda_moe' : 'mla_moe';
}

/** The steps that describe the steady state: every step after the first (which fills caches
 * and faults in the mapped lm_head), or the only one. */
export function steadySteps(run: ScaleRun): Pass[] {
  return run.steps.length > 1 ? run.steps.slice(1) : run.steps;
}

/** Per kind: the median over steady steps of the mean over that kind's layers. */
export function kindFigures(run: ScaleRun, passes: Pass[] = steadySteps(run)): Record<KindName, KindFigure> {
  const out = {} as Record<KindName, KindFigure>;
  for (const kind of ['dense', 'kda_moe', 'mla_moe'] as const) {
    const layers = run.layers.map((_, l) => l).filter((l) => layerKind(run, l) === kind);
    if (layers.length === 0) continue;
    const per = (f: (r: LayerRecord) => number) =>
      median(passes.map((p) => layers.reduce((s, l) => s + f(p.layers[l]), 0) / layers.length));
    out[kind] = { seconds: per((r) => r[0] + r[1]), ffn_seconds: per((r) => r[1]), bytes: per((r) => r[2] + r[3]) };
  }
  out.lm_head = { seconds: median(passes.map((p) => p.head_s)), ffn_seconds: 0, bytes: median(passes.map((p) => p.head_bytes)) };
  return out;
}

/** Waits of a pass (trunk + experts), summed over layers. */
export function passWaits(p: Pass): number {
  return p.layers.reduce((s, r) => s + r[4] + r[5], 0);
}

/** The share of expert requests the cache served over these passes (1 - reads / requests). */
export function passHitRate(passes: Pass[], expertSlotBytes: number): number {
  const requests = passes.reduce((s, p) => s + p.layers.reduce((t, r) => t + r[6], 0), 0);
  const reads = passes.reduce((s, p) => s + p.layers.reduce((t, r) => t + r[7], 0), 0) / expertSlotBytes;
  return requests > 0 ? Math.min(1, Math.max(0, 1 - reads / requests)) : 1;
}

/** Distinct experts a pass asked for, summed over layers. */
export function passExperts(p: Pass): number {
  return p.layers.reduce((s, r) => s + r[6], 0);
}

/**
 * g(n): a pass of n positions over a pass of one, for everything but the routed experts and
 * the waits (the fastest repetition of each n). The experts' part of a pass is its distinct
 * experts times `expertSeconds` (one expert's resident compute).
 */
export function verifyFactors(run: ScaleRun, expertSeconds: number): { positions: number; factor: number; seconds: number; experts: number }[] {
  const byN = new Map<number, Pass[]>();
  for (const v of run.verify) byN.set(v.positions, [...(byN.get(v.positions) ?? []), v.pass]);
  const rows = [...byN.entries()]
    .sort(([a], [b]) => a - b)
    .map(([positions, passes]) => {
      const rest = (p: Pass) => p.seconds - passWaits(p) - passExperts(p) * expertSeconds;
      const best = passes.reduce((a, b) => (rest(b) < rest(a) ? b : a));
      return { positions, rest: rest(best), seconds: best.seconds, experts: passExperts(best) };
    });
  const one = rows.find((r) => r.positions === 1);
  if (!one) throw new Error('verify passes need a 1-position pass to compare with');
  return rows.map((r) => ({ positions: r.positions, factor: Math.max(1, r.rest / one.rest), seconds: r.seconds, experts: r.experts }));
}

/** Aggregate bytes per second of a disk probe (all readers together, wall-clock). */
export function probeRate(d: DiskProbe): number {
  return d.bytes / d.seconds;
}

/** The probe of the largest block size among a run's sequential probes (the trunk reader's
 * whole-tensor reads), or undefined when there is none. */
export function largestBlock(d: DiskProbe[]): DiskProbe | undefined {
  return d.length ? d.reduce((a, b) => (b.block > a.block ? b : a)) : undefined;
}

/**
 * Both kinds of read at once against one after the other (forecast.h's disk_concurrency):
 * the time the mixed probe's bytes would take read at the sequential and random probes'
 * rates (its sequential part at one; its experts, as many as the random probe read, at the
 * other) over the time they took, the probes before and after the run taken together.
 * Ratios of probes read the same minutes, so it holds for the tier a checkpoint's first
 * read sees as well as for the one re-reads see. Undefined without a mixed probe.
 */
export function diskConcurrency(r: ScaleRun): number | undefined {
  const timed = (seq: DiskProbe[], rnd: DiskProbe[], mixed: DiskProbe[]) => {
    const s = largestBlock(seq);
    if (!s || !rnd.length || !mixed.length) return undefined;
    const experts = rnd[0].bytes;
    return { shared: (mixed[0].bytes - experts) / probeRate(s) + experts / probeRate(rnd[0]), took: mixed[0].seconds };
  };
  const parts = [timed(r.disk_sequential, r.disk_random, r.disk_mixed), timed(r.disk_sequential_after, r.disk_random_after, r.disk_mixed_after)].filter(
    (x): x is { shared: number; took: number } => x !== undefined,
  );
  if (!parts.length) return undefined;
  return parts.reduce((a, x) => a + x.shared, 0) / parts.reduce((a, x) => a + x.took, 0);
}

export interface MachineProfile {
  format: 'k3-machine-profile';
  version: 3;
  source: string;
  threads: number;
  io_threads: number;
  memory_bandwidth: number;
  memory_bandwidth_reading: number;
  disk_sequential: number;
  disk_expert: number;
  /** Both kinds at once against one after the other (diskConcurrency below). */
  disk_concurrency?: number;
  kinds: Record<KindName, KindFigure>;
  verify: { positions: number; factor: number }[];
  /** g' of a prompt's passes (prefillFactor below): 1 at one token, and at the resident
   * run's timed prefill. */
  prefill_factor?: { positions: number; factor: number }[];
  /** How the forecast did on the slice this profile was measured on (native/src/forecast.h). */
  check?: { configurations: number; within: number; worst: number };
}

/**
 * The profile from a resident run (kinds, bandwidth, verify curve) and disk probes.
 * `expertBytes` is one routed expert's size, `topK` the experts a token uses per layer.
 */
export function makeProfile(
  resident: ScaleRun,
  disk: { sequential: DiskProbe; expert: DiskProbe; concurrency?: number },
  expertBytes: number,
  source: string,
): MachineProfile {
  const kinds = kindFigures(resident);
  const moe = kinds.kda_moe ?? kinds.mla_moe;
  if (!kinds.dense || !moe) throw new Error('the resident run needs a dense layer and a MoE layer');
  const expertSeconds = (moe.seconds / moe.bytes) * expertBytes;
  const bandwidths = resident.steps.map((s) => s.bandwidth).filter((b) => b > 0);
  if (bandwidths.length === 0) throw new Error('the resident run measured no bandwidth (--rounds)');
  const tr = resident.beside_reads;
  if (!tr) throw new Error('the resident run measured no triad beside disk reads (--beside-reads)');
  return {
    format: 'k3-machine-profile',
    version: 3,
    source,
    threads: resident.threads,
    io_threads: resident.io_threads,
    memory_bandwidth: median(bandwidths),
    // The steps' triad times what reads beside it left of the triad measured with them.
    memory_bandwidth_reading: (median(bandwidths) * tr.triad_reading) / tr.triad_alone,
    disk_sequential: probeRate(disk.sequential),
    disk_expert: probeRate(disk.expert),
    ...(disk.concurrency ? { disk_concurrency: disk.concurrency } : {}),
    kinds,
    verify: verifyFactors(resident, expertSeconds).map(({ positions, factor }) => ({ positions, factor })),
  };
}

/** The slice's shape as the forecast sees it (native/src/forecast.c's forecast_pass). */
export interface PrefillShape {
  /** Trunk bytes per layer, and which layers are MoE. */
  layerBytes: number[];
  moe: boolean[];
  /** One routed expert's slot bytes, experts per layer, experts per token. */
  expertBytes: number;
  experts: number;
  topK: number;
}

/**
 * g' at the resident run's timed prefill (one pass of n tokens, lm_head for the last only):
 * the forecast's compute of that pass is linear in g,
 *   T(g) = sum_l s_l (t_l g + [moe] (D + (k n - D) (g - 1) / (n - 1)) e) + s_h h,
 * with s the kind's seconds per byte, t the layer's trunk bytes, e an expert's, h the
 * lm_head's, D = E (1 - (1 - k / E)^n) the distinct experts; so g is what makes T the
 * pass's compute (its seconds less its waits). Undefined without a prefill of 2 or more
 * tokens in one pass.
 */
export function prefillFactor(run: ScaleRun, shape: PrefillShape): { positions: number; factor: number }[] | undefined {
  const p = run.prefill;
  if (!p || p.passes !== 1 || p.tokens < 2) return undefined;
  const kinds = kindFigures(run);
  const n = p.tokens;
  const { experts: E, topK: k, expertBytes: e } = shape;
  const D = E * (1 - (1 - k / E) ** n);
  const pairs = (k * n - D) / (n - 1);
  let a = kinds.lm_head.seconds; // the prompt's one row of logits
  let b = 0;
  shape.layerBytes.forEach((t, l) => {
    const kind = kinds[layerKind(run, l)];
    const s = kind.seconds / kind.bytes;
    b += s * t + (shape.moe[l] ? s * pairs * e : 0);
    a += shape.moe[l] ? s * (D - pairs) * e : 0;
  });
  const compute = p.pass.seconds - passWaits(p.pass);
  const g = (compute - a) / b;
  return g >= 1 ? [{ positions: 1, factor: 1 }, { positions: n, factor: g }] : undefined;
}

/** One row of `k3 forecast --json`. */
export interface ForecastRow {
  preset: string;
  trunk_bytes: number;
  expert_cache_bytes: number;
  positions: number;
  seconds: number;
  compute_seconds: number;
  disk_seconds: number;
  exposed_expert_seconds: number;
  trunk_read_bytes: number;
  expert_read_bytes: number;
  expert_hit_rate: number;
  bound: string;
  check_configurations: number;
  check_within: number;
  check_worst: number;
  /** Time to first token: prefill of 512 and 2,048 tokens in the batch the plan allows. */
  prefill: PrefillForecast[];
}

/** One prompt's prefill forecast, as `k3 forecast --json` prints it (k3_prefill_forecast). */
export interface PrefillForecast {
  tokens: number;
  batch: number;
  passes: number;
  seconds: number;
  compute_seconds: number;
  disk_seconds: number;
  trunk_read_bytes: number;
  expert_read_bytes: number;
}
