// memory.test.ts - memory is a dial: on the `medium` fixture (256 experts per layer, so the
// pool is far larger than the cache) an expert cache of under 10% of the pool and a trunk
// budget below the dense weights give the fully mapped run's greedy tokens and first-step
// logits bit for bit, within the plan printed before loading; a failed expert read fails
// the run with its own status and emits no token; presets list, `auto` sizes from
// MemAvailable trunk first, and budgets that cannot fit are refused before loading.
// MemAvailable is pinned with K3_MEM_AVAILABLE where a test needs a particular machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { addonFile } from '../support/paths';
import type { MemoryReport } from '../../scripts/bench/lib/memory-report';

const PROMPT = '1512,12,19,4,2766,11,220,1008';

/** Measured peak RSS may exceed the plan by the process itself (executable, libc, thread
 * stacks, allocator bookkeeping), which no plan component names. */
const RSS_SLACK_BYTES = 32e6;

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  json?: { generated_ids: number[]; memory: MemoryReport };
  logits?: Buffer;
}

function runK3(dir: string, args: string[], env: Record<string, string> = {}, bin = k3Binaries.plain): Run {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-memory-'));
  try {
    const out = path.join(tmp, 'out.json');
    const dump = path.join(tmp, 'logits.f32');
    const r = spawnSync(bin, [dir, '--ids', PROMPT, '--gen', '8', '--incremental', '--out', out, '--dump-logits', dump, ...args], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    assert.equal(r.signal, null, `killed by ${r.signal}\n${r.stderr}`);
    assert.doesNotMatch(r.stderr, /AddressSanitizer|runtime error|LeakSanitizer/, r.stderr);
    return {
      status: r.status,
      stdout: r.stdout,
      stderr: r.stderr,
      json: fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, 'utf8')) : undefined,
      logits: fs.existsSync(dump) ? fs.readFileSync(dump) : undefined,
    };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

let mapped: Run | undefined;
/** The fully mapped run on medium: the reference every budget must reproduce. */
function mappedRun(): Run {
  if (!mapped) {
    mapped = runK3(ensureFixture({ size: 'medium' }), []);
    assert.equal(mapped.status, 0, mapped.stderr);
    assert.equal(mapped.json?.memory.plan.trunk_mapped, 1);
    assert.equal(mapped.json?.memory.plan.experts_mapped, 1);
  }
  return mapped;
}

const gb = (bytes: number) => (bytes / 1e9).toFixed(6);

test('medium: a cache under 10% of the pool and a trunk below the dense weights give bit-identical greedy output within the plan', () => {
  const ref = mappedRun();
  const plan = ref.json!.memory.plan;
  const trunkBudget = 0.4 * plan.dense_weights;
  const cacheBudget = 0.08 * plan.expert_pool;
  const r = runK3(ensureFixture({ size: 'medium' }), ['--trunk-gb', gb(trunkBudget), '--cache-gb', gb(cacheBudget)]);
  assert.equal(r.status, 0, r.stderr);
  const m = r.json!.memory;
  // The budgets really were that tight, and really were used.
  assert.ok(m.plan.trunk <= trunkBudget && m.plan.trunk < m.plan.dense_weights, `trunk ${m.plan.trunk}`);
  assert.ok(m.plan.layers_pinned < m.plan.layers && m.plan.ring_slots >= 1);
  assert.ok(m.plan.expert_cache <= 0.1 * m.plan.expert_pool, `cache ${m.plan.expert_cache} of ${m.plan.expert_pool}`);
  assert.ok(m.trunk_layer_reads > 0 && m.expert_evictions > 0 && m.expert_reads > m.plan.expert_slots);
  assert.ok(m.expert_retained < m.expert_requests);
  // Same tokens, same bits.
  assert.deepEqual(r.json!.generated_ids, ref.json!.generated_ids);
  assert.ok(r.logits && ref.logits && r.logits.equals(ref.logits), 'first-step logits differ from the mapped run');
  // Measured peak RSS within the budgets plus the fixed costs the plan names, plus the slack.
  assert.ok(
    m.peak_rss_bytes <= m.plan.total + RSS_SLACK_BYTES,
    `peak RSS ${m.peak_rss_bytes} > plan ${m.plan.total} + ${RSS_SLACK_BYTES}`,
  );
  assert.ok(m.peak_rss_bytes >= 0.8 * m.plan.total, `peak RSS ${m.peak_rss_bytes} far below plan ${m.plan.total}`);
  assert.match(r.stderr, /memory plan \(a forecast/);
  assert.match(r.stderr, /memory: peak RSS [\d.]+ MB measured, plan [\d.]+ MB/);
  assert.match(r.stderr, /memory: I\/O share [\d.]+% of [\d.]+ s wall-clock/);
});

/** Whether this file system opens a shard with O_DIRECT (tmpfs does not). */
function directReadsAllowed(dir: string): boolean {
  const shard = fs.readdirSync(dir).find((f) => f.endsWith('.safetensors')) as string;
  try {
    fs.closeSync(fs.openSync(path.join(dir, shard), fs.constants.O_RDONLY | fs.constants.O_DIRECT));
    return true;
  } catch {
    return false;
  }
}

test('medium: --reads direct (around the page cache), buffered and auto give the same bits, and say which way they read', () => {
  const ref = mappedRun();
  const dir = ensureFixture({ size: 'medium' });
  const plan = ref.json!.memory.plan;
  const budgets = ['--trunk-gb', gb(0.4 * plan.dense_weights), '--cache-gb', gb(0.08 * plan.expert_pool)];
  const direct = runK3(dir, [...budgets, '--reads', 'direct']);
  const buffered = runK3(dir, [...budgets, '--reads', 'buffered']);
  for (const r of [direct, buffered]) {
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.json!.generated_ids, ref.json!.generated_ids);
    assert.ok(r.logits && ref.logits && r.logits.equals(ref.logits), 'first-step logits differ from the mapped run');
    const m = r.json!.memory;
    assert.ok(m.peak_rss_bytes <= m.plan.total + RSS_SLACK_BYTES, `peak RSS ${m.peak_rss_bytes} > plan ${m.plan.total}`);
  }
  const d = direct.json!.memory;
  assert.equal(buffered.json!.memory.direct_bytes_read, 0);
  assert.match(buffered.stderr, /memory: 0\.0 MB of [\d.]+ [MG]B read went around the page cache \(--reads buffered\)/);
  if (directReadsAllowed(dir)) {
    // Every expert byte and every streamed layer byte; only embedding rows go through the page cache.
    assert.ok(d.direct_bytes_read >= d.expert_bytes_read && d.direct_bytes_read < d.expert_bytes_read + d.trunk_bytes_read + 1,
      `direct ${d.direct_bytes_read} of experts ${d.expert_bytes_read} + trunk ${d.trunk_bytes_read}`);
    assert.ok(d.direct_bytes_read > d.expert_bytes_read, 'the ring read nothing around the page cache');
  } else {
    assert.equal(d.direct_bytes_read, 0, 'a refused O_DIRECT must fall back to the page cache');
  }
  assert.match(direct.stderr, /went around the page cache \(--reads direct\)/);
  // auto: through the page cache while it could keep what streams (this machine), around it
  // once what streams exceeds what MemAvailable leaves beside the model.
  const roomy = runK3(dir, budgets);
  assert.equal(roomy.status, 0, roomy.stderr);
  assert.equal(roomy.json!.memory.direct_bytes_read, 0);
  const streams = plan.expert_pool + plan.dense_weights;
  const tight = runK3(dir, budgets, { K3_MEM_AVAILABLE: String(Math.round(roomy.json!.memory.plan.total + 0.5 * streams)) });
  assert.equal(tight.status, 0, tight.stderr);
  assert.deepEqual(tight.json!.generated_ids, ref.json!.generated_ids);
  assert.equal(tight.json!.memory.direct_bytes_read > 0, directReadsAllowed(dir), tight.stderr);
  assert.match(tight.stderr, /went around the page cache \(--reads auto\)/);
  const bad = runK3(dir, ['--reads', 'sideways']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--reads 'sideways': give auto, direct or buffered/);
});

test('medium: --preset auto sizes from MemAvailable, trunk first, and decodes the same tokens', () => {
  const ref = mappedRun();
  const available = 1.9e9;
  const r = runK3(ensureFixture({ size: 'medium' }), ['--preset', 'auto'], { K3_MEM_AVAILABLE: String(available) });
  assert.equal(r.status, 0, r.stderr);
  const m = r.json!.memory;
  assert.match(r.stderr, /k3: preset auto: trunk [\d.]+ MB, expert cache [\d.]+ MB/);
  assert.equal(m.plan.available, available);
  // The margin (1 GiB + 5%) is kept free; the trunk is filled before the cache gets more than its floor.
  assert.ok(m.plan.total + 2 ** 30 + available / 20 <= available);
  assert.ok(m.trunk_budget_bytes < m.plan.dense_weights);
  assert.equal(m.plan.expert_slots, 8); // top-k: the cache's floor
  assert.deepEqual(r.json!.generated_ids, ref.json!.generated_ids);
  assert.ok(r.logits!.equals(ref.logits!));
  // With room for everything, auto pins the whole trunk before the cache grows.
  const roomy = runK3(ensureFixture({ size: 'medium' }), ['--preset', 'auto', '--gen', '1'], { K3_MEM_AVAILABLE: '3.5e9' });
  assert.equal(roomy.status, 0, roomy.stderr);
  assert.equal(roomy.json!.memory.plan.layers_pinned, roomy.json!.memory.plan.layers);
  assert.ok(roomy.json!.memory.plan.expert_slots > 8);
});

test('a budget that cannot fit is refused before loading, with both numbers and exit 3', () => {
  const medium = ensureFixture({ size: 'medium' });
  const noFit = runK3(medium, ['--trunk-gb', '0.2', '--cache-gb', '0.2'], { K3_MEM_AVAILABLE: '5e8' });
  assert.equal(noFit.status, 3, noFit.stderr);
  assert.match(noFit.stderr, /total +[\d.]+ MB +of 500\.0 MB available/);
  assert.match(noFit.stderr, /refusing to start \(budget\): the plan needs [\d.]+ MB and this machine has 500\.0 MB available, a shortfall of [\d.]+ MB/);
  assert.doesNotMatch(noFit.stderr, /k3: loaded/);
  assert.equal(noFit.json, undefined);

  const belowFloor = runK3(medium, ['--trunk-gb', '0.01', '--cache-gb', '0.2']);
  assert.equal(belowFloor.status, 3, belowFloor.stderr);
  assert.match(belowFloor.stderr, /\(budget\): trunk budget 10\.0 MB is below the floor of 29\.9 MB: layer 0, the largest, must fit in a ring slot/);

  const cacheFloor = runK3(medium, ['--cache-gb', '0.003']);
  assert.equal(cacheFloor.status, 3, cacheFloor.stderr);
  assert.match(cacheFloor.stderr, /expert cache budget 3\.0 MB is below the floor of 3\.3 MB: it holds 7 slots of 417\.8 kB, and one token's top-8 routing needs 8/);

  const autoFloor = runK3(medium, ['--preset', 'auto'], { K3_MEM_AVAILABLE: '1.2e9' });
  assert.equal(autoFloor.status, 3, autoFloor.stderr);
  assert.match(autoFloor.stderr, /auto preset: 1\.20 GB available; after [\d.]+ MB for lm_head, vectors, index and a context of 17 positions, and a margin of [\d.]+ GB, .* below the floor of [\d.]+ MB/);

  // The library refuses on its own too: opening (the model's part) and a context too long for the KV cache.
  const tiny = ensureFixture({ gate: 'lowerbound' });
  const child = (code: string, memAvailable: string) =>
    spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: { ...process.env, K3_MEM_AVAILABLE: memAvailable } });
  const open = child(
    `const e = require(${JSON.stringify(addonFile)}); try { new e.Model(${JSON.stringify(tiny)}); console.log('opened'); } catch (x) { console.log(x.code + ': ' + x.message); }`,
    '3e7',
  );
  assert.match(open.stdout, /^budget: the model needs [\d.]+ MB \(trunk [\d.]+ MB, embed \+ lm_head [\d.]+ MB, expert cache [\d.]+ [kMG]B, vectors and index [\d.]+ MB\) and this machine has 30\.0 MB available: a shortfall of [\d.]+ MB/, open.stderr);
  const context = child(
    `const e = require(${JSON.stringify(addonFile)}); const m = new e.Model(${JSON.stringify(tiny)}); try { new e.Context(m, { maxContext: 2000000 }); console.log('opened'); } catch (x) { console.log(x.code + ': ' + x.message); }`,
    '4e8',
  );
  assert.match(context.stdout, /^budget: a context of 2000000 positions needs [\d.]+ GB \(recurrent state [\d.]+ [kMG]B, KV cache [\d.]+ GB, buffers [\d.]+ [kMG]B for a prefill batch of \d+ at [\d.]+ [kMG]B per token\) and this machine has 400\.0 MB available: a shortfall of [\d.]+ GB; ask for a shorter context/, context.stderr);
});

