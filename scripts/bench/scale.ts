// scale.ts - `npm run bench -- scale`: K3 at its real width, measured. On the `wide` fixture
// (the release's dimensions in its first four layers, docs/FIXTURES.md; or the checkpoint in
// $K3_SCALE_MODEL, e.g. the real release on a machine that holds it) it runs `k3
// bench-scale` under several budgets and reports, each against a limit measured in the
// same run:
//   - resident decode per layer kind (KDA + dense MLP, KDA + MoE, MLA + MoE, lm_head)
//     against the memory-bandwidth bound (a triad before each stretch of steps), prefill;
//   - routed experts read cold (the page cache dropped before every pass) at caches of 10,
//     25 and 50 % of the pool: expert read rate against the disk's own rate at the same
//     block size and reader count, and I/O wait as a share of the pass;
//   - the trunk streamed through two ring slots, and the one-slot floor;
//   - verifying n drafted positions in one pass against one serial step;
// then writes the machine profile (native/src/forecast.h) to out/bench/machine-profile.json
// and the default profile path (so `k3 --list-presets` and the editor show forecasts),
// checks the forecast against every measured configuration of the slice, measures time to
// first token (prefill of 512 and 2,048 tokens, resident and with the trunk streamed, in the
// batch the plan allows) against its forecast term by term, forecasts the
// full 93-layer release per preset, and projects `--spec 8` from the verify costs and the
// drafter's replay acceptance on code edits. Everything goes to out/bench/scale.json, and
// the forecast's error per configuration to scale.svg beside it (figures in scale-chart.json,
// the shape of docs/images/scale-forecast.json, where a run can be added).
// Timing lives here, never in tests. K3_SCALE_PREFILL=512,2048 (the default) picks the
// prompt lengths, 0 none; K3_SCALE_DECODE=0 runs only the resident run (the profile) and the
// prefill runs, for a machine short of time or memory. K3_SCALE_REUSE=1 reads each run a
// previous bench left in out/bench/scale/ instead of measuring it again (those missing are
// measured): the forecasts and tables again after a change to the model, from the same runs.
// K3_SCALE_EARLY=1 runs each cold expert-cache configuration again with --expert-prefetch on
// right after its own run (the next MoE layer's experts guessed and read early) and reports
// the pass time, the I/O wait, the guess's hit rate and the bytes against the run without.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureFixture } from '../../test/support/fixtures';
import { k3Cli, repoRoot } from '../../test/support/paths';
import { ffnKind, parseConfig } from '../../test/reference/config';
import { Checkpoint } from '../../test/reference/safetensors';
import { expectedTensors, tensorBytes } from '../../test/reference/tensors';
import { drawFigures, type ForecastFigures } from './lib/charts';
import { codeEdits, parseReplay, writeCodeEdit } from './lib/code-edits';
import { parsePrefillLengths, prefillCheck, prefillCountErrors, prefillMissTerm, type PrefillCheck } from './lib/scale-prefill';
import {
  kindFigures,
  layerKind,
  makeProfile,
  prefillFactor,
  passHitRate,
  median,
  passExperts,
  passWaits,
  probeRate,
  diskConcurrency,
  largestBlock,
  steadySteps,
  verifyFactors,
  type DiskProbe,
  type ForecastRow,
  type KindName,
  type MachineProfile,
  type PrefillRecord,
  type ScaleRun,
} from './lib/scale-profile';

const THREADS = Number(process.env.K3_SCALE_THREADS ?? 2);
const IO_THREADS = 2;
/** How streamed bytes are read (k3 --reads). The release streams far more than any page
 * cache holds, so the engine's default (auto) reads it around the page cache; the slice
 * would fit in this machine's page cache, where auto would not, so the bench says direct
 * to read the slice as the release would be read. K3_SCALE_READS=buffered measures the
 * page cache's path instead (docs/SCALE.md compares the two). */
const READS = process.env.K3_SCALE_READS ?? 'direct';
if (!['direct', 'buffered'].includes(READS)) throw new Error(`K3_SCALE_READS=${READS}: give direct or buffered`);
const SPEC = 8;
/** How close a forecast must come to a measured pass to count as held (the profile's check). */
const TOLERANCE = 0.15;
/** Prompt lengths whose time to first token is measured (those `k3 forecast` forecasts). */
const PREFILL = parsePrefillLengths(process.env.K3_SCALE_PREFILL ?? '512,2048', [512, 2048]);
/** The decode configurations (cold caches, streamed trunk, floor, one thread, pacing). */
const DECODE = process.env.K3_SCALE_DECODE !== '0';
const EARLY = process.env.K3_SCALE_EARLY === '1';
const model = process.env.K3_SCALE_MODEL ?? ensureFixture({ size: 'wide', router: 'balanced' });
const work = path.join(repoRoot, 'out/bench/scale');
fs.mkdirSync(work, { recursive: true });

// ---- the checkpoint's sizes, from its config (no weights read) ----------------------------
const config = parseConfig(JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8')));
const layerBytes = Array.from({ length: config.numLayers }, () => 0);
for (const [name, t] of expectedTensors(config)) {
  const m = /\.layers\.(\d+)\./.exec(name);
  if (m && !name.includes('.experts.') && t.shape.length === 2 && t.dtype === 'BF16') layerBytes[Number(m[1])] += tensorBytes(t);
}
const trunkBytes = layerBytes.reduce((a, b) => a + b, 0);
const bySize = [...layerBytes].sort((a, b) => b - a);
const moeLayers = layerBytes.filter((_, l) => ffnKind(config, l) === 'moe').length;
const GB = (bytes: number) => (bytes / 1e9).toFixed(3);
/** Budgets with a margin for the 64-byte alignment of each run of tensors. */
const margin = 2e6 * config.numLayers;

/** The disk's sequential read of the whole checkpoint, cold, at the trunk reader's block
 * size. The trunk's ring reader reads each tensor whole, one pread each (trunk.c): a sequential
 * probe in blocks this large never splits one (a read stops at its extent's end). Blocks of
 * 256 MB read the same bytes 10-15 % faster than whole tensors here (1.76 and 2.21 GB/s
 * before and after a floor run, against 1.52 and 2.02), and the floor's forecast came out
 * 14-24 % fast from them in runs H-J. */
const WHOLE_TENSORS_MB = 4096;
const WHOLE = ['--disk', String(WHOLE_TENSORS_MB), '--disk-gb', String(Math.ceil(fs.readdirSync(model).filter((f) => f.endsWith('.safetensors')).reduce((s, f) => s + fs.statSync(path.join(model, f)).size, 0) / 1e9))];

/**
 * What a pass reads, for the probes: the layers' trunk tensors in file order as the
 * sequential stream (t), each routed expert's tensors as one random read (e), contiguous
 * tensors merged as the engine's readers merge them.
 */
const extentsFile = path.join(work, 'extents.txt');
{
  const rows: { file: string; offset: number; len: number; kind: 't' | 'e'; unit: string }[] = [];
  for (const t of new Checkpoint(model).tensors.values()) {
    if (!/\.layers\.\d+\./.test(t.name)) continue;
    const expert = /^(.*\.experts\.\d+)\./.exec(t.name);
    rows.push({ file: path.basename(t.file), offset: t.offset, len: t.byteLength, kind: expert ? 'e' : 't', unit: expert ? expert[1] : '' });
  }
  rows.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.offset - b.offset));
  const merged: typeof rows = [];
  for (const r of rows) {
    const last = merged[merged.length - 1];
    if (last && last.file === r.file && last.kind === r.kind && last.unit === r.unit && last.offset + last.len === r.offset) last.len += r.len;
    else merged.push({ ...r });
  }
  fs.writeFileSync(extentsFile, merged.map((r) => `${r.file} ${r.offset} ${r.len} ${r.kind}`).join('\n') + '\n');
}

