// charts.test.ts - the benchmarks' SVG charts (scripts/bench/lib/svg.ts, charts.ts): marks
// sit where their values say on the axis, text is escaped, the same figures give the same
// bytes, a bad figures file is refused naming its field, and every chart committed under
// docs/images/ is what its figures file draws (so a doc never shows a stale picture).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { benchSpeedFigures, drawFigures, parseFigures, type ForecastFigures, type SpeedFigures } from '../../scripts/bench/lib/charts';
import { chart, escapeXml, niceTicks, shortNumber } from '../../scripts/bench/lib/svg';
import { repoRoot } from '../support/paths';

const attrs = (svg: string, element: string) =>
  [...svg.matchAll(new RegExp(`<${element} ([^>]*?)/?>`, 'g'))].map((m) =>
    Object.fromEntries([...m[1].matchAll(/([a-z0-9-]+)="([^"]*)"/g)].map((a) => [a[1], a[2]])),
  );

test('axis ticks are 1, 2 or 5 times a power of ten and cover the values', () => {
  assert.deepEqual(niceTicks(0, 100), [0, 20, 40, 60, 80, 100]);
  assert.deepEqual(niceTicks(-32.6, 15), [-40, -30, -20, -10, 0, 10, 20]);
  assert.deepEqual(niceTicks(0, 0.7), [0, 0.2, 0.4, 0.6, 0.8]);
  assert.equal(shortNumber(1357.7), '1358');
  assert.equal(shortNumber(42.65), '42.6');
  assert.equal(shortNumber(0.0834), '0.0834');
});

test('a bar runs from zero to its value on the axis, in proportion', () => {
  const svg = chart([
    { title: 't', unit: 'u', categories: ['a', 'b'], series: [{ name: 's', color: '#123', mark: 'bar', values: [50, 100] }] },
  ]);
  const bars = attrs(svg, 'rect').filter((r) => r.fill === '#123' && r.width !== '10');
  assert.equal(bars.length, 2);
  const [a, b] = bars.map((r) => Number(r.width));
  assert.ok(Math.abs(b / a - 2) < 0.01, `widths ${a} and ${b} for 50 and 100`);
  assert.equal(bars[0].x, bars[1].x, 'both start at zero');
});

test('a negative value draws left of zero, and a dot sits at its value', () => {
  const svg = chart([
    {
      title: 't',
      unit: 'u',
      categories: ['x'],
      band: { from: -15, to: 15, name: 'band' },
      series: [
        { name: 'neg', color: '#a00', mark: 'bar', values: [-20] },
        { name: 'dot', color: '#0a0', mark: 'dot', values: [10] },
      ],
    },
  ]);
  const zero = attrs(svg, 'line').find((l) => l.stroke === '#888');
  assert.ok(zero, 'the zero line is drawn');
  const bar = attrs(svg, 'rect').find((r) => r.fill === '#a00' && r.width !== '10') as Record<string, string>;
  assert.ok(Math.abs(Number(bar.x) + Number(bar.width) - Number(zero.x1)) < 0.2, 'the bar ends at zero');
  const dot = attrs(svg, 'circle').find((c) => c.fill === '#0a0' && c['fill-opacity']) as Record<string, string>;
  const scale = Number(bar.width) / 20; // pixels per unit, from the bar
  assert.ok(Math.abs(Number(dot.cx) - Number(zero.x1) - 10 * scale) < 0.3, `dot at ${dot.cx}, zero at ${zero.x1}`);
});

test('text is escaped and the same figures give the same bytes', () => {
  assert.equal(escapeXml(`<a & "b">'`), '&lt;a &amp; &quot;b&quot;&gt;&#39;');
  const figures: ForecastFigures = { kind: 'forecast', title: 'runs <1> & <2>', tolerance: 0.15, configs: ['c'], runs: [{ name: 'r', errors: [0.1] }] };
  const svg = drawFigures(figures);
  assert.ok(svg.includes('runs &lt;1&gt; &amp; &lt;2&gt;'));
  assert.ok(!svg.includes('<1>'));
  assert.equal(drawFigures(JSON.parse(JSON.stringify(figures))), svg);
});

test('a speed chart has llama.cpp bars only where llama.cpp was measured', () => {
  const k3Only: SpeedFigures = { kind: 'speed', title: 'engine', rows: [{ label: '1 thread', k3_prefill: 200, prefill_bound: 400, k3_decode: 80, decode_bound: 100 }] };
  assert.ok(!drawFigures(k3Only).includes('llama.cpp'));
  const both: SpeedFigures = { ...k3Only, rows: [{ ...k3Only.rows[0], llama_prefill: 100, llama_decode: 70 }] };
  assert.ok(drawFigures(both).includes('llama.cpp'));
});

test('a bandwidth chart draws one panel per shape, rates in GB/s beside the triad', () => {
  const svg = drawFigures({
    kind: 'bandwidth',
    title: 'kernels',
    panels: [
      { title: '1 thread', rows: [{ label: 'avx512 mxfp4', rate: 20e9, bound: 40e9 }] },
      { title: '2 threads', rows: [{ label: 'avx512 mxfp4', rate: 30e9, bound: 45e9 }] },
    ],
  });
  assert.ok(svg.includes('kernels: 1 thread') && svg.includes('kernels: 2 threads'));
  assert.ok(svg.includes('avx512 mxfp4, k3 kernel: 20</title>'), 'rates are written in GB/s');
});

test("k3 bench's figures become a row per run, the prefill bound from its share of the peak", () => {
  const run = { threads: 2, prefill_tokens_per_s: 300, prefill_over_peak: 0.25, decode_tokens_per_s: 90, bound_tokens_per_s: 120 };
  const figures = benchSpeedFigures('t', [run], [{ prefill: 150, decode: 60 }]);
  assert.deepEqual(figures.rows, [{ label: '2 threads', llama_prefill: 150, llama_decode: 60, k3_prefill: 300, prefill_bound: 1200, k3_decode: 90, decode_bound: 120 }]);
  assert.deepEqual(parseFigures(JSON.parse(JSON.stringify(figures)), 'x'), figures);
});

test('a bad figures file is refused with the file and the field', () => {
  assert.throws(() => parseFigures({ kind: 'pie', title: 't' }, 'f.json'), /f\.json: "kind" must be "speed", "forecast" or "bandwidth", found "pie"/);
  assert.throws(
    () => parseFigures({ kind: 'bandwidth', title: 't', panels: [{ title: 'p', rows: [{ label: 'a', rate: -1, bound: 1 }] }] }, 'k.json'),
    /k\.json: panels\[0\]\.rows\[0\]\.rate must be a number >= 0, found -1/,
  );
  assert.throws(
    () => parseFigures({ kind: 'speed', title: 't', rows: [{ label: 'a', k3_prefill: 1, prefill_bound: 'x', k3_decode: 1, decode_bound: 1 }] }, 'g.json'),
    /g\.json: rows\[0\]\.prefill_bound must be a number >= 0, found "x"/,
  );
  assert.throws(
    () => parseFigures({ kind: 'forecast', title: 't', tolerance: 0.15, configs: ['a', 'b'], runs: [{ name: 'r', errors: [0.1] }] }, 'h.json'),
    /h\.json: runs\[0\]\.errors has 1 entries for 2 configs/,
  );
});

test('every chart under docs/images is what its figures file draws', () => {
  const images = path.join(repoRoot, 'docs/images');
  const figures = fs.readdirSync(images).filter((f) => f.endsWith('.json'));
  assert.ok(figures.length >= 2, `found ${figures.length} figures files`);
  for (const f of figures) {
    const file = path.join(images, f);
    const drawn = drawFigures(parseFigures(JSON.parse(fs.readFileSync(file, 'utf8')), f));
    const svg = file.replace(/\.json$/, '.svg');
    assert.ok(fs.existsSync(svg), `${f} has no chart: node scripts/run-ts.mjs scripts/doc-charts.ts`);
    assert.equal(fs.readFileSync(svg, 'utf8'), drawn, `${path.basename(svg)} is not what ${f} draws: node scripts/run-ts.mjs scripts/doc-charts.ts`);
  }
});
