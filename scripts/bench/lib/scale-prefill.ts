// scale-prefill.ts - time to first token on the slice, checked: the counts a `k3 bench-scale
// --prefill N` run reports (batch, passes, trunk layer reads) against what the batch implies,
// and its time against `k3 forecast --batch B`'s prefill forecast, term by term (trunk reads,
// expert reads, compute at n tokens), so a miss names what moved it. Pure arithmetic: the
// bench (scripts/bench/scale.ts) runs the engine; test/bench/scale-prefill.test.ts checks
// this file on hand-made runs.
import { passWaits, type PrefillForecast, type PrefillRecord } from './scale-profile';

/**
 * What the batch implies: ⌈tokens / batch⌉ passes, each reading every streamed layer once.
 * Returns the mismatches as sentences naming the figures (empty when the run agrees).
 */
export function prefillCountErrors(name: string, p: PrefillRecord): string[] {
  const errors: string[] = [];
  if (!(p.batch >= 1)) return [`${name}: prefill batch ${p.batch} (expected at least 1)`];
  const passes = Math.ceil(p.tokens / p.batch);
  if (p.passes !== passes) errors.push(`${name}: ${p.tokens} tokens in batches of ${p.batch} took ${p.passes} passes, expected ⌈${p.tokens} / ${p.batch}⌉ = ${passes}`);
  const reads = passes * p.streamed_layers;
  if (p.trunk_layer_reads !== reads)
    errors.push(`${name}: ${p.trunk_layer_reads} trunk layer reads, expected ${passes} passes x ${p.streamed_layers} streamed layers = ${reads}`);
  return errors;
}

/** One prefill measured against its forecast. */
export interface PrefillCheck {
  name: string;
  tokens: number;
  batch: number;
  batch_sized: boolean;
  passes: number;
  trunk_layer_reads: number;
  streamed_layers: number;
  /** Wall seconds of the prefill, its reads' waits, and the rest (compute). */
  seconds: number;
  waits: number;
  compute: number;
  trunk_bytes: number;
  expert_bytes: number;
  /** The trunk reader's seconds and the expert readers' summed seconds inside pread. */
  trunk_read_seconds: number;
  expert_read_seconds: number;
  /** The lm_head's seconds inside the prefill (the forecast multiplies it by g(n) per pass). */
  head_seconds: number;
  forecast: number;
  forecast_compute: number;
  forecast_disk: number;
  forecast_trunk_bytes: number;
  forecast_expert_bytes: number;
  /** forecast / measured - 1, and the same for the terms. */
  error: number;
  compute_error: number;
  trunk_bytes_error: number;
  expert_bytes_error: number;
}

const ratio = (f: number, m: number) => (m > 0 ? f / m - 1 : f > 0 ? Infinity : 0);

export function prefillCheck(name: string, p: PrefillRecord, f: PrefillForecast): PrefillCheck {
  if (f.tokens !== p.tokens || f.batch !== p.batch)
    throw new Error(`${name}: the forecast is for ${f.tokens} tokens in batches of ${f.batch}, the run prefilled ${p.tokens} in batches of ${p.batch}`);
  const reads = p.pass.reads ?? [0, 0, 0, 0];
  const waits = passWaits(p.pass);
  const compute = p.pass.seconds - waits;
  return {
    name,
    tokens: p.tokens,
    batch: p.batch,
    batch_sized: p.batch_sized !== 0,
    passes: p.passes,
    trunk_layer_reads: p.trunk_layer_reads,
    streamed_layers: p.streamed_layers,
    seconds: p.pass.seconds,
    waits,
    compute,
    expert_bytes: reads[0],
    expert_read_seconds: reads[1],
    trunk_bytes: reads[2],
    trunk_read_seconds: reads[3],
    head_seconds: p.pass.head_s,
    forecast: f.seconds,
    forecast_compute: f.compute_seconds,
    forecast_disk: f.disk_seconds,
    forecast_trunk_bytes: f.trunk_read_bytes,
    forecast_expert_bytes: f.expert_read_bytes,
    error: ratio(f.seconds, p.pass.seconds),
    compute_error: ratio(f.compute_seconds, compute),
    trunk_bytes_error: ratio(f.trunk_read_bytes, reads[2]),
    expert_bytes_error: ratio(f.expert_read_bytes, reads[0]),
  };
}

/**
 * Which term moved a miss: the one whose forecast is furthest from what the run measured,
 * in seconds. Compute against the pass's time less its waits; the reads as the forecast's
 * bytes over the measured ones times the measured read time (a byte count the forecast got
 * wrong costs that share of the read time). Undefined when the forecast held `tolerance`.
 */
export function prefillMissTerm(c: PrefillCheck, tolerance: number): { term: 'compute' | 'trunk reads' | 'expert reads'; seconds: number } | undefined {
  if (Math.abs(c.error) <= tolerance) return undefined;
  const terms = [
    { term: 'compute' as const, seconds: c.forecast_compute - c.compute },
    { term: 'trunk reads' as const, seconds: c.trunk_bytes > 0 ? (c.forecast_trunk_bytes / c.trunk_bytes - 1) * c.trunk_read_seconds : 0 },
    { term: 'expert reads' as const, seconds: c.expert_bytes > 0 ? (c.forecast_expert_bytes / c.expert_bytes - 1) * c.expert_read_seconds : 0 },
  ];
  return terms.reduce((a, b) => (Math.abs(b.seconds) > Math.abs(a.seconds) ? b : a));
}

/** K3_SCALE_PREFILL: a comma-separated list of the prompt lengths `k3 forecast` gives (512,
 * 2048), or 0 / empty for none. */
export function parsePrefillLengths(text: string, known: readonly number[]): number[] {
  const t = text.trim();
  if (t === '' || t === '0') return [];
  const out = t.split(',').map((s) => Number(s.trim()));
  for (const n of out)
    if (!known.includes(n)) throw new Error(`K3_SCALE_PREFILL=${text}: ${n} is not a length k3 forecast gives (${known.join(', ')}), or 0 for none`);
  return out;
}