test('a failed expert read fails the run with expert-read, naming expert, file and offset, and emits no token', () => {
  const tiny = ensureFixture({ gate: 'lowerbound' });
  const budgets = ['--trunk-gb', '0.0004', '--cache-gb', '0.0002'];
  const clean = runK3(tiny, budgets);
  assert.equal(clean.status, 0, clean.stderr);
  // Near the end: the failure lands in the last generation steps, after tokens were chosen.
  const n = clean.json!.memory.expert_reads - 10;
  for (const bin of [k3Binaries.plain, k3Binaries.asan]) {
    const r = runK3(tiny, [...budgets, '--fault-expert-read', String(n)], {}, bin);
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      /\(expert-read\): routed expert \d+ of layer \d+ could not be read \(reading \d+ bytes at offset \d+ of .*model-\d{5}-of-\d{6}\.safetensors failed: the file ends after 0 of them, an injected fault\); the run is invalid/,
    );
    assert.doesNotMatch(r.stdout, /generated:/);
    assert.equal(r.json, undefined);
  }
});

test('--list-presets shows every preset with its budgets, full-scale peak RSS and plan, and what auto picks', () => {
  for (const argv of [['--list-presets'], [ensureFixture({ gate: 'lowerbound' }), '--list-presets']]) {
    const env = { ...process.env, K3_MEM_AVAILABLE: '64e9', K3_MACHINE_PROFILE: '/nonexistent/machine-profile.json' };
    const r = spawnSync(k3Binaries.plain, argv, { encoding: 'utf8', env });
    assert.equal(r.status, 0, r.stderr);
    for (const [name, trunk, cache, rss] of [
      ['laptop', '3.00 GB', '1.00 GB', '8.20 GB'],
      ['desktop', '16.00 GB', '10.00 GB', '31.90 GB'],
      ['workstation', '60.00 GB', '30.00 GB', '95.50 GB'],
      ['server', '110.00 GB', '13.00 GB', '128.00 GB'],
      ['max', '110.00 GB', '109.00 GB', '224.00 GB'],
    ]) {
      assert.match(r.stdout, new RegExp(`\\n  ${name} +${trunk} +${cache} +${rss} +[\\d.]+ GB +- +-  \\S`), name);
    }
    assert.match(r.stdout, /\n  auto +[\d.]+ [MG]B +[\d.]+ [MG]B +- +[\d.]+ [MG]B +- +- +sized from this machine's MemAvailable \(64\.00 GB\)/);
    assert.match(r.stdout, /s\/token: machine profile \/nonexistent\/machine-profile\.json cannot be read: run `npm run bench -- scale`/);
  }
});
