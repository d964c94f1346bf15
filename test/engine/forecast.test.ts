// forecast.test.ts - the per-token forecast (native/src/forecast.h) through `k3 forecast` and
// `k3 --list-presets`, from hand-made machine profiles: a resident model costs its kinds'
// seconds scaled by its bytes and reads nothing; streaming adds the disk as the model says
// (one ring slot in series, two overlapped, both kinds at once as measured together); a
// faster disk never forecasts slower; a verifying pass costs more than a serial one; a
// mapped model has no forecast; a bad profile is refused naming the field. Whether the forecast matches measured passes is
// the scale bench's business (docs/SCALE.md), not a test's.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { expectedTensors, ffnKind, mixerKind, parseConfig, tensorBytes } from '../reference';
import type { ForecastRow } from '../../scripts/bench/lib/scale-profile';
import { engine, k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const dir = ensureFixture({ gate: 'lowerbound' });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-forecast-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

const KINDS = {
  dense: { seconds: 0.3, ffn_seconds: 0.2, bytes: 2e9 },
  kda_moe: { seconds: 0.2, ffn_seconds: 0.1, bytes: 1.5e9 },
  mla_moe: { seconds: 0.15, ffn_seconds: 0.1, bytes: 1e9 },
  lm_head: { seconds: 0.25, ffn_seconds: 0, bytes: 2.3e9 },
};

function profile(overrides: Record<string, unknown> = {}): string {
  const file = path.join(tmp, `profile-${Math.random().toString(36).slice(2)}.json`);
  const p = {
    format: 'k3-machine-profile',
    version: 3,
    source: 'test',
    threads: 2,
    io_threads: 2,
    memory_bandwidth: 20e9,
    memory_bandwidth_reading: 20e9,
    disk_sequential: 1e9,
    disk_expert: 0.5e9,
    kinds: KINDS,
    verify: [
      { positions: 1, factor: 1 },
      { positions: 3, factor: 1.5 },
    ],
    ...overrides,
  };
  fs.writeFileSync(file, JSON.stringify(p));
  return file;
}

type Forecast = ForecastRow;

function forecast(args: string[], env: Record<string, string> = {}): Forecast[] {
  const r = spawnSync(k3Binaries.plain, ['forecast', ...args, '--json'], { encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as Forecast[];
}

// The tiny fixture's trunk bytes per layer and its lm_head, from the spec's tensor table.
const config = parseConfig(JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')));
const tensors = expectedTensors(config);
const layerBytes = Array.from({ length: config.numLayers }, (_, l) =>
  [...tensors.entries()]
    .filter(([n, t]) => n.includes(`.layers.${l}.`) && !n.includes('.experts.') && t.shape.length === 2 && t.dtype === 'BF16')
    .reduce((s, [, t]) => s + tensorBytes(t), 0),
);
const expertBytes = [...tensors.entries()].filter(([n]) => n.includes('.layers.1.block_sparse_moe.experts.0.')).reduce((s, [, t]) => s + tensorBytes(t), 0);
const lmHead = tensorBytes(tensors.get('language_model.lm_head.weight') as { dtype: 'BF16'; shape: number[] });
const slot = Math.ceil(expertBytes / 64) * 64;
const pool = config.numExperts * layerBytes.filter((_, l) => ffnKind(config, l) === 'moe').length;

test('a resident model forecasts its kinds\' seconds per byte times its own bytes, and reads nothing', () => {
  const [f] = forecast([dir, '--profile', profile(), '--trunk-gb', '1', '--cache-gb', String((pool * slot) / 1e9 + 1e-4)]);
  // Within 1 %: the engine counts each layer's tensors 64-byte aligned in a slot.
  let want = (KINDS.lm_head.seconds / KINDS.lm_head.bytes) * lmHead;
  layerBytes.forEach((b, l) => {
    const moe = ffnKind(config, l) === 'moe';
    const k = !moe ? KINDS.dense : mixerKind(config, l) === 'kda' ? KINDS.kda_moe : KINDS.mla_moe;
    want += (k.seconds / k.bytes) * (b + (moe ? config.topK * slot : 0));
  });
  assert.ok(Math.abs(f.compute_seconds - want) < 1e-2 * want, `${f.compute_seconds} against ${want}`);
  assert.equal(f.seconds, f.compute_seconds);
  assert.equal(f.disk_seconds, 0);
  assert.equal(f.expert_hit_rate, 1);
  assert.equal(f.bound, 'memory');
});

test('the expert cache keeps what an LRU keeps when routing is spread evenly: nothing below one pass\'s experts, more passes\' worth as it grows', () => {
  const p = profile();
  const moeLayers = pool / config.numExperts;
  const q = config.topK / config.numExperts; // one position: the share of a layer's experts a pass asks for
  // An independent count: the longest window of j passes whose distinct experts fit in the slots.
  const lru = (slots: number) => {
    let j = 0;
    while (pool * (1 - (1 - q) ** (j + 1)) <= slots + 1e-9) j++;
    return 1 - (1 - q) ** j;
  };
  const hits: number[] = [];
  for (let slots = config.topK; slots < pool; slots++) {
    const [f] = forecast([dir, '--profile', p, '--trunk-gb', '1', '--cache-gb', String((slots * slot + 1) / 1e9)]);
    assert.ok(Math.abs(f.expert_hit_rate - lru(slots)) < 1e-6, `${slots} slots: ${f.expert_hit_rate} against ${lru(slots)}`);
    hits.push(f.expert_hit_rate);
  }
  assert.equal(hits[0], 0, 'one layer\'s experts cached: every pass evicts them before they come round again');
  assert.ok(hits.every((h, i) => i === 0 || h >= hits[i - 1]), 'a larger cache never keeps less');
  assert.ok(hits.some((h) => h > 0) && moeLayers >= 1);
});

test('streaming adds the disk: in series through one ring slot, overlapped through two', () => {
  const p = profile({ disk_sequential: 1e6, disk_expert: 1e6 }); // slow enough to dominate
  const largest = Math.max(...layerBytes);
  const [one] = forecast([dir, '--profile', p, '--trunk-gb', String((largest + 1e5) / 1e9), '--cache-gb', String((config.topK * slot + 10) / 1e9)]);
  assert.equal(one.bound, 'disk');
  assert.ok(one.trunk_read_bytes > 0.99 * layerBytes.reduce((a, b) => a + b, 0));
  // One slot: compute, trunk reads and exposed expert reads add up.
  const trunkSeconds = one.trunk_read_bytes / 1e6;
  assert.ok(Math.abs(one.seconds - (one.compute_seconds + trunkSeconds + one.exposed_expert_seconds)) < 1e-6 * one.seconds);
  const [two] = forecast([dir, '--profile', p, '--trunk-gb', String((3 * largest) / 1e9), '--cache-gb', String((config.topK * slot + 10) / 1e9)]);
  // Two slots (or more pinned): the larger of compute and disk, never their sum.
  assert.ok(Math.abs(two.seconds - Math.max(two.compute_seconds + two.exposed_expert_seconds, two.disk_seconds)) < 1e-9 * two.seconds);
  assert.ok(two.seconds < one.seconds);
});

test('trunk and expert reads at once share the disk: each byte takes its own kind\'s time', () => {
  const largest = Math.max(...layerBytes);
  const budgets = [dir, '--trunk-gb', String((3 * largest) / 1e9), '--cache-gb', String((config.topK * slot + 10) / 1e9)];
  const D = 1e6, X = 0.5e6;
  const [f] = forecast([...budgets, '--profile', profile({ disk_sequential: D, disk_expert: X })]);
  const S = f.trunk_read_bytes, E = f.expert_read_bytes;
  assert.ok(S > 0 && E > 0, 'both kinds of read in one pass');
  assert.ok(Math.abs(f.disk_seconds - (S / D + E / X)) < 1e-5 * f.disk_seconds, `${f.disk_seconds} against ${S / D + E / X}`);
  assert.equal(f.bound, 'disk');
});

test('where both kinds read at once, their time-shared reads are scaled by the measured concurrency; where one kind reads it is not used', () => {
  const largest = Math.max(...layerBytes);
  const cache = ['--cache-gb', String((config.topK * slot + 10) / 1e9)];
  const D = 1e6, X = 0.5e6, F = 0.8;
  const plain = profile({ disk_sequential: D, disk_expert: X });
  const measured = profile({ disk_sequential: D, disk_expert: X, disk_concurrency: F });
  // Two ring slots: the trunk's reader and the expert readers read at once.
  const two = [dir, '--trunk-gb', String((3 * largest) / 1e9), ...cache];
  const [f] = forecast([...two, '--profile', measured]);
  const S = f.trunk_read_bytes, E = f.expert_read_bytes;
  assert.ok(S > 0 && E > 0, 'both kinds of read in one pass');
  const want = (S / D + E / X) / F;
  assert.ok(Math.abs(f.disk_seconds - want) < 1e-5 * want, `${f.disk_seconds} against ${want}`);
  assert.ok(Math.abs(f.seconds - Math.max(f.compute_seconds + f.exposed_expert_seconds, f.disk_seconds)) < 1e-9 * f.seconds);
  // One ring slot reads the trunk while nothing else reads, and a pinned trunk reads only
  // experts: the same forecast with or without it.
  for (const budgets of [[dir, '--trunk-gb', String((largest + 1e5) / 1e9), ...cache], [dir, '--trunk-gb', '1', ...cache]]) {
    const [a] = forecast([...budgets, '--profile', plain]);
    const [b] = forecast([...budgets, '--profile', measured]);
    assert.equal(b.seconds, a.seconds, budgets.join(' '));
    assert.equal(b.disk_seconds, a.disk_seconds);
  }
});

test('a pass that reads computes slower by the triad alone over the triad beside reads, and hides more of its reads', () => {
  const resident = ['--trunk-gb', '200', '--cache-gb', '1600']; // the release whole in memory: nothing read
  const seen = new Set<boolean>();
  for (const budgets of [['--preset', 'desktop'], ['--preset', 'laptop'], resident]) {
    const [plain] = forecast(['--profile', profile(), ...budgets]);
    const [slowed] = forecast(['--profile', profile({ memory_bandwidth_reading: 16e9 }), ...budgets]);
    const reads = plain.trunk_read_bytes + plain.expert_read_bytes > 0;
    const want = plain.compute_seconds * (reads ? 20 / 16 : 1);
    assert.ok(Math.abs(slowed.compute_seconds - want) < 1e-5 * want, `${budgets}: ${slowed.compute_seconds} against ${want}`);
    if (reads) assert.ok(slowed.exposed_expert_seconds <= plain.exposed_expert_seconds, 'the slower FFN hides more of its reads');
    else assert.equal(slowed.seconds, plain.seconds, 'a pass that reads nothing computes at the resident speed');
    seen.add(reads);
  }
  assert.deepEqual([...seen].sort(), [false, true], 'budgets that read and budgets that do not');
  // A triad faster beside reads than alone is noise: never a speed-up.
  const [plain] = forecast(['--profile', profile(), '--preset', 'desktop']);
  const [faster] = forecast(['--profile', profile({ memory_bandwidth_reading: 30e9 }), '--preset', 'desktop']);
  assert.equal(faster.compute_seconds, plain.compute_seconds);
});

test('compute slows beside reads only while they last: a pass whose compute outlasts its reads pays (1 - 1/m) of the reads, not m of itself', () => {
  // The release's desktop preset: two ring slots, so trunk and expert reads both run beside
  // compute. With kinds 10^4 times slower, compute outlasts the reads (a prefill's case).
  const heavy = Object.fromEntries(Object.entries(KINDS).map(([k, v]) => [k, { ...v, seconds: v.seconds * 1e4, ffn_seconds: v.ffn_seconds * 1e4 }]));
  const budgets = ['--preset', 'desktop'];
  const [plain] = forecast(['--profile', profile({ kinds: heavy }), ...budgets]);
  const [slowed] = forecast(['--profile', profile({ kinds: heavy, memory_bandwidth_reading: 16e9 }), ...budgets]);
  assert.ok(plain.compute_seconds > 1.25 * slowed.disk_seconds, 'compute outlasts the reads');
  const want = plain.compute_seconds + slowed.disk_seconds * (1 - 16 / 20);
  assert.ok(Math.abs(slowed.compute_seconds - want) < 1e-5 * want, `${slowed.compute_seconds} against ${want}`);
  // The light kinds: the reads outlast compute, which slows by m throughout (the test above).
  const [light] = forecast(['--profile', profile({ memory_bandwidth_reading: 16e9 }), ...budgets]);
  const [lightPlain] = forecast(['--profile', profile(), ...budgets]);
  assert.ok(lightPlain.compute_seconds * 1.25 <= light.disk_seconds, 'the reads outlast compute');
  // And a prompt's passes, minutes of compute beside seconds of reads, slow by far less than m.
  const p2048 = (f: Forecast) => f.prefill[1];
  assert.ok(p2048(slowed).compute_seconds < 1.05 * p2048(plain).compute_seconds, `${p2048(slowed).compute_seconds} against ${p2048(plain).compute_seconds}`);
});

test('a prompt\'s passes follow the layers\' factor without the lm_head where the profile has it; verify passes keep theirs', () => {
  const budgets = ['--preset', 'desktop', '--positions', '3'];
  const [plain] = forecast(['--profile', profile(), ...budgets]);
  const layers = [{ positions: 1, factor: 1 }, { positions: 3, factor: 1.2 }];
  const [lighter] = forecast(['--profile', profile({ prefill_factor: layers }), ...budgets]);
  assert.equal(lighter.seconds, plain.seconds, 'a verify pass of 3 positions is unchanged');
  for (const i of [0, 1]) assert.ok(lighter.prefill[i].compute_seconds < plain.prefill[i].compute_seconds, `prefill ${i}: ${lighter.prefill[i].compute_seconds} against ${plain.prefill[i].compute_seconds}`);
  const r = spawnSync(k3Binaries.plain, ['forecast', '--profile', profile({ prefill_factor: [{ positions: 2, factor: 1 }] }), '--json'], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /prefill_factor\[0\] must be \{positions, factor\} with positions ascending from 1/);
});

test('a faster disk never forecasts slower, and verifying positions costs more than one', () => {
  const budgets = ['--preset', 'laptop'];
  const slow = forecast(['--profile', profile({ disk_sequential: 3e8, disk_expert: 3e8 }), ...budgets]);
  const fast = forecast(['--profile', profile({ disk_sequential: 3e9, disk_expert: 3e9 }), ...budgets]);
  assert.ok(fast[0].seconds < slow[0].seconds);
  const p = profile();
  const serial = forecast(['--profile', p, '--positions', '1'])[0];
  const verify = forecast(['--profile', p, '--positions', '3'])[0];
  assert.ok(verify.seconds > serial.seconds && verify.expert_read_bytes > serial.expert_read_bytes);
  // Every preset of the release is forecast, and auto where this machine allows it.
  assert.deepEqual(
    forecast(['--profile', p], { K3_MEM_AVAILABLE: '64e9' }).map((f) => f.preset),
    [...engine.presets().map((p) => p.name), 'auto'],
  );
});

test('a mapped model has no forecast, and a bad profile is refused naming the field', () => {
  const mapped = spawnSync(k3Binaries.plain, ['forecast', dir, '--profile', profile(), '--trunk-gb', 'map'], { encoding: 'utf8' });
  assert.equal(mapped.status, 1);
  assert.match(mapped.stderr, /the trunk is mapped, so the page cache decides what stays in memory/);
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ disk_expert: -1 }, /disk_expert must be a positive number/],
    [{ disk_concurrency: 0 }, /disk_concurrency must be a number from 0\.1 to 10/],
    [{ disk_concurrency: 'x' }, /disk_concurrency must be a number from 0\.1 to 10/],
    [{ memory_bandwidth_reading: 'fast' }, /memory_bandwidth_reading must be a positive number, found string/],
    [{ kinds: { ...KINDS, mla_moe: undefined } }, /kinds\.mla_moe is missing, expected an object/],
    [{ kinds: { ...KINDS, dense: { seconds: 1, ffn_seconds: 2, bytes: 1 } } }, /kinds\.dense\.ffn_seconds must be a number from 0 to its seconds/],
    [{ verify: [{ positions: 2, factor: 1 }] }, /verify\[0\] must be .* positions ascending from 1/],
    [{ version: 1 }, /is not a k3 machine profile of version 3 \(format, version\): run `npm run bench -- scale`/],
    [{ check: { configurations: 5, within: 6, worst: 0.2 } }, /check must be \{configurations: 1\.\.64, within: 0\.\.configurations/],
    [{ check: { configurations: 5, within: 3, worst: -1 } }, /check must be .*worst: a number from 0 to 1000/],
    [{ check: [] }, /check must be/],
  ];
  for (const [bad, message] of cases) {
    const r = spawnSync(k3Binaries.plain, ['forecast', '--profile', profile(bad), '--preset', 'laptop'], { encoding: 'utf8' });
    assert.equal(r.status, 1, JSON.stringify(bad));
    assert.match(r.stderr, message);
  }
  const missing = spawnSync(k3Binaries.plain, ['forecast', '--profile', path.join(tmp, 'none.json')], { encoding: 'utf8' });
  assert.match(missing.stderr, /none\.json cannot be read: run `npm run bench -- scale`/);
  const huge = path.join(tmp, 'huge.json');
  fs.writeFileSync(huge, ' '.repeat(70_000));
  assert.match(spawnSync(k3Binaries.plain, ['forecast', '--profile', huge], { encoding: 'utf8' }).stderr, /70000 bytes, more than a machine profile's 65536/);
});

test('--list-presets shows the forecast seconds per token from the machine profile', () => {
  const p = profile();
  const r = spawnSync(k3Binaries.plain, ['--list-presets'], { encoding: 'utf8', env: { ...process.env, K3_MACHINE_PROFILE: p, K3_MEM_AVAILABLE: '64e9' } });
  assert.equal(r.status, 0, r.stderr);
  const f = forecast(['--profile', p], { K3_MEM_AVAILABLE: '64e9' });
  assert.ok(f.some((x) => x.preset === 'auto'));
  for (const row of f) {
    const shown = new RegExp(`\\n  ${row.preset} .* ([\\d.]+) +(\\d+)/(\\d+)  \\S`).exec(r.stdout);
    assert.ok(shown && Math.abs(Number(shown[1]) - row.seconds) < 0.006, `${row.preset}: ${shown?.[1]} against ${row.seconds}`);
    assert.equal(Number(shown[2]), Math.round(row.prefill[0].seconds), `${row.preset}: first token after 512`);
    assert.equal(Number(shown[3]), Math.round(row.prefill[1].seconds), `${row.preset}: first token after 2,048`);
  }
  assert.ok(r.stdout.includes(`s/token: from ${p}`));
  assert.doesNotMatch(r.stdout, /forecast checked/, 'a profile without a check claims none');
});

test('a profile that records its check carries it into every forecast, the table and --list-presets', () => {
  const p = profile({ check: { configurations: 5, within: 3, worst: 0.785 } });
  for (const row of forecast(['--profile', p])) {
    assert.equal(row.check_configurations, 5);
    assert.equal(row.check_within, 3);
    assert.equal(row.check_worst, 0.785);
  }
  assert.equal(forecast(['--profile', profile()])[0].check_configurations, 0);
  const table = spawnSync(k3Binaries.plain, ['forecast', '--profile', p], { encoding: 'utf8' });
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /\nforecast checked where the profile was measured: 3 of 5 configurations of the slice within 15 %, the worst off by 79 %\n/);
  const listed = spawnSync(k3Binaries.plain, ['--list-presets'], { encoding: 'utf8', env: { ...process.env, K3_MACHINE_PROFILE: p } });
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /\nforecast checked where the profile was measured: 3 of 5 configurations of the slice within 15 %, the worst off by 79 %\n/);
});

test('time to first token: one trunk read per pass of the batch, so the sized batch reads it once and batches of 128 sixteen times for 2,048 tokens', () => {
  // A trunk budget of two layers: the rest streams through the ring.
  const trunk = String((2.05 * Math.max(...layerBytes)) / 1e9);
  const budgets = [dir, '--profile', profile(), '--trunk-gb', trunk, '--cache-gb', '0.01'];
  const env = { K3_MEM_AVAILABLE: '64e9' };
  const [sized] = forecast(budgets, env);
  const [small] = forecast([...budgets, '--batch', '128'], env);
  const [one] = forecast([...budgets, '--batch', '1'], env);
  assert.ok(sized.trunk_read_bytes > 0, 'the trunk streams');
  // Sized: the default 4096-token context's batch, all of it with 64 GB available.
  for (const [row, batch] of [[sized, 4096], [small, 128], [one, 1]] as const) {
    const [p512, p2048] = row.prefill;
    assert.deepEqual([p512.tokens, p2048.tokens], [512, 2048]);
    assert.equal(p2048.batch, batch);
    assert.equal(p2048.passes, Math.ceil(2048 / batch));
    assert.equal(p512.passes, Math.ceil(512 / p512.batch));
    // Every pass reads the streamed trunk once, as a decode step does.
    assert.ok(Math.abs(p2048.trunk_read_bytes - p2048.passes * row.trunk_read_bytes) <= 1, `batch ${batch}: trunk bytes`);
    assert.ok(p2048.seconds > p512.seconds, `batch ${batch}: a longer prompt takes longer`);
  }
  // Fewer passes read less and take less time; one token per pass is N decode-like steps.
  assert.ok(sized.prefill[1].seconds < small.prefill[1].seconds && small.prefill[1].seconds < one.prefill[1].seconds);
  assert.ok(sized.prefill[1].expert_read_bytes <= small.prefill[1].expert_read_bytes);
  // One token per pass is 2,048 decode-like steps but for the lm_head, which a prompt runs
  // once (its last token's logits): at most 2,047 heads' worth less (the profile's triad
  // beside reads is the triad, so a head costs the same in every pass).
  const head = (KINDS.lm_head.seconds / KINDS.lm_head.bytes) * lmHead;
  const steps = 2048 * one.seconds; // both printed to 6 digits
  assert.ok(one.prefill[1].seconds <= steps * (1 + 1e-5) && one.prefill[1].seconds >= steps - 2047 * head - 1e-5 * steps, `${one.prefill[1].seconds} against ${steps} - 2047 x ${head}`);
  // The table shows both beside s/token, with the batch.
  const table = spawnSync(k3Binaries.plain, ['forecast', ...budgets], { encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, new RegExp(` ${Math.round(sized.prefill[0].seconds)} +${Math.round(sized.prefill[1].seconds)} +4096\\n`));
  assert.match(table.stdout, /ttft: seconds to the first token of a 512- and a 2,048-token prompt/);
});

test('time to first token runs the lm_head once, for the prompt\'s last token, however many passes and positions', () => {
  const budgets = ['--trunk-gb', '1', '--cache-gb', String((pool * slot) / 1e9 + 1e-4), '--batch', '128'];
  const heavy = { ...KINDS, lm_head: { ...KINDS.lm_head, seconds: 1000 } };
  const [plain] = forecast([dir, '--profile', profile(), ...budgets]);
  const [slow] = forecast([dir, '--profile', profile({ kinds: heavy }), ...budgets]);
  const once = ((1000 - KINDS.lm_head.seconds) / KINDS.lm_head.bytes) * lmHead;
  for (const i of [0, 1]) {
    assert.equal(slow.prefill[i].passes, [4, 16][i]);
    const extra = slow.prefill[i].compute_seconds - plain.prefill[i].compute_seconds;
    assert.ok(Math.abs(extra - once) < 1e-4 * once, `${slow.prefill[i].tokens} tokens: the head added ${extra} s, one row costs ${once} s`);
  }
});
