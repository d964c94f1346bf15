// doc-charts.ts - draws a chart beside each figures file: `node scripts/run-ts.mjs
// scripts/doc-charts.ts [FIGURES.json ...]` writes FIGURES.svg next to each, by default for
// every figures file under docs/images/ (the charts the docs show). A benchmark writes its
// figures the same way (out/bench/*-chart.json), so a fresh run's chart can be redrawn or
// its figures added to a doc's. test/bench/charts.test.ts checks that the committed charts
// are what their figures draw.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { drawFigures, parseFigures } from './bench/lib/charts';
import { repoRoot } from '../test/support/paths';

const images = path.join(repoRoot, 'docs/images');
const files = process.argv.slice(2).length
  ? process.argv.slice(2).map((f) => path.resolve(f))
  : fs.readdirSync(images).filter((f) => f.endsWith('.json')).map((f) => path.join(images, f));
for (const file of files) {
  const svg = drawFigures(parseFigures(JSON.parse(fs.readFileSync(file, 'utf8')), path.relative(repoRoot, file)));
  const out = file.replace(/\.json$/, '.svg');
  fs.writeFileSync(out, svg);
  console.log(`${path.relative(process.cwd(), out)}: ${svg.length} bytes`);
}
