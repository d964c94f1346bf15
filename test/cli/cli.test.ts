// cli.test.ts - the `k3` command-line tool's basic contract: --help prints usage and exits
// 0, --version matches the engine, an unknown option is refused with exit 2 and the usage;
// `k3 bench` measures in paired rounds (its figures are timing, so only their shape is
// checked here).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { ensureFixture } from '../support/fixtures';
import { k3Cli } from '../support/paths';

test('k3 --help prints usage and exits 0', () => {
  const r = spawnSync(k3Cli, ['--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^k3 \d+\.\d+\.\d+, the Kimi K3 inference engine/);
  assert.match(r.stdout, /usage: k3 /);
});

test('k3 --version prints the engine version', () => {
  const r = spawnSync(k3Cli, ['--version'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout.trim(), /^k3 \d+\.\d+\.\d+$/);
});

test('k3 refuses an unknown option with exit 2 and the usage on stderr', () => {
  const r = spawnSync(k3Cli, ['--no-such-option'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown option or command '--no-such-option'/);
  assert.match(r.stderr, /usage: k3 /);
});

test('k3 refuses --spec-always without --spec, naming what it needs', () => {
  const r = spawnSync(k3Cli, ['/nonexistent', '--ids', '1', '--spec-always'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--spec-always .* needs --spec N/);
});

test('k3 bench refuses fewer generated tokens than its rounds, naming both', () => {
  const r = spawnSync(k3Cli, ['bench', '/nonexistent', '--gen', '4'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--gen 4 is fewer than the 8 rounds/);
});

test('k3 bench-kernels refuses a token count past 16, naming the option and the value', () => {
  const r = spawnSync(k3Cli, ['bench-kernels', '--tokens', '17'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--tokens '17': expected a whole number from 1 to 16/);
});

test('k3 bench-kernels times both weight sets with every implementation, each round after its own triad', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-bench-kernels-'));
  const out = path.join(dir, 'kernels.json');
  const r = spawnSync(k3Cli, ['bench-kernels', '--rounds', '2', '--tokens', '2', '--out', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const json = JSON.parse(fs.readFileSync(out, 'utf8'));
  fs.rmSync(dir, { recursive: true });
  assert.equal(json.tokens, 2);
  const flags = new Set((fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/));
  const has = (...names: string[]) => names.every((f) => flags.has(f));
  const wide = has('avx512f', 'avx512bw', 'avx512vl', 'avx512dq');
  const impls = [
    has('avx2', 'fma') ? 'avx2' : '',
    wide ? 'avx512' : '',
    wide && has('amx_tile', 'amx_bf16') ? 'amx' : '',
  ].filter(Boolean);
  const expected = (impls.length ? impls : ['scalar']).flatMap((k) => [`${k} mxfp4`, `${k} bf16`]);
  assert.deepEqual(json.rows.map((row: { kernels: string; weights: string }) => `${row.kernels} ${row.weights}`), expected);
  for (const row of json.rows) {
    // 16 experts of 3 x 3072 x 3584 MXFP4 (half a byte a weight, a scale byte per 32), and
    // three 7168 x 7168 bf16.
    assert.equal(row.bytes, row.weights === 'mxfp4' ? 48 * 3072 * 3584 * (1 / 2 + 1 / 32) : 3 * 7168 * 7168 * 2);
    assert.equal(row.rounds.length, 2);
    for (const round of row.rounds) assert.ok(round.seconds > 0 && round.triad_bytes_per_s > 0);
  }
  assert.match(r.stdout, /of the triad/);
});

test('k3 bench-scale probes the disk without reading any bytes twice (the second read would come from the page cache), through the page cache or around it', () => {
  const model = ensureFixture();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-bench-scale-'));
  const shard = fs.readdirSync(model).filter((f) => f.endsWith('.safetensors')).sort()[0];
  // Three random units of 4, 4 and 8 KiB; asked for 1000 reads, the probe reads each once.
  const extents = path.join(dir, 'extents.txt');
  fs.writeFileSync(extents, `${shard} 4096 8192 t\n${shard} 16384 4096 e\n${shard} 32768 4096 e\n${shard} 65536 8192 e\n`);
  const probe = (count: number, extra: string[]) => {
    const out = path.join(dir, 'scale.json');
    const r = spawnSync(k3Cli, ['bench-scale', model, '--steps', '1', '--disk-random', String(count), ...extra, '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(fs.readFileSync(out, 'utf8')) as Record<string, { bytes: number; block: number }[]>;
  };
  assert.equal(probe(1000, ['--disk-extents', extents]).disk_random[0].bytes, 16384);
  // Both at once, before the steps and again after them: the sequential stream's 8 KiB
  // (the whole stream, asked for more) beside the three units.
  const both = probe(1000, ['--disk-extents', extents, '--disk', '1', '--disk-gb', '0.00001', '--disk-mixed', '0.00001', '--disk-after']);
  for (const key of ['disk_mixed', 'disk_mixed_after']) assert.deepEqual(both[key].map((d) => d.bytes), [8192 + 16384], key);
  // Under --reads direct the probe reads around the page cache as the engine would: units
  // at any offset and length come back whole (a short or failed read fails the probe).
  const odd = path.join(dir, 'odd.txt');
  fs.writeFileSync(odd, `${shard} 4097 8000 t\n${shard} 16385 4000 e\n${shard} 32771 4093 e\n${shard} 65535 8193 e\n`);
  assert.equal(probe(1000, ['--disk-extents', odd, '--reads', 'direct']).disk_random[0].bytes, 4000 + 4093 + 8193);
  // Without extents: expert-sized blocks at random places, none twice, so at most the shards.
  const shards = fs.readdirSync(model).filter((f) => f.endsWith('.safetensors')).reduce((a, f) => a + fs.statSync(path.join(model, f)).size, 0);
  const blocks = probe(65536, []).disk_random[0];
  fs.rmSync(dir, { recursive: true });
  assert.ok(blocks.bytes <= shards && blocks.bytes >= shards - 2 * blocks.block, `${blocks.bytes} of ${shards}`);
});

test('k3 bench-scale --prefill reports the batch, the passes and one read of every streamed layer per pass', () => {
  const model = ensureFixture({ gate: 'lowerbound' });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-bench-scale-prefill-'));
  const out = path.join(dir, 'scale.json');
  const run = (extra: string[]) => {
    // A trunk budget of 0.5 MB: two ring slots, every layer streamed.
    const r = spawnSync(k3Cli, ['bench-scale', model, '--steps', '1', '--prompt-tokens', '4', '--prefill', '300', '--trunk-gb', '0.0005', '--cache-gb', '1', ...extra, '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(fs.readFileSync(out, 'utf8')).prefill as { tokens: number; batch: number; batch_sized: number; passes: number; trunk_layer_reads: number; streamed_layers: number };
  };
  const sized = run([]);
  const given = run(['--prefill-batch', '128']);
  fs.rmSync(dir, { recursive: true });
  assert.ok(sized.streamed_layers > 0, 'the trunk streams');
  assert.deepEqual([sized.batch_sized, sized.passes], [1, 1]);
  assert.ok(sized.batch >= 300);
  assert.deepEqual([given.batch_sized, given.batch, given.passes], [0, 128, 3]);
  // Counted with the ring full before and after (its read-ahead at both ends): exactly one
  // read of every streamed layer per pass.
  for (const p of [sized, given]) assert.equal(p.trunk_layer_reads, p.passes * p.streamed_layers, `${p.trunk_layer_reads} reads in ${p.passes} passes of ${p.streamed_layers} layers`);
});

test('k3 bench pairs every decode stretch with a triad and reports the median round', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-bench-'));
  const out = path.join(dir, 'bench.json');
  const model = ensureFixture({ gate: 'lowerbound' });
  const r = spawnSync(k3Cli, ['bench', model, '--prompt-tokens', '4', '--gen', '12', '--out', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const json = JSON.parse(fs.readFileSync(out, 'utf8'));
  fs.rmSync(dir, { recursive: true });
  assert.equal(json.decode_tokens, 12);
  assert.equal(json.rounds.length, 8);
  const ratios: number[] = [];
  for (const round of json.rounds) {
    assert.ok(round.bandwidth_bytes_per_s > 0 && round.decode_tokens_per_s > 0);
    // A round's ratio is its own decode against its own triad.
    const own = (round.decode_tokens_per_s * json.weight_bytes_per_token) / round.bandwidth_bytes_per_s;
    assert.ok(Math.abs(own - round.achieved_over_bound) <= 1e-3 * own + 1e-4);
    ratios.push(round.achieved_over_bound);
  }
  ratios.sort((a, b) => a - b);
  assert.ok(Math.abs(json.achieved_over_bound - (ratios[3] + ratios[4]) / 2) <= 2e-4);
  // The peak RSS is read before the triad's three 128 MB arrays exist.
  assert.ok(json.peak_rss_bytes < 384e6, `peak RSS ${json.peak_rss_bytes}`);
  // The mapped weights' resident pages, and how many of them are in 2 MB pages (Linux).
  assert.ok(json.mapped_file_resident_bytes > 0 && json.mapped_file_resident_bytes <= json.peak_rss_bytes);
  assert.ok(json.mapped_file_huge_page_bytes >= 0 && json.mapped_file_huge_page_bytes <= json.mapped_file_resident_bytes);
  assert.match(r.stdout, /mapped file pages in 2 MB pages +[\d.]+ MB \(of [\d.]+ MB resident\)/);
  // Prefill's compute is its multiply-adds over its time, as a share of the measured peak
  // of the kernels in use.
  assert.ok(['scalar', 'avx2', 'avx512'].includes(json.kernels), json.kernels);
  assert.ok(json.fma_peak_flops_per_s > 0 && json.prefill_flops_per_s > 0);
  const share = json.prefill_flops_per_s / json.fma_peak_flops_per_s;
  assert.ok(Math.abs(share - json.prefill_over_peak) <= 1e-3 * share + 1e-6);
  // Per layer kind: every layer counted once under its kind, lm_head once, and the kinds
  // account for every weight byte a decoded token streams (the embedding reads none).
  const config = JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8'));
  const text = config.text_config ?? config;
  const kinds = json.layer_kinds as { kind: string; layers: number; prefill_time_share: number; decode_time_share: number; decode_weight_bytes_per_token: number; prefill_over_peak: number; decode_over_bound: number }[];
  const byKind = Object.fromEntries(kinds.map((k) => [k.kind, k]));
  assert.equal(byKind.lm_head.layers, 1);
  assert.equal(kinds.filter((k) => k.kind !== 'lm_head').reduce((n, k) => n + k.layers, 0), text.num_hidden_layers);
  assert.equal(byKind.dense?.layers ?? 0, text.first_k_dense_replace ?? 0);
  const bytes = kinds.reduce((n, k) => n + k.decode_weight_bytes_per_token, 0);
  assert.ok(Math.abs(bytes - json.weight_bytes_per_token) <= kinds.length, `${bytes} of ${json.weight_bytes_per_token}`);
  for (const k of kinds) {
    assert.ok(k.prefill_time_share > 0 && k.decode_time_share > 0 && k.prefill_over_peak > 0 && k.decode_over_bound > 0, k.kind);
  }
  assert.ok(kinds.reduce((n, k) => n + k.prefill_time_share, 0) <= 1 + 1e-9);
  assert.ok(kinds.reduce((n, k) => n + k.decode_time_share, 0) <= 1 + 1e-9);
  assert.ok(r.stdout.includes('by layer kind'), r.stdout);
});