/**
 * The probes of a run the forecast is checked against: over the bytes a pass reads (the
 * extents above), each twice, the second kept, the sequential one over as many bytes as the
 * run streams per pass. A pass reads the same bytes again every pass, and on a virtual disk bytes the host has just
 * served come back from its cache (measured here: 0.3-1 GB/s on first touch, 2-3 GB/s
 * again), so a first-touch probe would not describe what the pass sees. And again after
 * the steps (--disk-after): the disk's rate for the same bytes moves up to 4x within
 * minutes, and the run saw it somewhere between the two.
 */
const reread = (gb: number) => ['--disk-gb', gb.toFixed(2), '--disk-random', '100', '--disk-twice', '--disk-after', '--disk-extents', extentsFile];

/** The resident pass measured just before each checked run: this machine's CPU share moves
 * by 2x within minutes (other work), so the compute a run is checked with is measured next
 * to it, not once for all. */
const PAIRED = ['--repeat', '--steps', '5', '--rounds', '2'];

interface Config {
  name: string;
  what: string;
  args: string[];
}
const oneToken = config.topK * moeLayers; // expert slots one token's pass needs
const poolSlots = config.numExperts * moeLayers;
const resident = `--trunk-gb=${GB(trunkBytes + margin)}`;
const configs: Config[] = [
  {
    name: 'resident',
    what: 'trunk pinned, cache of one token\'s experts, every step the same token at the same position',
    // First in the bench: its whole-checkpoint probe is the least likely to find bytes a
    // virtual disk's host has cached (the full release's 1.5 TB never would be). Verify
    // passes up to 32 positions, the most one pass computes logits for (a longer one is cut
    // into passes of 32: runs AE-AF timed 64 and 256 positions as 2 and 8 passes); a
    // prompt's passes are forecast from a timed prefill of 256 tokens in one pass instead
    // (g', prefillFactor).
    args: [resident, `--cache-slots=${oneToken}`, '--repeat', '--steps', '9', '--rounds', '4', '--prefill', '256', '--prefill-batch', '256', '--verify', '1,2,3,5,9,32', '--verify-reps', '4', ...WHOLE, '--disk-random', '100', '--beside-reads'],
  },
  // The checked runs' pass counts: a mean over 7-8 steady passes had up to 12 % standard
  // error in runs P-S, and a burst of two slow passes moved it by 20 % (runs X, AA); twice
  // the passes halve a burst's weight. Since direct reads went into huge pages (run Y) a
  // cold pass costs 0.3-0.9 s here, the floor's 2.6-4.0.
  ...[0.1, 0.25, 0.5].map((share) => ({
    name: `experts ${Math.round(share * 100)} %`,
    what: `trunk pinned, expert cache ${Math.round(share * 100)} % of the pool, page cache dropped before every pass`,
    // The 50 % run also compares block sizes, each over its own 1 GB of the shards.
    args: [resident, `--cache-slots=${Math.max(config.topK, Math.round(share * poolSlots))}`, '--cold-each-token', '--steps', '17', ...(share === 0.5 ? ['--disk', '1,0,256'] : []), ...reread(1)],
  })),
  {
    name: 'trunk streamed',
    what: 'largest layer pinned, the rest through two ring slots, expert cache 25 %, cold every pass',
    args: [`--trunk-gb=${GB(bySize[0] + 2 * bySize[1] + margin)}`, `--cache-slots=${Math.round(0.25 * poolSlots)}`, '--cold-each-token', '--steps', '13', '--disk', String(WHOLE_TENSORS_MB), ...reread((trunkBytes - bySize[0]) / 1e9), '--disk-mixed', GB(trunkBytes - bySize[0])],
  },
  {
    name: 'floor',
    what: 'one ring slot of the largest layer, expert cache of one token (top_k slots), cold every pass',
    args: [`--trunk-gb=${GB(bySize[0] + margin)}`, `--cache-slots=${config.topK}`, '--cold-each-token', '--steps', '11', '--disk', String(WHOLE_TENSORS_MB), ...reread(trunkBytes / 1e9)],
  },
];

if (!DECODE) configs.splice(1); // the resident run only: the profile the prefill is forecast from

/** Time to first token, measured under the resident budgets and with the trunk streamed (the
 * decode configurations' budgets), each with its own disk probes before and after it as the
 * decode check has, for every length in PREFILL, in the batch the plan allows. */
const prefillBudgets: Config[] = [
  { name: 'resident', what: 'trunk pinned, a cache of one token\'s experts', args: [resident, `--cache-slots=${oneToken}`, ...reread(1)] },
  {
    name: 'trunk streamed',
    what: 'largest layer pinned, the rest through two ring slots, expert cache 25 %',
    args: [`--trunk-gb=${GB(bySize[0] + 2 * bySize[1] + margin)}`, `--cache-slots=${Math.round(0.25 * poolSlots)}`, '--disk', String(WHOLE_TENSORS_MB), ...reread((trunkBytes - bySize[0]) / 1e9), '--disk-mixed', GB(trunkBytes - bySize[0])],
  },
];

/** --cache-slots=N becomes --cache-gb for N slots of the plan's expert size. */
function cliArgs(c: Config, slotBytes: number): string[] {
  return c.args.flatMap((a) => {
    const slots = /^--cache-slots=(\d+)$/.exec(a);
    if (slots) return ['--cache-gb', ((Number(slots[1]) * slotBytes + 1e5) / 1e9).toFixed(6)];
    const trunk = /^--trunk-gb=(.*)$/.exec(a);
    return trunk ? ['--trunk-gb', trunk[1]] : [a];
  });
}

