// activations.test.ts - per-layer fidelity: what `k3 ... --dump-activations` writes for the
// tiny fixtures, compared site by site with the float64 reference's values (test/reference,
// its `trace` option): the embedding, every attention-residual mix (input_layernorm and
// post_attention_layernorm inputs), every KDA and MLA output, every dense-MLP and MoE output,
// the chosen experts, the final norm and the logits. Also: on a fixture whose router scores
// sit far from 0.5 a dropped renormalisation is far outside the tolerance (on the default
// fixture it hides), and each classic porting mistake is localised by the dump: the first
// site past the tolerance is the module where the mistake lives.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { finalHidden, loadReferenceModel, MISTAKES, type Mistake, type ReferenceModel } from '../reference';
import { matvec } from '../reference/math';
import { k3Binaries } from '../support/engine';
import { ensureFixture, type FixtureRequest } from '../support/fixtures';

/** |engine - reference| at any site; measured worst case on these fixtures about 3e-4 (logits). */
const TOLERANCE = 2e-3;

const PROMPT = [1512, 12, 19, 4, 2766, 11, 220, 1008, 10484, 318, 7, 15];

interface Site {
  rows: Float32Array[] | Int32Array[];
  width: number;
}

interface DumpIndex {
  format: string;
  version: number;
  ids: number[];
  sites: { name: string; file: string; dtype: string; rows: number; width: number; layer: number; kind: string; what: string }[];
}

