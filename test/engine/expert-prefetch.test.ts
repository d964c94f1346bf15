// expert-prefetch.test.ts - early expert reads (--expert-prefetch on) only warm the expert
// cache: on the `small` fixture with a cache of about a tenth of the pool, decode and
// prefill at 1 and 2 threads give the mapped run's tokens and logits bit for bit with them
// on and off; the counters add up (guesses routed, early reads used, bytes within the
// reads) and are zero when off; a streamed trunk (no guess across a streamed layer) keeps
// the bits; and an injected read failure either lands on an early read, which is forgotten
// (the run gives the same bits), or fails the run with expert-read naming the expert.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { MemoryReport } from '../../scripts/bench/lib/memory-report';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-prefetch-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

const DECODE = ['--ids', '1512,12,19,4,2766,11,220,1008', '--gen', '12', '--incremental'];
/** 300 ids spread over the vocabulary: one sized prefill pass, then one step. */
const PREFILL = ['--ids', Array.from({ length: 300 }, (_, i) => ((i * 7919) % 150000) + 10).join(','), '--gen', '1', '--incremental'];

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ids?: number[];
  memory?: MemoryReport;
  logits?: Buffer;
}

function runK3(args: string[]): Run {
  const dir = fs.mkdtempSync(path.join(tmp, 'run-'));
  const out = path.join(dir, 'out.json');
  const dump = path.join(dir, 'logits.f32');
  const r = spawnSync(k3Binaries.plain, [ensureFixture({ size: 'small' }), '--out', out, '--dump-logits', dump, ...args], { encoding: 'utf8' });
  assert.equal(r.signal, null, `killed by ${r.signal}\n${r.stderr}`);
  const json = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, 'utf8')) : undefined;
  return {
    status: r.status, stdout: r.stdout, stderr: r.stderr, ids: json?.generated_ids, memory: json?.memory,
    logits: fs.existsSync(dump) ? fs.readFileSync(dump) : undefined,
  };
}

let cache: string[] | undefined;
/** A cache of about a tenth of the pool: most of each layer's experts are read every step. */
function cacheBudget(): string[] {
  if (!cache) {
    const mapped = runK3(DECODE);
    assert.equal(mapped.status, 0, mapped.stderr);
    cache = ['--cache-gb', String((0.1 * mapped.memory!.plan.expert_pool) / 1e9)];
  }
  return cache;
}

function sameBits(r: Run, ref: Run, what: string) {
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.ids, ref.ids, `${what}: tokens`);
  assert.ok(r.logits && ref.logits && r.logits.equals(ref.logits), `${what}: logits differ`);
}

test('early expert reads change no bit: decode and prefill, 1 and 2 threads, on and off, as the mapped run', () => {
  for (const [kind, args] of [['decode', DECODE], ['prefill', PREFILL]] as const) {
    const ref = runK3(args);
    assert.equal(ref.status, 0, ref.stderr);
    for (const threads of ['1', '2']) {
      for (const prefetch of ['off', 'on']) {
        const r = runK3([...args, ...cacheBudget(), '--threads', threads, '--expert-prefetch', prefetch]);
        sameBits(r, ref, `${kind}, ${threads} threads, --expert-prefetch ${prefetch}`);
        assert.equal(r.memory!.expert_prefetch, prefetch === 'on' ? 1 : 0);
        if (prefetch === 'on') assert.ok(r.memory!.expert_early_reads > 0, `${kind}: nothing was read early`);
      }
    }
  }
});

test('the counters add up: guesses routed, early reads used, their bytes within the reads; all zero when off', () => {
  const on = runK3([...DECODE, ...cacheBudget(), '--expert-prefetch', 'on']);
  assert.equal(on.status, 0, on.stderr);
  const m = on.memory!;
  // 12 steps plus the prompt's passes, each guessing for every MoE layer but the first.
  assert.ok(m.expert_guesses > 0 && m.expert_guesses_routed > 0 && m.expert_guesses_routed <= m.expert_guesses, JSON.stringify(m));
  assert.ok(m.expert_early_reads > 0 && m.expert_early_reads <= m.expert_guesses);
  assert.ok(m.expert_early_used > 0 && m.expert_early_used <= m.expert_early_reads);
  assert.ok(m.expert_early_used <= m.expert_guesses_routed);
  assert.ok(m.expert_early_reads <= m.expert_reads && m.expert_early_bytes <= m.expert_bytes_read);
  assert.equal(m.expert_early_bytes, m.expert_early_reads * (m.plan.expert_pool / m.plan.experts));
  assert.ok(m.expert_early_used_seconds >= 0 && m.expert_early_used_seconds <= m.expert_read_seconds);
  assert.match(on.stderr, /memory: early reads \(--expert-prefetch on\): \d+ experts guessed, \d+ routed \([\d.]+%\); \d+ read early \([\d.]+ [kMG]B\), \d+ used \([\d.]+%\), [\d.]+ s of reads taken off the passes' path/);

  const off = runK3([...DECODE, ...cacheBudget()]);
  assert.equal(off.status, 0, off.stderr);
  const o = off.memory!;
  assert.equal(o.expert_prefetch, 0);
  for (const k of ['expert_guesses', 'expert_guesses_routed', 'expert_early_reads', 'expert_early_bytes', 'expert_early_used'] as const) assert.equal(o[k], 0, k);
  assert.doesNotMatch(off.stderr, /early reads/);
  // Off, every read is a job's: no more reads than requests.
  assert.ok(o.expert_reads <= o.expert_requests);
});

test('a streamed trunk: no guess is made across a layer that is not in memory, and the bits hold', () => {
  const ref = runK3(DECODE);
  const mappedTrunk = runK3([...DECODE, ...cacheBudget(), '--expert-prefetch', 'on', '--threads', '2']);
  sameBits(mappedTrunk, ref, 'mapped trunk');
  const trunk = ['--trunk-gb', String((0.6 * ref.memory!.plan.dense_weights) / 1e9)];
  const r = runK3([...DECODE, ...trunk, ...cacheBudget(), '--expert-prefetch', 'on', '--threads', '2']);
  sameBits(r, ref, 'streamed trunk');
  const m = r.memory!;
  assert.ok(m.plan.layers_pinned < m.plan.layers, 'some layers stream');
  // The same routing, so the same guesses where the next MoE layer is pinned, none where it streams.
  assert.ok(m.expert_guesses < mappedTrunk.memory!.expert_guesses, `${m.expert_guesses} of ${mappedTrunk.memory!.expert_guesses}`);
});

test('a failed read with early reads on: forgotten when early (same bits), else expert-read naming the expert', () => {
  const ref = runK3(DECODE);
  const clean = runK3([...DECODE, ...cacheBudget(), '--expert-prefetch', 'on']);
  sameBits(clean, ref, 'clean');
  const reads = clean.memory!.expert_reads;
  let failed = 0, forgotten = 0;
  for (const n of [3, Math.floor(reads / 3), Math.floor(reads / 2), reads - 40, reads - 20, reads - 5]) {
    const r = runK3([...DECODE, ...cacheBudget(), '--expert-prefetch', 'on', '--fault-expert-read', String(n)]);
    if (r.status === 0) {
      sameBits(r, ref, `fault at read ${n}`);
      forgotten++;
    } else {
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /\(expert-read\): routed expert \d+ of layer \d+ could not be read \(.*an injected fault\); the run is invalid/);
      assert.equal(r.ids, undefined);
      failed++;
    }
  }
  assert.equal(failed + forgotten, 6);
});
