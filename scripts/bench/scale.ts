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
// checks the forecast against every measured configuration of the slice, forecasts the
// full 93-layer release per preset, and projects `--spec 8` from the verify costs and the
// drafter's replay acceptance on code edits. Everything goes to out/bench/scale.json.
// Timing lives here, never in tests.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureFixture } from '../../test/support/fixtures';
import { k3Cli, repoRoot } from '../../test/support/paths';
import { ffnKind, parseConfig } from '../../test/reference/config';
import { expectedTensors, tensorBytes } from '../../test/reference/tensors';
import { codeEdits, parseReplay, writeCodeEdit } from './lib/code-edits';
import {
  kindFigures,
  layerKind,
  makeProfile,
  median,
  passExperts,
  passWaits,
  probeRate,
  steadySteps,
  verifyFactors,
  type KindName,
  type MachineProfile,
  type ScaleRun,
} from './lib/scale-profile';

const THREADS = Number(process.env.K3_SCALE_THREADS ?? 2);
const IO_THREADS = 2;
const SPEC = 8;
const model = process.env.K3_SCALE_MODEL ?? ensureFixture({ size: 'wide' });
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
    args: [resident, `--cache-slots=${oneToken}`, '--repeat', '--steps', '9', '--rounds', '4', '--prefill', '16', '--verify', '1,2,3,5,9', '--disk', '1,0,256', '--disk-gb', '1', '--disk-random', '40'],
  },
  ...[0.1, 0.25, 0.5].map((share) => ({
    name: `experts ${Math.round(share * 100)} %`,
    what: `trunk pinned, expert cache ${Math.round(share * 100)} % of the pool, page cache dropped before every pass`,
    args: [resident, `--cache-slots=${Math.max(config.topK, Math.round(share * poolSlots))}`, '--cold-each-token', '--steps', '6', '--disk', '0', '--disk-gb', '0.5', '--disk-random', '30'],
  })),
  {
    name: 'trunk streamed',
    what: 'largest layer pinned, the rest through two ring slots, expert cache 25 %, cold every pass',
    args: [`--trunk-gb=${GB(bySize[0] + 2 * bySize[1] + margin)}`, `--cache-slots=${Math.round(0.25 * poolSlots)}`, '--cold-each-token', '--steps', '5', '--disk', '256', '--disk-gb', '1', '--disk-random', '30'],
  },
  {
    name: 'floor',
    what: 'one ring slot of the largest layer, expert cache of one token (top_k slots), cold every pass',
    args: [`--trunk-gb=${GB(bySize[0] + margin)}`, `--cache-slots=${config.topK}`, '--cold-each-token', '--steps', '4', '--disk', '256', '--disk-gb', '1', '--disk-random', '30'],
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

console.log(`scale bench on ${model}: ${config.numLayers} layers, hidden ${config.hiddenSize}, ${config.numExperts} experts (top-${config.topK}) of ${(expertBytes / 1e6).toFixed(2)} MB, trunk ${GB(trunkBytes)} GB; ${THREADS} threads, ${IO_THREADS} expert readers; ${os.cpus().length} CPUs, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
const runs = new Map<string, ScaleRun>();
for (const c of configs) {
  const out = path.join(work, `${c.name.replace(/[^a-z0-9]+/g, '-')}.json`);
  const args = ['bench-scale', model, ...cliArgs(c, slotBytes), '--threads', String(THREADS), '--io-threads', String(IO_THREADS), '--out', out];
  const t0 = Date.now();
  k3(args);
  const run = JSON.parse(fs.readFileSync(out, 'utf8')) as ScaleRun;
  runs.set(c.name, run);
  console.log(`  ${c.name}: ${((Date.now() - t0) / 1000).toFixed(0)} s, peak RSS ${(run.peak_rss_bytes / 1e9).toFixed(2)} GB, load ${run.load_average.slice(0, 3).join(' ')} -> ${run.load_average.slice(3).join(' ')}`);
}
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

// ---- disk and experts ----------------------------------------------------------------------
function ioRow(name: string) {
  const r = runs.get(name) as ScaleRun;
  const passes = steadySteps(r);
  const seconds = median(passes.map((p) => p.seconds));
  const wait = median(passes.map((p) => passWaits(p) / p.seconds));
  const m = r.memory;
  const perReader = m.expert_read_seconds > 0 ? m.expert_bytes_read / m.expert_read_seconds : 0;
  const seq = r.disk_sequential[0];
  const rnd = r.disk_random[0];
  return {
    name,
    seconds,
    io_share: wait,
    expert_gb_per_pass: m.expert_bytes_read / r.steps.length / 1e9,
    trunk_gb_per_pass: m.trunk_bytes_read / r.steps.length / 1e9,
    retained: m.expert_requests ? m.expert_retained / m.expert_requests : 0,
    engine_reader_rate: perReader,
    probe_reader_rate: rnd ? rnd.bytes / rnd.read_seconds : 0,
    probe_rate: rnd ? probeRate(rnd) : 0,
    probe_sequential: seq ? probeRate(seq) : 0,
    overlap: m.expert_read_seconds > 0 ? 1 - m.expert_wait_seconds / (m.expert_read_seconds / IO_THREADS) : 0,
    peak_rss: r.peak_rss_bytes,
    load: r.load_average,
  };
}
const ioRows = configs.filter((c) => c.name !== 'resident').map((c) => ioRow(c.name));

// ---- the machine profile ---------------------------------------------------------------------
const seqProbe = res.disk_sequential.reduce((a, b) => (b.block > a.block ? b : a));
const profile: MachineProfile = makeProfile(res, { sequential: seqProbe, expert: res.disk_random[0] }, expertBytes,
  `npm run bench -- scale on ${path.basename(model)}, ${new Date().toISOString()}, load ${res.load_average.slice(0, 3).join(' ')}`);
const profileFile = path.join(repoRoot, 'out/bench/machine-profile.json');
fs.writeFileSync(profileFile, JSON.stringify(profile, null, 2) + '\n');
const defaultProfile = process.env.K3_MACHINE_PROFILE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'k3/machine-profile.json');
if (process.env.K3_SCALE_SAVE_PROFILE !== '0') {
  fs.mkdirSync(path.dirname(defaultProfile), { recursive: true });
  fs.copyFileSync(profileFile, defaultProfile);
}

interface Forecast {
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
}
function forecast(args: string[], profilePath = profileFile): Forecast[] {
  return JSON.parse(k3(['forecast', ...args, '--profile', profilePath, '--json'])) as Forecast[];
}

// ---- the forecast against every measured configuration of the slice ------------------------
// Each run is forecast with the profile's kinds and bandwidth, and the disk rates its own
// probes measured just before it (the same files, the same tier of a virtual disk).
const validation = configs.map((c) => {
  const r = runs.get(c.name) as ScaleRun;
  const own: MachineProfile = {
    ...profile,
    disk_sequential: r.disk_sequential.length ? probeRate(r.disk_sequential[r.disk_sequential.length - 1]) : profile.disk_sequential,
    disk_expert: r.disk_random.length ? probeRate(r.disk_random[0]) : profile.disk_expert,
  };
  const file = path.join(work, `profile-${c.name.replace(/[^a-z0-9]+/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(own, null, 2) + '\n');
  const [f] = forecast([model, '--trunk-gb', String(r.memory.trunk_budget_bytes / 1e9), '--cache-gb', String(r.memory.expert_cache_budget_bytes / 1e9)], file);
  const measured = median(steadySteps(r).map((p) => p.seconds));
  return { name: c.name, measured, forecast: f.seconds, error: f.seconds / measured - 1, bound: f.bound, disk_sequential: own.disk_sequential, disk_expert: own.disk_expert };
});

// ---- the full release per preset, serial and verifying ---------------------------------------
const positions = [1, 2, 3, 5, 9];
const full = new Map<number, Forecast[]>(positions.map((n) => [n, forecast(['--positions', String(n)])]));

// The drafter's replay acceptance on code edits, with this checkpoint's tokenizer.
const replays = codeEdits().map((e) => {
  const base = path.join(work, e.workload.replace(/\//g, '-'));
  writeCodeEdit(e, base);
  const r = parseReplay(k3(['draft-replay', '--tok', model, '--prefix-file', `${base}.prefix`, '--truth-file', `${base}.truth`, '--context-file', `${base}.material`, '--spec', String(SPEC)]));
  return { workload: e.workload, acceptance: r.drafted ? r.accepted / r.drafted : 0, tokens_per_pass: r.tokensPerPass };
});
const acceptance = median(replays.map((r) => r.acceptance));

/**
 * Expected tokens per second of rounds drafting n tokens, each accepted with probability a
 * in turn: j accepted (j < n) emits j + 1 tokens and costs a verify pass of n + 1 positions
 * plus a replay pass of j + 1; all n accepted emit n + 1 and need no replay.
 */
function specRate(pass: (positions: number) => number, n: number, a: number): number {
  let tokens = 0;
  let time = 0;
  for (let j = 0; j <= n; j++) {
    const p = j < n ? a ** j * (1 - a) : a ** n;
    tokens += p * (j + 1);
    time += p * (pass(n + 1) + (j < n ? pass(j + 1) : 0));
  }
  return tokens / time;
}
const presets = (full.get(1) as Forecast[]).map((f) => f.preset);
const specRows = presets.map((preset) => {
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

// ---- pacing on the slice: does it let drafts through when a pass costs seconds? ------------
// Serial greedy first; then --spec 8 with the serial continuation as drafting material (what
// a drafter that had seen this text would propose), resident budgets.
const ids = Array.from({ length: 8 }, (_, k) => (k * 7919 + 13) % 150000).join(',');
const pacingArgs = ['--trunk-gb', GB(trunkBytes + margin), '--cache-gb', ((oneToken * slotBytes + 1e5) / 1e9).toFixed(6), '--threads', String(THREADS)];
const gen = 12;
const serialOut = path.join(work, 'pacing-serial.json');
const serialText = k3([model, '--ids', ids, '--gen', String(gen), '--incremental', ...pacingArgs, '--out', serialOut]);
const serialRun = JSON.parse(fs.readFileSync(serialOut, 'utf8')) as { generated_ids: number[]; seconds_per_token: number };
const specOut = path.join(work, 'pacing-spec.json');
const specText = k3([model, '--ids', ids, '--gen', String(gen), '--spec', String(SPEC), '--context-ids', serialRun.generated_ids.join(','), ...pacingArgs, '--out', specOut]);
const specRun = JSON.parse(fs.readFileSync(specOut, 'utf8')) as { generated_ids: number[]; seconds_per_token: number };
if (JSON.stringify(specRun.generated_ids) !== JSON.stringify(serialRun.generated_ids)) throw new Error('speculation changed the output');
const specLine = /^spec: .*$/m.exec(specText)?.[0] ?? '';
void serialText;

// ---- tables ----------------------------------------------------------------------------------
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const ms = (s: number) => `${(1000 * s).toFixed(0)} ms`;
console.log(`\nresident decode per layer kind (${THREADS} threads; triad median ${(bandwidth / 1e9).toFixed(1)} GB/s; CPU share ${cpuShare.toFixed(2)} of ${THREADS} cores; load ${res.load_average.slice(0, 3).join(' ')})`);
console.log('kind        time/token    FFN part     weight MB    GB/s   of triad (median round, range)');
for (const r of kindRows)
  console.log(`${r.kind.padEnd(10)} ${ms(r.seconds).padStart(10)} ${ms(r.ffn_seconds).padStart(10)} ${(r.bytes / 1e6).toFixed(0).padStart(12)} ${(r.achieved / 1e9).toFixed(2).padStart(7)}   ${pct(r.of_bound)} (${pct(r.rounds[0])}..${pct(r.rounds[1])})`);
const stepSeconds = median(steady.map((p) => p.seconds));
console.log(`whole step ${stepSeconds.toFixed(3)} s; prefill ${res.prefill ? `${(res.prefill.tokens / res.prefill.pass.seconds).toFixed(2)} tokens/s (${res.prefill.tokens} tokens, I/O wait ${pct(passWaits(res.prefill.pass) / res.prefill.pass.seconds)})` : '-'}`);

console.log('\nverify n positions in one pass against one serial step (resident run, fastest of 3)');
const expertSeconds = ((kinds.kda_moe?.seconds ?? 0) / (kinds.kda_moe?.bytes ?? 1)) * expertBytes;
const verifyRows = verifyFactors(res, expertSeconds).map((v) => {
  const one = verifyFactors(res, expertSeconds).find((x) => x.positions === 1) as { seconds: number };
  return { ...v, over_step: v.seconds / one.seconds };
});
for (const v of verifyRows) console.log(`  ${String(v.positions).padStart(2)} positions: ${v.seconds.toFixed(3)} s = ${v.over_step.toFixed(2)} steps; ${v.experts} distinct experts; without experts and waits ${v.factor.toFixed(2)}x`);

console.log('\nexperts and trunk read cold (page cache dropped before every pass)');
console.log('config            s/pass   I/O wait   expert GB/pass  trunk GB/pass  retained  engine MB/s/reader  disk MB/s/reader (aggregate)  disk seq MB/s');
for (const r of ioRows)
  console.log(`${r.name.padEnd(16)} ${r.seconds.toFixed(3).padStart(7)} ${pct(r.io_share).padStart(10)} ${r.expert_gb_per_pass.toFixed(3).padStart(15)} ${r.trunk_gb_per_pass.toFixed(3).padStart(14)} ${pct(r.retained).padStart(9)} ${(r.engine_reader_rate / 1e6).toFixed(0).padStart(18)} ${(r.probe_reader_rate / 1e6).toFixed(0).padStart(17)} (${(r.probe_rate / 1e6).toFixed(0)}) ${(r.probe_sequential / 1e6).toFixed(0).padStart(13)}`);

console.log('\nforecast against measured, the slice (profile kinds + each run\'s own disk probes)');
for (const v of validation) console.log(`  ${v.name.padEnd(16)} measured ${v.measured.toFixed(3)} s, forecast ${v.forecast.toFixed(3)} s (${v.error >= 0 ? '+' : ''}${pct(v.error)}), bound by ${v.bound}`);

console.log(`\nfull release (93 layers) on this machine: memory ${(profile.memory_bandwidth / 1e9).toFixed(1)} GB/s, disk ${(profile.disk_sequential / 1e6).toFixed(0)} MB/s sequential, ${(profile.disk_expert / 1e6).toFixed(0)} MB/s expert reads`);
console.log(`preset        s/token  compute  disk     read GB/token  bound    verify 9 s  +1 position  --spec ${SPEC} always  paced (n)`);
for (const r of specRows) {
  const f = (full.get(1) as Forecast[]).find((x) => x.preset === r.preset) as Forecast;
  console.log(`${r.preset.padEnd(12)} ${f.seconds.toFixed(2).padStart(8)} ${f.compute_seconds.toFixed(2).padStart(8)} ${f.disk_seconds.toFixed(2).padStart(7)} ${((f.trunk_read_bytes + f.expert_read_bytes) / 1e9).toFixed(1).padStart(14)}  ${f.bound.padEnd(7)} ${r.verify_9_s.toFixed(2).padStart(10)} ${pct(r.extra_position).padStart(12)} ${r.spec_always_speedup.toFixed(2).padStart(14)}x ${r.paced_speedup.toFixed(2).padStart(8)}x (${r.paced_n})`);
}
console.log(`replay acceptance on code edits (K3 tokenizer, --spec ${SPEC}): ${replays.map((r) => `${r.workload} ${pct(r.acceptance)}`).join(', ')}; median ${pct(acceptance)}`);
console.log(`pacing on the slice (resident): serial ${serialRun.seconds_per_token.toFixed(3)} s/token, --spec ${SPEC} with the continuation as material ${specRun.seconds_per_token.toFixed(3)} s/token (${(serialRun.seconds_per_token / specRun.seconds_per_token).toFixed(2)}x); ${specLine}`);
console.log(`machine profile: ${profileFile}${process.env.K3_SCALE_SAVE_PROFILE !== '0' ? ` (copied to ${defaultProfile})` : ''}`);

fs.writeFileSync(
  path.join(repoRoot, 'out/bench/scale.json'),
  JSON.stringify({ model, threads: THREADS, io_threads: IO_THREADS, configs, kinds: kindRows, bandwidth, cpu_share: cpuShare, step_seconds: stepSeconds, prefill: res.prefill ? { tokens: res.prefill.tokens, seconds: res.prefill.pass.seconds, waits: passWaits(res.prefill.pass), experts: passExperts(res.prefill.pass) } : null, verify: verifyRows, io: ioRows, validation, profile, full: Object.fromEntries(full), replays, acceptance, spec: specRows, pacing: { serial: serialRun.seconds_per_token, spec: specRun.seconds_per_token, line: specLine } }, null, 2) + '\n',
);
