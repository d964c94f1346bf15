// prefill.test.ts - prefill sized to memory, on the tiny fixture with its trunk streamed:
// the plan sizes the batch so a prompt is one pass and the trunk is read once for it, a
// prompt split across passes (batch 128, and 7 with a remainder) reads it once per pass,
// each routed expert is asked for once per layer pass however many tokens route to it, and
// every batch size gives the same bits in every layer and in the logits.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { MemoryReport } from '../../scripts/bench/lib/memory-report';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-prefill-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

/** 300 ids spread over the vocabulary: more than two default batches. */
const PROMPT = Array.from({ length: 300 }, (_, i) => ((i * 7919) % 150000) + 10);

interface Prefill {
  stderr: string;
  memory: MemoryReport;
  logits: Buffer;
  activations: Map<string, Buffer>;
}

function prefill(dir: string, args: string[]): Prefill {
  const run = fs.mkdtempSync(path.join(tmp, 'run-'));
  const out = path.join(run, 'out.json');
  const dump = path.join(run, 'logits.f32');
  const acts = path.join(run, 'acts');
  const r = spawnSync(k3Binaries.plain, [dir, '--ids', PROMPT.join(','), '--gen', '1', '--incremental', '--out', out,
    '--dump-logits', dump, '--dump-activations', acts, ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const activations = new Map<string, Buffer>();
  // Every site's rows at their positions; the index (activations.json) records the passes.
  for (const f of fs.readdirSync(acts).filter((f) => f !== 'activations.json')) activations.set(f, fs.readFileSync(path.join(acts, f)));
  return { stderr: r.stderr, memory: JSON.parse(fs.readFileSync(out, 'utf8')).memory, logits: fs.readFileSync(dump), activations };
}

test('a streamed trunk: the sized batch takes the prompt in one pass, batches of 128 and 7 in several, the same bits and one trunk read per pass', () => {
  const dir = ensureFixture({ gate: 'lowerbound' });
  // A trunk budget of two and a half of its largest layers: two ring slots, some layers streamed.
  const mapped = prefill(dir, ['--batch', '1']);
  const floor = mapped.memory.plan.trunk_floor;
  const budget = ['--trunk-gb', String((2.5 * floor) / 1e9), '--cache-gb', '1'];

  const sized = prefill(dir, budget);
  const plan = sized.memory.plan;
  const streamed = plan.layers - plan.layers_pinned;
  assert.ok(plan.ring_slots === 2 && streamed > 0, `ring ${plan.ring_slots}, ${streamed} layers streamed`);
  assert.equal(plan.batch_sized, 1);
  assert.equal(plan.batch, PROMPT.length + 2, 'the whole context in one pass');
  assert.ok(plan.batch_token_bytes > 0);
  assert.match(sized.stderr, /prefill batch 302, sized to memory at [\d.]+ [kM]B per token/);

  // `k3 run --incremental` prefills all but the last prompt token, then steps that one.
  // Every pass reads each streamed layer once; the ring may have read up to ring_slots
  // layers of a next pass ahead by the time the run ends.
  const checkReads = (p: Prefill, passes: number, what: string) => {
    assert.equal(p.memory.forward_passes, passes, `${what}: passes`);
    const extra = p.memory.trunk_layer_reads - passes * streamed;
    assert.ok(extra >= 0 && extra <= plan.ring_slots, `${what}: ${p.memory.trunk_layer_reads} trunk reads in ${passes} passes of ${streamed} streamed layers`);
  };
  checkReads(sized, 2, 'sized batch');
  const splits: Prefill[] = [];
  for (const batch of [128, 7]) {
    const split = prefill(dir, [...budget, '--batch', String(batch)]);
    splits.push(split);
    assert.equal(split.memory.plan.batch_sized, 0);
    checkReads(split, Math.ceil((PROMPT.length - 1) / batch) + 1, `batch ${batch}`);
    assert.ok(split.logits.equals(sized.logits), `batch ${batch}: logits`);
    assert.deepEqual([...split.activations.keys()].sort(), [...sized.activations.keys()].sort());
    for (const [name, bytes] of sized.activations) assert.ok(bytes.equals(split.activations.get(name)!), `batch ${batch}: ${name}`);
  }
  assert.ok(mapped.logits.equals(sized.logits), 'mapped, batch 1: logits');

  // Within a pass each MoE layer asks for each chosen expert once, for all its tokens: at
  // most every expert of every MoE layer per pass, so the one-pass prefill asks for fewer
  // than 43 passes of 7 do.
  for (const p of [sized, ...splits]) {
    const m = p.memory;
    assert.ok(m.expert_requests <= m.forward_passes * plan.experts, `${m.expert_requests} requests in ${m.forward_passes} passes, ${plan.experts} experts`);
    assert.ok(m.expert_reads <= m.expert_requests);
  }
  assert.ok(sized.memory.expert_requests < splits[1].memory.expert_requests);
});