function k3(args: string[]): string {
  return execFileSync(k3Cli, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26 });
}

// One expert's bytes from the checkpoint's own plan (what a slot holds).
const expertBytes = [...expectedTensors(config).entries()]
  .filter(([n]) => n.includes('.layers.1.block_sparse_moe.experts.0.'))
  .reduce((s, [, t]) => s + tensorBytes(t), 0);
const slotBytes = Math.ceil(expertBytes / 64) * 64;

console.log(`scale bench on ${model}: ${config.numLayers} layers, hidden ${config.hiddenSize}, ${config.numExperts} experts (top-${config.topK}) of ${(expertBytes / 1e6).toFixed(2)} MB, trunk ${GB(trunkBytes)} GB; ${THREADS} threads, ${IO_THREADS} expert readers, reads ${READS}; ${os.cpus().length} CPUs, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
const runs = new Map<string, ScaleRun>();
/** The resident run just before each checked run, by the checked run's name. */
const paired = new Map<string, ScaleRun>();
function benchScale(name: string, args: string[], threads = THREADS): ScaleRun {
  const out = path.join(work, `${name.replace(/[^a-z0-9]+/g, '-')}.json`);
  if (process.env.K3_SCALE_REUSE === '1' && fs.existsSync(out)) return JSON.parse(fs.readFileSync(out, 'utf8')) as ScaleRun;
  const t0 = Date.now();
  k3(['bench-scale', model, ...args, '--threads', String(threads), '--io-threads', String(IO_THREADS), '--reads', READS, '--out', out]);
  const run = JSON.parse(fs.readFileSync(out, 'utf8')) as ScaleRun;
  console.log(`  ${name}: ${((Date.now() - t0) / 1000).toFixed(0)} s, peak RSS ${(run.peak_rss_bytes / 1e9).toFixed(2)} GB, load ${run.load_average.slice(0, 3).join(' ')} -> ${run.load_average.slice(3).join(' ')}`);
  return run;
}
for (const c of configs) {
  if (c.name !== 'resident') {
    const base = configs[0];
    paired.set(c.name, benchScale(`resident before ${c.name}`, [...cliArgs({ ...base, args: base.args.slice(0, 2) }, slotBytes), ...PAIRED]));
  }
  runs.set(c.name, benchScale(c.name, cliArgs(c, slotBytes)));
  if (EARLY && c.name !== 'resident' && c.name !== 'floor')
    runs.set(`${c.name} early reads`, benchScale(`${c.name} early reads`, [...cliArgs(c, slotBytes), '--expert-prefetch', 'on']));
}
/** Each prefill run, with the resident run just before it (its compute, as the decode check's). */
const prefillRuns: { name: string; tokens: number; run: ScaleRun; before: ScaleRun }[] = [];
for (const b of prefillBudgets)
  for (const tokens of PREFILL) {
    const name = `prefill ${tokens} ${b.name}`;
    const before = benchScale(`resident before ${name}`, [...cliArgs({ ...configs[0], args: configs[0].args.slice(0, 2) }, slotBytes), ...PAIRED]);
    // One decode step after it (bench-scale measures at least one); the prefill is the figure.
    prefillRuns.push({ name, tokens, before, run: benchScale(name, [...cliArgs(b, slotBytes), '--prefill', String(tokens), '--steps', '1']) });
  }
// One compute thread: how many weight bytes a CPU-second streams when the thread has a core
// to itself, against the one-thread triad. (The CPU share of the machine moves with other
// work; bytes per CPU-second of the decode do not, which says whether it is the code or the
// machine that limits it.)
const single = DECODE ? benchScale('resident 1 thread', [...cliArgs({ ...configs[0], args: configs[0].args.slice(0, 2) }, slotBytes), ...PAIRED], 1) : undefined;
const res = runs.get('resident') as ScaleRun;

// ---- resident decode per layer kind against the bandwidth bound ---------------------------
const kinds = kindFigures(res);
const bandwidth = median(res.steps.map((s) => s.bandwidth).filter((b) => b > 0));
const kindRows = (['dense', 'kda_moe', 'mla_moe', 'lm_head'] as KindName[]).filter((k) => kinds[k]).map((k) => {
  const f = kinds[k];
  // Achieved against the triad of each step's own round, median over steady steps.
  const layers = res.layers.map((_, l) => l).filter((l) => layerKind(res, l) === k);
  const ratios = steadySteps(res).map((p) => {
    const s = k === 'lm_head' ? p.head_s : layers.reduce((a, l) => a + p.layers[l][0] + p.layers[l][1], 0) / layers.length;
    const b = k === 'lm_head' ? p.head_bytes : layers.reduce((a, l) => a + p.layers[l][2] + p.layers[l][3], 0) / layers.length;
    return b / s / p.bandwidth;
  });
  return { kind: k, seconds: f.seconds, ffn_seconds: f.ffn_seconds, bytes: f.bytes, achieved: f.bytes / f.seconds, of_bound: median(ratios), rounds: [Math.min(...ratios), Math.max(...ratios)] };
});
const steady = steadySteps(res);
const cpuShare = median(steady.map((p) => p.cpu_s / p.seconds));
const weightBytes = (p: { layers: { 2: number; 3: number }[]; head_bytes: number }) => p.layers.reduce((s, r) => s + r[2] + r[3], 0) + p.head_bytes;
const perCpuSecond = (r: ScaleRun) => median(steadySteps(r).map((p) => weightBytes(p) / p.cpu_s));
const cpuRows = [
  { threads: THREADS, step: median(steady.map((p) => p.seconds)), cpu_share: cpuShare, bytes_per_cpu_second: perCpuSecond(res), triad: bandwidth },
  ...(single ? [{ threads: 1, step: median(steadySteps(single).map((p) => p.seconds)), cpu_share: median(steadySteps(single).map((p) => p.cpu_s / p.seconds)), bytes_per_cpu_second: perCpuSecond(single), triad: median(single.steps.map((s) => s.bandwidth).filter((b) => b > 0)) }] : []),
];

// ---- disk and experts ----------------------------------------------------------------------
/** The readers' work over a run's steady passes (the first, which fills the cache at first
 * touch, left out): [expert bytes, expert reader-seconds, trunk bytes, trunk seconds] and
 * the number of passes. */
function steadyReads(r: ScaleRun): { sums: number[]; passes: number } {
  const passes = steadySteps(r).filter((p) => p.reads);
  return { sums: passes.reduce((a, p) => a.map((x, i) => x + (p.reads as number[])[i]), [0, 0, 0, 0]), passes: passes.length };
}

function ioRow(name: string) {
  const r = runs.get(name) as ScaleRun;
  const passes = steadySteps(r);
  const seconds = median(passes.map((p) => p.seconds));
  const wait = median(passes.map((p) => passWaits(p) / p.seconds));
  const m = r.memory;
  const { sums, passes: n } = steadyReads(r);
  const perReader = sums[1] > 0 ? sums[0] / sums[1] : 0;
  const rnd = r.disk_random[0];
  return {
    name,
    seconds,
    io_share: wait,
    expert_gb_per_pass: n ? sums[0] / n / 1e9 : 0,
    trunk_gb_per_pass: n ? sums[2] / n / 1e9 : 0,
    retained: m.expert_requests ? m.expert_retained / m.expert_requests : 0,
    engine_reader_rate: perReader,
    probe_reader_rate: rnd ? rnd.bytes / rnd.read_seconds : 0,
    probe_rate: rnd ? probeRate(rnd) : 0,
    probe_rate_after: r.disk_random_after.length ? probeRate(r.disk_random_after[0]) : 0,
    probe_sequential: r.disk_sequential.length ? probeRate(r.disk_sequential.reduce((a, b) => (b.bytes > a.bytes ? b : a))) : 0,
    overlap: m.expert_read_seconds > 0 ? 1 - m.expert_wait_seconds / (m.expert_read_seconds / IO_THREADS) : 0,
    peak_rss: r.peak_rss_bytes,
    load: r.load_average,
    cpu_share: median(passes.map((p) => p.cpu_s / p.seconds)),
    // CPU a GB read costs: this run's CPU per pass over the resident run's just before it.
    read_cpu_per_gb:
      (median(passes.map((p) => p.cpu_s)) - median(steadySteps(paired.get(name) as ScaleRun).map((p) => p.cpu_s))) /
      ((m.expert_bytes_read + m.trunk_bytes_read) / r.steps.length / 1e9),
  };
}
const ioRows = configs.filter((c) => c.name !== 'resident').map((c) => ioRow(c.name));

/** A cold configuration without and with early expert reads (K3_SCALE_EARLY=1): steady
 * passes' median time and I/O wait, the guess's hit rate, the early reads used, the bytes. */
const earlyRows = configs.filter((c) => runs.has(`${c.name} early reads`)).map((c) => {
  const off = runs.get(c.name) as ScaleRun, on = runs.get(`${c.name} early reads`) as ScaleRun;
  const pass = (r: ScaleRun) => median(steadySteps(r).map((p) => p.seconds));
  const wait = (r: ScaleRun) => median(steadySteps(r).map((p) => passWaits(p)));
  const m = on.memory;
  return {
    name: c.name,
    seconds_off: pass(off), seconds_on: pass(on), wait_off: wait(off), wait_on: wait(on),
    hit_rate: m.expert_guesses ? m.expert_guesses_routed / m.expert_guesses : 0,
    used: m.expert_early_reads ? m.expert_early_used / m.expert_early_reads : 0,
    bytes_ratio: off.memory.expert_bytes_read ? m.expert_bytes_read / off.memory.expert_bytes_read : 0,
  };
});

// ---- the machine profile ---------------------------------------------------------------------
const seqProbe = res.disk_sequential.reduce((a, b) => (b.bytes > a.bytes ? b : a));
const profile: MachineProfile = makeProfile(res, { sequential: seqProbe, expert: res.disk_random[0], concurrency: runs.has('trunk streamed') ? diskConcurrency(runs.get('trunk streamed') as ScaleRun) : undefined }, expertBytes,
  `npm run bench -- scale on ${path.basename(model)}, reads ${READS}, ${new Date().toISOString()}, load ${res.load_average.slice(0, 3).join(' ')}`);
{
  const factor = prefillFactor(res, { layerBytes, moe: layerBytes.map((_, l) => ffnKind(config, l) === 'moe'), expertBytes: slotBytes, experts: config.numExperts, topK: config.topK });
  if (factor) profile.prefill_factor = factor;
}
const profileFile = path.join(repoRoot, 'out/bench/machine-profile.json');
const defaultProfile = process.env.K3_MACHINE_PROFILE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'k3/machine-profile.json');

type Forecast = ForecastRow;
function forecast(args: string[], profilePath = profileFile): Forecast[] {
  return JSON.parse(k3(['forecast', ...args, '--profile', profilePath, '--json'])) as Forecast[];
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A run's disk rate from the probe just before it and the same probe just after: the time
 * the two took for the same bytes, averaged (each probe's largest block size). */
function aroundRun(before: DiskProbe[], after: DiskProbe[]): number | undefined {
  const [b, a] = [largestBlock(before), largestBlock(after)];
  if (!b) return undefined;
  return a ? 2 / (1 / probeRate(b) + 1 / probeRate(a)) : probeRate(b);
}

// ---- the forecast against every measured configuration of the slice ------------------------
// Each run is forecast with the kinds of the resident run just before it and the disk rates
// its own probes measured just before it (the same files, the same tier of a virtual disk).
// The resident run itself repeats one token, so its experts stay cached; the forecast
// assumes routing spread evenly over the pool, so that run is no test of it.

/** The machine profile a cold run is forecast from: the compute rates of the resident run
 * just before it, and its own disk probes (before and after it), else the slice profile's. */
function runProfile(before: ScaleRun, run: ScaleRun): MachineProfile {
  return {
    ...profile,
    kinds: kindFigures(before),
    disk_sequential: aroundRun(run.disk_sequential, run.disk_sequential_after) ?? profile.disk_sequential,
    disk_expert: aroundRun(run.disk_random, run.disk_random_after) ?? profile.disk_expert,
    disk_concurrency: diskConcurrency(run) ?? profile.disk_concurrency,
  };
}

const validation = configs.filter((c) => c.name !== 'resident').map((c) => {
  const r = runs.get(c.name) as ScaleRun;
  const before = paired.get(c.name) as ScaleRun;
  const own = runProfile(before, r);
  const file = path.join(work, `profile-${c.name.replace(/[^a-z0-9]+/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(own, null, 2) + '\n');
  const budgets = [model, '--trunk-gb', String(r.memory.trunk_budget_bytes / 1e9), '--cache-gb', String(r.memory.expert_cache_budget_bytes / 1e9)];
  const [f] = forecast(budgets, file);
  // The forecast assumes routing spread evenly (the slice's balanced router comes close; a
  // checkpoint with a random router bias favours some experts, and its cache serves more).
  // The same forecast with the share the cache served in this run checks the model of time
  // apart from the model of routing.
  const steadyPasses = steadySteps(r);
  const hit = passHitRate(steadyPasses, r.memory.plan.expert_slot_bytes);
  const [fh] = forecast([...budgets, '--expert-hit-rate', hit.toFixed(6)], file);
  // And with the read rates the engine itself achieved in the run's steady passes (the
  // first, which fills the cache and reads at first touch, left out) instead of the
  // probes': the model's structure, apart from how well a probe predicts this disk.
  const reads = steadyReads(r).sums;
  const engineExpert = reads[1] > 0 ? reads[0] / (reads[1] / IO_THREADS) : own.disk_expert;
  const engineTrunk = reads[3] > 0.1 ? reads[2] / reads[3] : own.disk_sequential;
  // Both kinds at once: the engine's rates were measured while both read, so the pass's
  // reads took the trunk reader's busy time, the expert reads falling within it.
  const engineConcurrency = reads[3] > 0.1 && reads[1] > 0 ? (reads[3] + reads[1] / IO_THREADS) / reads[3] : own.disk_concurrency;
  const engineFile = file.replace(/\.json$/, '-engine.json');
  fs.writeFileSync(engineFile, JSON.stringify({ ...own, disk_sequential: engineTrunk, disk_expert: engineExpert, disk_concurrency: engineConcurrency }, null, 2) + '\n');
  const [fe] = forecast([...budgets, '--expert-hit-rate', hit.toFixed(6)], engineFile);
  // Seconds per token, as a user's tokens per second see it: the mean over the steady
  // passes. The median hides the passes that wait longest (a streamed trunk's passes vary
  // 1.4-2.8 s as the ring's reads fall), and the forecast is of the mean.
  const measured = mean(steadyPasses.map((p) => p.seconds));
  const compute = mean(steadyPasses.map((p) => p.seconds - passWaits(p)));
  return {
    name: c.name,
    // The probe of both kinds at once, flat out, and what it says of reading them at once.
    disk_mixed: r.disk_mixed.length ? probeRate(r.disk_mixed[0]) : 0,
    disk_concurrency: own.disk_concurrency ?? 0,
    measured,
    measured_median: median(steadyPasses.map((p) => p.seconds)),
    measured_compute: compute,
    forecast: f.seconds,
    forecast_compute: f.compute_seconds,
    forecast_disk: f.disk_seconds,
    error: f.seconds / measured - 1,
    hit_rate: hit,
    assumed_hit_rate: f.expert_hit_rate,
    forecast_at_hit_rate: fh.seconds,
    error_at_hit_rate: fh.seconds / measured - 1,
    forecast_engine_rates: fe.seconds,
    error_engine_rates: fe.seconds / measured - 1,
    bound: f.bound,
    disk_sequential: own.disk_sequential,
    disk_expert: own.disk_expert,
    resident_step: median(steadySteps(before).map((p) => p.seconds)),
    cpu_share: median(steadyPasses.map((p) => p.cpu_s / p.seconds)),
  };
});