/** Runs the CLI teacher-forced over PROMPT with --dump-activations and reads every file back. */
function engineDump(fixture: string): { index: DumpIndex; sites: Map<string, Site> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-activations-'));
  try {
    const r = spawnSync(k3Binaries.plain, [fixture, '--ids', PROMPT.join(','), '--tf-check', '--dump-activations', dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const index = JSON.parse(fs.readFileSync(path.join(dir, 'activations.json'), 'utf8')) as DumpIndex;
    const sites = new Map<string, Site>();
    for (const s of index.sites) {
      const bytes = fs.readFileSync(path.join(dir, s.file));
      assert.equal(bytes.length, s.rows * s.width * 4, s.file);
      const all = s.dtype === 'int32' ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4) : new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
      const rows = Array.from({ length: s.rows }, (_, p) => all.subarray(p * s.width, (p + 1) * s.width));
      sites.set(s.name, { rows: rows as Float32Array[] | Int32Array[], width: s.width });
    }
    return { index, sites };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

interface RefSite {
  rows: ArrayLike<number>[];
  gaps?: readonly number[];
}

function referenceTrace(model: ReferenceModel, mistake?: Mistake): Map<string, RefSite> {
  const out = new Map<string, RefSite>();
  const normed = finalHidden(model, PROMPT, { mistake, trace: (name, rows, gaps) => out.set(name, { rows: [...rows], gaps }) });
  out.set('lm_head', { rows: normed.map((h) => matvec(model.lmHead, h)) });
  return out;
}

/** Sites in the order a forward pass computes them (the routing before the MoE output). */
function forwardOrder(names: Iterable<string>): string[] {
  const rank = (n: string): number[] => {
    if (n === 'model.embed_tokens') return [-1, 0];
    if (n === 'model.norm') return [1e9, 0];
    if (n === 'lm_head') return [1e9, 1];
    const m = /^model\.layers\.(\d+)\.(.*)$/.exec(n) as RegExpExecArray;
    const part = ['input_layernorm', 'self_attn', 'post_attention_layernorm', 'block_sparse_moe.gate', 'block_sparse_moe', 'mlp'].indexOf(m[2]);
    return [Number(m[1]), part];
  };
  return [...names].sort((a, b) => {
    const [x, y] = [rank(a), rank(b)];
    return x[0] - y[0] || x[1] - y[1];
  });
}

/** Per site: the largest |engine - reference| (float sites) or the count of tokens whose chosen
 * experts differ by more than a near-tie (routing sites, where gaps under 1e-5 are ties). */
function deviations(engine: Map<string, Site>, ref: Map<string, RefSite>): { name: string; dev: number }[] {
  return forwardOrder(engine.keys()).map((name) => {
    const e = engine.get(name) as Site;
    const r = ref.get(name);
    assert.ok(r, `the reference has no site ${name}`);
    assert.equal(e.rows.length, r.rows.length, `${name}: rows`);
    let dev = 0;
    e.rows.forEach((row, p) => {
      const want = r.rows[p];
      assert.equal(row.length, want.length, `${name}: width`);
      if (r.gaps) {
        const same = Array.from(row).every((x, i) => x === want[i]);
        if (!same && r.gaps[p] > 1e-5) dev = Math.max(dev, 1);
      } else {
        for (let i = 0; i < row.length; i++) dev = Math.max(dev, Math.abs(row[i] - want[i]));
      }
    });
    return { name, dev };
  });
}

const fixtures: [string, FixtureRequest][] = [
  ['lowerbound', { gate: 'lowerbound' }],
  ['softplus', { gate: 'softplus' }],
  ['sharp router', { gate: 'lowerbound', router: 'sharp' }],
];

const cache = new Map<string, { model: ReferenceModel; dump: ReturnType<typeof engineDump> }>();
function load(label: string, request: FixtureRequest) {
  if (!cache.has(label)) {
    const dir = ensureFixture(request);
    cache.set(label, { model: loadReferenceModel(dir), dump: engineDump(dir) });
  }
  return cache.get(label) as { model: ReferenceModel; dump: ReturnType<typeof engineDump> };
}

for (const [label, request] of fixtures) {
  test(`every layer's dumped values match the reference within ${TOLERANCE} (${label} fixture)`, (t) => {
    const { model, dump } = load(label, request);
    assert.deepEqual(dump.index.ids, PROMPT);
    const devs = deviations(dump.sites, referenceTrace(model));
    const layers = model.config.numLayers;
    // Every site of every layer is there: 4 per layer, plus the routing of each MoE layer.
    const moe = model.layers.filter((l) => l.ffn.kind === 'moe').length;
    assert.equal(devs.length, 3 + 4 * layers + moe);
    const worst = devs.reduce((a, b) => (b.dev > a.dev ? b : a));
    t.diagnostic(`worst site ${worst.name}: ${worst.dev.toExponential(2)}`);
    for (const d of devs) assert.ok(d.dev <= TOLERANCE, `${d.name}: max |engine - reference| = ${d.dev}`);
  });
}

test('the sharp-router fixture puts router scores far from 0.5, where a dropped renormalisation is far outside the tolerance', (t) => {
  const sharp = load('sharp router', { gate: 'lowerbound', router: 'sharp' });
  const soft = load('lowerbound', { gate: 'lowerbound' });
  // The chosen experts' scores, from the reference's router logits at layer 1.
  const chosenScores = (m: ReferenceModel) => {
    const scores: number[] = [];
    finalHidden(m, PROMPT, {
      trace: (name, rows) => {
        if (name !== 'model.layers.1.post_attention_layernorm') return;
        const ffn = m.layers[1].ffn;
        if (ffn.kind !== 'moe') return;
        for (const h of rows) {
          const x = Float64Array.from(h);
          const rms = Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + m.config.rmsNormEps);
          const normed = x.map((v, i) => (v / rms) * m.layers[1].postAttentionNorm[i]);
          const logits = matvec(ffn.w.router, normed);
          const s = Array.from(logits, (l) => 1 / (1 + Math.exp(-l))).sort((a, b) => b - a);
          scores.push(...s.slice(0, m.config.topK));
        }
      },
    });
    return scores;
  };
  const far = (xs: number[]) => xs.reduce((s, x) => s + Math.abs(x - 0.5), 0) / xs.length;
  const sharpFar = far(chosenScores(sharp.model));
  const softFar = far(chosenScores(soft.model));
  t.diagnostic(`mean |chosen score - 0.5|: sharp ${sharpFar.toFixed(3)}, soft ${softFar.toFixed(3)}`);
  assert.ok(sharpFar > 0.4 && softFar < 0.3, `sharp ${sharpFar}, soft ${softFar}`);
  const logitDev = (f: typeof sharp) =>
    Math.max(...deviations(f.dump.sites, referenceTrace(f.model, 'router-not-renormalised')).filter((d) => d.name === 'lm_head').map((d) => d.dev));
  const onSharp = logitDev(sharp);
  const onSoft = logitDev(soft);
  t.diagnostic(`router-not-renormalised moves the logits by ${onSharp.toExponential(2)} on the sharp fixture, ${onSoft.toExponential(2)} on the soft one`);
  assert.ok(onSharp > 5 * TOLERANCE, `only ${onSharp} on the sharp fixture`);
});

/** Where each mistake lives, on the tiny fixture (0-based layers: 0 KDA + dense MLP, 1 the first MoE, 3 the first MLA). */
const MODULE_OF: Partial<Record<Mistake, string>> = {
  'mla-lora-norm-eps-1e-5': 'model.layers.3.self_attn',
  'mla-scale-nope-only': 'model.layers.3.self_attn',
  'expert-w1-w3-swapped': 'model.layers.1.block_sparse_moe',
  'router-bias-in-weights': 'model.layers.1.block_sparse_moe',
  'router-bias-ignored': 'model.layers.1.block_sparse_moe.gate',
  'latent-norm-before-experts': 'model.layers.1.block_sparse_moe',
  'latent-norm-after-up-proj': 'model.layers.1.block_sparse_moe',
  'attn-res-sum-normalised': 'model.layers.0.post_attention_layernorm',
  'kda-no-qk-l2norm': 'model.layers.0.self_attn',
  'kda-wrong-gate-form': 'model.layers.0.self_attn',
  'kda-a-log-per-channel': 'model.layers.0.self_attn',
  'kda-state-transposed': 'model.layers.0.self_attn',
  'kda-beta-outside-sigmoid': 'model.layers.0.self_attn',
  'situ-sigmoid-of-capped-gate': 'model.layers.0.mlp',
  'router-not-renormalised': 'model.layers.1.block_sparse_moe',
};

test('a dump localises each classic porting mistake: the first site past the tolerance is its module', () => {
  for (const mistake of MISTAKES) {
    const where = MODULE_OF[mistake];
    if (!where) continue; // zero-based-layer-lists cannot load at all
    // A dropped renormalisation shows where the router's scores are far from 0.5.
    const { model, dump } = mistake === 'router-not-renormalised' ? load('sharp router', { gate: 'lowerbound', router: 'sharp' }) : load('lowerbound', { gate: 'lowerbound' });
    const first = deviations(dump.sites, referenceTrace(model, mistake)).find((d) => d.dev > TOLERANCE);
    assert.equal(first?.name, where, `${mistake}: first deviating site ${first?.name} (${first?.dev})`);
  }
});
