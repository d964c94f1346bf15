// test.mjs - `npm test`: builds what the tests need, runs the C tests (plain, then under
// AddressSanitizer), the fuzz smoke (scripts/fuzz.mjs --smoke) and every test/**/*.test.ts
// with Node's test runner. Exits non-zero if any part fails; each part still runs so one
// failure does not hide another.
//   node scripts/test.mjs [substring...]   run only the TypeScript test files whose path
//                                          contains one of the substrings (C tests skipped)
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildNodeScripts, root } from './esbuild-common.mjs';

const filters = process.argv.slice(2);
const failures = [];

function step(name, cmd, argv) {
  console.log(`\n== ${name}`);
  const r = spawnSync(cmd, argv, { stdio: 'inherit', cwd: root });
  if (r.status !== 0) failures.push(`${name} (exit ${r.status ?? r.signal})`);
  return r.status === 0;
}

function testFiles(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...testFiles(p));
    else if (e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

if (!step('build', process.execPath, [path.join(root, 'scripts/build.mjs')])) {
  console.error('test: the build failed, nothing else runs');
  process.exit(1);
}
if (filters.length === 0) {
  step('C tests', 'make', ['-C', 'native', '-j2', 'test', '--no-print-directory']);
  // About a minute: every fuzz harness replays its seed corpus (regressions included) and
  // fuzzes for a few seconds with a fixed seed (docs/FUZZING.md).
  step('fuzz smoke', process.execPath, [path.join(root, 'scripts/fuzz.mjs'), '--smoke']);
}

const sources = testFiles(path.join(root, 'test')).filter(
  (f) => filters.length === 0 || filters.some((s) => f.includes(s)),
);
const outdir = path.join(root, 'out/test');
fs.rmSync(outdir, { recursive: true, force: true });
await buildNodeScripts(sources, path.join(root, 'test'), outdir);
const compiled = sources.map((f) =>
  path.join(outdir, path.relative(path.join(root, 'test'), f)).replace(/\.ts$/, '.js'),
);
step('TypeScript tests', process.execPath, ['--enable-source-maps', '--test', '--test-reporter=spec', ...compiled]);

if (failures.length) {
  console.error(`\ntest: FAILED: ${failures.join('; ')}`);
  process.exit(1);
}