// The profile records how its forecast did here (from probes, as a person's forecast is
// made), so what shows a forecast can say how far to trust it; then it is saved.
// Without the decode configurations there is no check, and the default profile is kept.
if (validation.length)
  profile.check = {
    configurations: validation.length,
    within: validation.filter((v) => Math.abs(v.error) <= TOLERANCE).length,
    worst: Math.max(...validation.map((v) => Math.abs(v.error))),
  };
fs.writeFileSync(profileFile, JSON.stringify(profile, null, 2) + '\n');
const saveProfile = DECODE && process.env.K3_SCALE_SAVE_PROFILE !== '0';
if (saveProfile) {
  fs.mkdirSync(path.dirname(defaultProfile), { recursive: true });
  fs.copyFileSync(profileFile, defaultProfile);
}
const checkFigures: ForecastFigures = {
  kind: 'forecast',
  title: `Forecast from probes against ${path.basename(model)}, reads ${READS}`,
  tolerance: TOLERANCE,
  configs: validation.map((v) => v.name),
  runs: [{ name: new Date().toISOString().slice(0, 16).replace('T', ' '), errors: validation.map((v) => v.error) }],
};
if (validation.length) {
  fs.writeFileSync(path.join(repoRoot, 'out/bench/scale-chart.json'), JSON.stringify(checkFigures, null, 2) + '\n');
  fs.writeFileSync(path.join(repoRoot, 'out/bench/scale.svg'), drawFigures(checkFigures));
}

// ---- time to first token against its forecast -------------------------------------------
// Each prefill run forecast as the decode check forecasts a pass: the kinds of the resident
// run just before it, the disk rates of its own probes, the batch the run's plan gave it. A
// count that disagrees with the batch (passes, trunk layer reads) fails the bench at the end,
// after everything is written.
const countErrors: string[] = [];
const prefillRows = prefillRuns.map(({ name, tokens, run, before }) => {
  const p = run.prefill as PrefillRecord;
  countErrors.push(...prefillCountErrors(name, p));
  const own = runProfile(before, run);
  const file = path.join(work, `profile-${name.replace(/[^a-z0-9]+/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(own, null, 2) + '\n');
  const budgets = [model, '--trunk-gb', String(run.memory.trunk_budget_bytes / 1e9), '--cache-gb', String(run.memory.expert_cache_budget_bytes / 1e9), '--batch', String(p.batch)];
  const at = (f: Forecast) => f.prefill.find((x) => x.tokens === tokens) as Forecast['prefill'][number];
  const check: PrefillCheck = prefillCheck(name, p, at(forecast(budgets, file)[0]));
  // With the read rates the engine itself achieved in the prefill: the model's structure
  // apart from how well a probe predicts the disk.
  const [eb, es, tb, ts] = p.pass.reads ?? [0, 0, 0, 0];
  const engineFile = file.replace(/\.json$/, '-engine.json');
  fs.writeFileSync(engineFile, JSON.stringify({ ...own, disk_expert: es > 0 ? eb / (es / IO_THREADS) : own.disk_expert, disk_sequential: ts > 0.1 ? tb / ts : own.disk_sequential }, null, 2) + '\n');
  const engine = at(forecast(budgets, engineFile)[0]);
  return { ...check, forecast_engine_rates: engine.seconds, error_engine_rates: engine.seconds / check.seconds - 1, miss: prefillMissTerm(check, TOLERANCE), resident_step: median(steadySteps(before).map((s) => s.seconds)), load: run.load_average, peak_rss: run.peak_rss_bytes };
});

// ---- the full release per preset, serial and verifying ---------------------------------------
const positions = [1, 2, 3, 5, 9];
const full = new Map<number, Forecast[]>(positions.map((n) => [n, forecast(['--positions', String(n)])]));

// The drafter's replay acceptance on code edits, with this checkpoint's tokenizer.
const replays = (DECODE || process.env.K3_SCALE_SPEC === '1' ? codeEdits() : []).map((e) => {
  const base = path.join(work, e.workload.replace(/\//g, '-'));
  writeCodeEdit(e, base);
  const r = parseReplay(k3(['draft-replay', '--tok', model, '--prefix-file', `${base}.prefix`, '--truth-file', `${base}.truth`, '--context-file', `${base}.material`, '--spec', String(SPEC)]));
  return { workload: e.workload, acceptance: r.drafted ? r.accepted / r.drafted : 0, tokens_per_pass: r.tokensPerPass };
});
const acceptance = replays.length ? median(replays.map((r) => r.acceptance)) : 0;

/**
 * Expected tokens per second of rounds drafting n tokens, each accepted with probability a
 * in turn: j accepted emits j + 1 tokens (n + 1 when all land) and costs one verify pass of
 * n + 1 positions; keeping the accepted positions needs no second pass (native/src/verify.c).
 */
function specRate(pass: (positions: number) => number, n: number, a: number): number {
  let tokens = 0;
  for (let j = 0; j <= n; j++) tokens += (j < n ? a ** j * (1 - a) : a ** n) * (j + 1);
  return tokens / pass(n + 1);
}
const presets = (full.get(1) as Forecast[]).map((f) => f.preset);
const specRows = (DECODE ? presets : []).map((preset) => {
  const at = (n: number): number => {
    // Forecasts at the measured counts, linear between them.
    const known = positions.map((p) => ({ p, s: ((full.get(p) as Forecast[]).find((f) => f.preset === preset) as Forecast).seconds }));
    const hi = known.findIndex((k) => k.p >= n);
    if (known[hi].p === n) return known[hi].s;
    const lo = known[hi - 1];
    return lo.s + ((n - lo.p) / (known[hi].p - lo.p)) * (known[hi].s - lo.s);
  };
  const serial = 1 / at(1);
  const fixed = specRate(at, SPEC, acceptance);
  let best = { n: 0, rate: serial };
  for (let n = 1; n <= SPEC; n++) {
    const r = specRate(at, n, acceptance);
    if (r > best.rate) best = { n, rate: r };
  }
  const perPosition = (at(2) - at(1)) / at(1);
  return { preset, serial_s: at(1), verify_9_s: at(9), extra_position: perPosition, spec_always_speedup: fixed / serial, paced_n: best.n, paced_speedup: best.rate / serial };
});

// ---- speculation on the slice at the measured acceptance ----------------------------------
// Serial greedy, then paced --spec 8 whose drafting material is the serial continuation,
// spoiled by --replay-acceptance at the drafter's measured replay acceptance on code edits
// (each drafted token lands with that probability in turn, the projection's assumption), in
// alternating pairs under budgets that read nothing, read experts, and stream the trunk. The
// tokens must be serial's.
interface PacingRow {
  name: string;
  what: string;
  serial: number[];
  spec: number[];
  /** Median of the pairs' serial / spec seconds per token. */
  speedup: number;
  drafted: number;
  accepted: number;
  passes: number;
  tokens: number;
  line: string;
}
function measurePacing(acceptanceRate: number): PacingRow[] {
  const ids = Array.from({ length: 8 }, (_, k) => (k * 7919 + 13) % 150000).join(',');
  const gen = 48; // the first probe round a small part of it (a context keeps its measured costs from one call to the next)
  const pinned = ['--trunk-gb', GB(trunkBytes + margin)];
  const quarter = ['--cache-gb', ((Math.round(0.25 * poolSlots) * slotBytes + 1e5) / 1e9).toFixed(6)];
  const budgets = [
    { name: 'resident', what: 'trunk pinned, experts mapped (in the page cache after the first run)', args: [...pinned, '--cache-gb', 'map'] },
    { name: 'experts 25 %', what: 'trunk pinned, expert cache 25 % of the pool, read direct', args: [...pinned, ...quarter] },
    { name: 'trunk streamed', what: 'largest layer pinned, the rest through two ring slots, expert cache 25 %, read direct', args: ['--trunk-gb', GB(bySize[0] + 2 * bySize[1] + margin), ...quarter] },
  ];
  const common = ['--ids', ids, '--gen', String(gen), '--threads', String(THREADS), '--io-threads', String(IO_THREADS), '--reads', READS];
  type Run = { generated_ids: number[]; seconds_per_token: number };
  const once = (name: string, args: string[]): { run: Run; text: string } => {
    const out = path.join(work, `pacing-${name.replace(/[^a-z0-9]+/g, '-')}.json`);
    const text = k3([model, ...common, ...args, '--out', out]);
    return { run: JSON.parse(fs.readFileSync(out, 'utf8')) as Run, text };
  };
  return budgets.map((b) => {
    const serialRuns: number[] = [];
    const specRuns: number[] = [];
    let last = '';
    let stats = { rounds: 0, drafted: 0, accepted: 0 };
    let truth: number[] = [];
    for (let pair = 0; pair < 2; pair++) {
      const serial = once(`${b.name} serial`, [...b.args, '--incremental']);
      truth = serial.run.generated_ids;
      serialRuns.push(serial.run.seconds_per_token);
      const material = [...ids.split(',').slice(-3).map(Number), ...truth].join(',');
      const spec = once(`${b.name} spec`, [...b.args, '--spec', String(SPEC), '--context-ids', material, '--replay-acceptance', acceptanceRate.toFixed(3)]);
      if (JSON.stringify(spec.run.generated_ids) !== JSON.stringify(truth)) throw new Error(`${b.name}: speculation changed the output`);
      specRuns.push(spec.run.seconds_per_token);
      last = /^spec: .*$/m.exec(spec.text)?.[0] ?? '';
      const m = /^spec: (\d+) rounds, (\d+) drafted, (\d+) accepted/m.exec(spec.text);
      if (m) stats = { rounds: Number(m[1]), drafted: Number(m[2]), accepted: Number(m[3]) };
      console.log(`  pacing ${b.name}, pair ${pair + 1}: serial ${serial.run.seconds_per_token.toFixed(3)} s/token, --spec ${SPEC} ${spec.run.seconds_per_token.toFixed(3)} s/token; ${last}`);
    }
    const ratios = serialRuns.map((x, i) => x / specRuns[i]);
    return { name: b.name, what: b.what, serial: serialRuns, spec: specRuns, speedup: median(ratios), drafted: stats.drafted, accepted: stats.accepted, passes: stats.rounds, tokens: gen, line: last };
  });
}
const SPEC_ON_SLICE = process.env.K3_SCALE_SPEC ? process.env.K3_SCALE_SPEC !== '0' : DECODE;
const pacing = SPEC_ON_SLICE ? measurePacing(acceptance) : null;

// ---- tables ----------------------------------------------------------------------------------
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const ms = (s: number) => `${(1000 * s).toFixed(0)} ms`;
console.log(`\nresident decode per layer kind (${THREADS} threads; triad median ${(bandwidth / 1e9).toFixed(1)} GB/s; CPU share ${cpuShare.toFixed(2)} of ${THREADS} cores; load ${res.load_average.slice(0, 3).join(' ')})`);
console.log('kind        time/token    FFN part     weight MB    GB/s   of triad (median round, range)');
for (const r of kindRows)
  console.log(`${r.kind.padEnd(10)} ${ms(r.seconds).padStart(10)} ${ms(r.ffn_seconds).padStart(10)} ${(r.bytes / 1e6).toFixed(0).padStart(12)} ${(r.achieved / 1e9).toFixed(2).padStart(7)}   ${pct(r.of_bound)} (${pct(r.rounds[0])}..${pct(r.rounds[1])})`);
const stepSeconds = median(steady.map((p) => p.seconds));
for (const c of cpuRows)
  console.log(`${c.threads} thread${c.threads > 1 ? 's' : ''}: step ${c.step.toFixed(3)} s, CPU ${c.cpu_share.toFixed(2)} of ${c.threads} core${c.threads > 1 ? 's' : ''}, ${(c.bytes_per_cpu_second / 1e9).toFixed(1)} GB of weights per CPU-second, triad ${(c.triad / 1e9).toFixed(1)} GB/s`);
if (res.beside_reads) {
  const b = res.beside_reads;
  console.log(`beside disk reads: triad ${(b.triad_alone / 1e9).toFixed(1)} GB/s alone, ${(b.triad_reading / 1e9).toFixed(1)} beside expert reads at ${(b.triad_read_bytes_per_s / 1e6).toFixed(0)} MB/s (a pass that reads is forecast to compute ${(b.triad_alone / b.triad_reading).toFixed(2)}x slower); the step ${median(b.steps).toFixed(3)} s beside reads at ${(b.steps_read_bytes_per_s / 1e6).toFixed(0)} MB/s (${(median(b.steps) / stepSeconds).toFixed(2)}x, every layer beside flat-out reads)`);
}
console.log(`whole step ${stepSeconds.toFixed(3)} s; prefill ${res.prefill ? `${(res.prefill.tokens / res.prefill.pass.seconds).toFixed(2)} tokens/s (${res.prefill.tokens} tokens, I/O wait ${pct(passWaits(res.prefill.pass) / res.prefill.pass.seconds)})` : '-'}`);

console.log('\nverify n positions in one pass against one serial step (resident run, fastest of 3)');
const expertSeconds = ((kinds.kda_moe?.seconds ?? 0) / (kinds.kda_moe?.bytes ?? 1)) * expertBytes;
const verifyRows = verifyFactors(res, expertSeconds).map((v) => {
  const one = verifyFactors(res, expertSeconds).find((x) => x.positions === 1) as { seconds: number };
  return { ...v, over_step: v.seconds / one.seconds };
});
for (const v of verifyRows) console.log(`  ${String(v.positions).padStart(2)} positions: ${v.seconds.toFixed(3)} s = ${v.over_step.toFixed(2)} steps; ${v.experts} distinct experts; without experts and waits ${v.factor.toFixed(2)}x`);

console.log('\nexperts and trunk read cold (page cache dropped before every pass)');
console.log('(the steady passes: the first, which fills the cache, left out)');
console.log('config            s/pass   I/O wait   expert GB/pass  trunk GB/pass  retained  engine MB/s/reader  disk MB/s/reader (aggregate)  disk seq MB/s  CPU share  read CPU-s/GB');
for (const r of ioRows)
  console.log(`${r.name.padEnd(16)} ${r.seconds.toFixed(3).padStart(7)} ${pct(r.io_share).padStart(10)} ${r.expert_gb_per_pass.toFixed(3).padStart(15)} ${r.trunk_gb_per_pass.toFixed(3).padStart(14)} ${pct(r.retained).padStart(9)} ${(r.engine_reader_rate / 1e6).toFixed(0).padStart(18)} ${(r.probe_reader_rate / 1e6).toFixed(0).padStart(17)} (${(r.probe_rate / 1e6).toFixed(0)}, after ${(r.probe_rate_after / 1e6).toFixed(0)}) ${(r.probe_sequential / 1e6).toFixed(0).padStart(13)} ${r.cpu_share.toFixed(2).padStart(10)} ${r.read_cpu_per_gb.toFixed(3).padStart(14)}`);
const blocks = runs.get('experts 50 %')?.disk_sequential ?? [];
if (earlyRows.length) {
  console.log('\nearly expert reads (--expert-prefetch on, run right after the same configuration without)');
  console.log('config            s/pass off -> on   I/O wait off -> on   guesses routed  early reads used  expert bytes');
  for (const r of earlyRows)
    console.log(`${r.name.padEnd(16)} ${r.seconds_off.toFixed(3).padStart(7)} -> ${r.seconds_on.toFixed(3)} ${r.wait_off.toFixed(3).padStart(10)} -> ${r.wait_on.toFixed(3)} ${pct(r.hit_rate).padStart(15)} ${pct(r.used).padStart(17)} ${`${r.bytes_ratio.toFixed(2)}x`.padStart(13)}`);
}
console.log(`disk, guest page cache dropped, sequential by block size (1 GB each, its own stretch, read twice, the second kept): ${blocks.map((d) => `${(d.block / 1e6).toFixed(1)} MB ${(probeRate(d) / 1e6).toFixed(0)} MB/s`).join(', ') || '-'}; whole checkpoint at the start ${(probeRate(seqProbe) / 1e6).toFixed(0)} MB/s`);

console.log('\nforecast against measured, the slice (profile kinds + each run\'s own disk probes, before and after it)');
for (const v of validation)
  console.log(`  ${v.name.padEnd(16)} measured ${v.measured.toFixed(3)} s a pass (mean; median ${v.measured_median.toFixed(3)}; compute ${v.measured_compute.toFixed(3)}), forecast ${v.forecast.toFixed(3)} s (compute ${v.forecast_compute.toFixed(3)}, disk ${v.forecast_disk.toFixed(3)}; ${v.error >= 0 ? '+' : ''}${pct(v.error)}), bound by ${v.bound}; resident step just before ${v.resident_step.toFixed(3)} s; disk ${(v.disk_sequential / 1e6).toFixed(0)} / ${(v.disk_expert / 1e6).toFixed(0)} MB/s${v.disk_mixed ? ` (both flat out at once ${(v.disk_mixed / 1e6).toFixed(0)}: ${v.disk_concurrency.toFixed(2)}x one after the other)` : ''}; cache served ${pct(v.hit_rate)} of expert requests (assumed ${pct(v.assumed_hit_rate)}): at that share ${v.forecast_at_hit_rate.toFixed(3)} s (${v.error_at_hit_rate >= 0 ? '+' : ''}${pct(v.error_at_hit_rate)}), and with the engine's own read rates too ${v.forecast_engine_rates.toFixed(3)} s (${v.error_engine_rates >= 0 ? '+' : ''}${pct(v.error_engine_rates)})`);
const within = (key: 'error' | 'error_at_hit_rate' | 'error_engine_rates') => validation.filter((v) => Math.abs(v[key]) <= TOLERANCE).length;
console.log(`  within 15 %: ${within('error')} of ${validation.length} as forecast (evenly spread routing), ${within('error_at_hit_rate')} at the share the cache served, ${within('error_engine_rates')} with the engine's own read rates`);

console.log(`\nfull release (93 layers) on this machine: memory ${(profile.memory_bandwidth / 1e9).toFixed(1)} GB/s, disk ${(profile.disk_sequential / 1e6).toFixed(0)} MB/s sequential, ${(profile.disk_expert / 1e6).toFixed(0)} MB/s expert reads, both at once ${(profile.disk_concurrency ?? 1).toFixed(2)}x the speed of one after the other`);
console.log(`preset        s/token  compute  disk     read GB/token  bound    verify 9 s  +1 position  --spec ${SPEC} always  paced (n)`);
for (const r of specRows) {
  const f = (full.get(1) as Forecast[]).find((x) => x.preset === r.preset) as Forecast;
  console.log(`${r.preset.padEnd(12)} ${f.seconds.toFixed(2).padStart(8)} ${f.compute_seconds.toFixed(2).padStart(8)} ${f.disk_seconds.toFixed(2).padStart(7)} ${((f.trunk_read_bytes + f.expert_read_bytes) / 1e9).toFixed(1).padStart(14)}  ${f.bound.padEnd(7)} ${r.verify_9_s.toFixed(2).padStart(10)} ${pct(r.extra_position).padStart(12)} ${r.spec_always_speedup.toFixed(2).padStart(14)}x ${r.paced_speedup.toFixed(2).padStart(8)}x (${r.paced_n})`);
}
if (pacing) {
  console.log(`replay acceptance on code edits (K3 tokenizer, --spec ${SPEC}): ${replays.map((r) => `${r.workload} ${pct(r.acceptance)}`).join(', ')}; median ${pct(acceptance)}`);
  console.log(`paced --spec ${SPEC} on the slice, drafts of the serial continuation replayed at ${pct(acceptance)} (same tokens as serial; two alternating pairs, median ratio):`);
  for (const r of pacing)
    console.log(`  ${r.name.padEnd(15)} serial ${r.serial.map((x) => x.toFixed(3)).join(' / ')} s/token, --spec ${SPEC} ${r.spec.map((x) => x.toFixed(3)).join(' / ')}: ${r.speedup.toFixed(2)}x; ${r.line}`);
}

if (prefillRows.length) {
  console.log(`\ntime to first token on the slice (prefill in the batch the plan allows; forecast from the resident run just before each and its own disk probes)`);
  console.log('config                     batch  passes  trunk layer reads  trunk GB  expert GB   seconds  (compute  waits)  forecast  (compute  disk)   error   engine rates  resident step');
  for (const r of prefillRows)
    console.log(`${r.name.padEnd(26)} ${String(r.batch).padStart(5)}${r.batch_sized ? '*' : ' '} ${String(r.passes).padStart(6)} ${`${r.trunk_layer_reads} (${r.passes} x ${r.streamed_layers})`.padStart(18)} ${(r.trunk_bytes / 1e9).toFixed(2).padStart(9)} ${(r.expert_bytes / 1e9).toFixed(2).padStart(10)} ${r.seconds.toFixed(2).padStart(9)}  (${r.compute.toFixed(2).padStart(7)} ${r.waits.toFixed(2).padStart(6)})  ${r.forecast.toFixed(2).padStart(8)}  (${r.forecast_compute.toFixed(2).padStart(7)} ${r.forecast_disk.toFixed(2).padStart(5)})  ${`${r.error >= 0 ? '+' : ''}${pct(r.error)}`.padStart(7)}  ${`${r.error_engine_rates >= 0 ? '+' : ''}${pct(r.error_engine_rates)}`.padStart(12)}  ${r.resident_step.toFixed(3)} s`);
  console.log('  (* the batch sized to memory)');
  for (const r of prefillRows)
    if (r.miss)
      console.log(`  ${r.name}: off by ${pct(r.error)}; the term furthest from the run is ${r.miss.term} (${r.miss.seconds >= 0 ? '+' : ''}${r.miss.seconds.toFixed(2)} s): compute forecast ${r.forecast_compute.toFixed(2)} s against ${r.compute.toFixed(2)} measured (${pct(r.compute_error)}), trunk ${(r.forecast_trunk_bytes / 1e9).toFixed(2)} GB against ${(r.trunk_bytes / 1e9).toFixed(2)}, experts ${(r.forecast_expert_bytes / 1e9).toFixed(2)} GB against ${(r.expert_bytes / 1e9).toFixed(2)}; lm_head ${r.head_seconds.toFixed(2)} s of the run`);
  const release = full.get(1) as Forecast[];
  console.log(`full release, time to first token (512 / 2,048 tokens) per preset: ${release.map((f) => `${f.preset} ${f.prefill.map((p) => `${p.seconds.toFixed(0)}`).join(' / ')} s (batch ${f.prefill[1].batch})`).join('; ')}`);
}
console.log(`machine profile: ${profileFile}${saveProfile ? ` (copied to ${defaultProfile})` : ''}`);

fs.writeFileSync(
  path.join(repoRoot, 'out/bench/scale.json'),
  JSON.stringify({ model, threads: THREADS, io_threads: IO_THREADS, reads: READS, configs, kinds: kindRows, bandwidth, cpu_share: cpuShare, cpu: cpuRows, step_seconds: stepSeconds, prefill: res.prefill ? { tokens: res.prefill.tokens, seconds: res.prefill.pass.seconds, waits: passWaits(res.prefill.pass), experts: passExperts(res.prefill.pass) } : null, verify: verifyRows, io: ioRows, early_reads: earlyRows, validation, profile, full: Object.fromEntries(full), replays, acceptance, spec: specRows, pacing, ttft: prefillRows }, null, 2) + '\n',
);
if (countErrors.length) throw new Error(`prefill counts disagree with the batch:\n${countErrors.join('\n')}`);
