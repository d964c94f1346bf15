// fuzz.mjs - `npm run fuzz -- [--seconds N] [--only NAME,...] [--jobs N] [--smoke]`: builds
// the fuzz driver (make -C native fuzz: ASan + UBSan + coverage) and runs every harness
// (docs/FUZZING.md) for N seconds each (default 60), niced, from its checked-in seed corpus
// (native/fuzz/corpus/NAME) plus what earlier runs kept (out/fuzz/corpus/NAME). It prints a
// table of runs, edges and pool per harness and writes out/fuzz/summary.json; a finding
// (crash, sanitizer report, broken invariant, hang) is saved under out/fuzz/findings with the
// command that replays it, and makes the run fail. --smoke is what `npm test` runs: a fixed
// seed, the checked-in corpus only, a few seconds each.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { root } from './esbuild-common.mjs';

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const value = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
};
const smoke = flag('--smoke');
const seconds = Number(value('--seconds', smoke ? '6' : '60'));
const jobs = Math.max(1, Number(value('--jobs', '1')));
const only = value('--only', '')
  .split(',')
  .filter(Boolean);
if (!Number.isFinite(seconds) || seconds <= 0) {
  console.error('fuzz: --seconds needs a positive number');
  process.exit(2);
}

const make = spawnSync('nice', ['-n', '10', 'make', '-C', 'native', '-j2', 'fuzz', '--no-print-directory'], { cwd: root, stdio: 'inherit' });
if (make.status !== 0) {
  console.error('fuzz: building k3-fuzz failed');
  process.exit(1);
}
const bin = path.join(root, 'native/build/k3-fuzz');
const names = spawnSync(bin, ['--list'], { encoding: 'utf8' })
  .stdout.split('\n')
  .map((l) => l.split(/\s+/)[0])
  .filter((n) => n && (only.length === 0 || only.includes(n)));
if (only.length && names.length !== only.length) {
  console.error(`fuzz: unknown harness among ${only.join(', ')} (k3-fuzz --list)`);
  process.exit(2);
}

const findings = path.join(root, 'out/fuzz/findings');
// The sanitizers' settings are the driver's own (__asan_default_options in driver.c).
const env = process.env;

function runHarness(name) {
  const args = [name, '--seconds', String(seconds), '--repo', root, '--findings', findings, '--corpus', path.join(root, 'native/fuzz/corpus', name)];
  if (smoke) args.push('--seed', '1');
  else args.push('--work', path.join(root, 'out/fuzz/corpus', name));
  return new Promise((resolve) => {
    const child = spawn('nice', ['-n', '10', bin, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    const stderr = [];
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      for (const line of String(d).split('\n')) if (line) stderr.push(line);
      if (stderr.length > 400) stderr.splice(0, stderr.length - 400);
    });
    child.on('close', (code, signal) => {
      const m = /runs (\d+) in ([\d.]+) s \((\d+)\/s\), edges (\d+) \((\d+) after init, (\d+) after (\d+) seeds\), pool (\d+)/.exec(stdout);
      const ok = code === 0 && m !== null;
      const r = m
        ? { name, ok, runs: +m[1], seconds: +m[2], perSecond: +m[3], edges: +m[4], edgesInit: +m[5], edgesSeeds: +m[6], seeds: +m[7], pool: +m[8] }
        : { name, ok };
      if (!ok) r.failure = `exit ${code ?? signal}\n${stderr.slice(-60).join('\n')}`;
      console.log(ok ? `fuzz ${name}: ${stdout.trim().split('\n').pop()}` : `fuzz ${name}: FAILED (${code ?? signal})\n${r.failure}`);
      resolve(r);
    });
  });
}

console.log(
  `\nfuzz: ${names.length} harnesses, ${seconds} s each${smoke ? ' (smoke: seed 1, checked-in corpus)' : ''}, ${jobs} at a time; ` +
    `load ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`,
);
const results = [];
const queue = [...names];
await Promise.all(
  Array.from({ length: Math.min(jobs, names.length) }, async () => {
    for (let n = queue.shift(); n; n = queue.shift()) results.push(await runHarness(n));
  }),
);
results.sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));

console.log(`\n${'harness'.padEnd(13)}${'runs'.padStart(11)}${'runs/s'.padStart(9)}${'edges'.padStart(8)}${'seeds'.padStart(8)}${'pool'.padStart(7)}  result`);
for (const r of results) {
  const cell = (v, w) => String(v ?? '-').padStart(w);
  console.log(`${r.name.padEnd(13)}${cell(r.runs, 11)}${cell(r.perSecond, 9)}${cell(r.edges, 8)}${cell(r.edgesSeeds, 8)}${cell(r.pool, 7)}  ${r.ok ? 'no finding' : 'FINDING'}`);
}
console.log('(edges: distinct hashed control-flow edges reached; seeds: edges after replaying the seed corpus)');
fs.mkdirSync(path.join(root, 'out/fuzz'), { recursive: true });
fs.writeFileSync(path.join(root, 'out/fuzz/summary.json'), `${JSON.stringify({ seconds, smoke, load: os.loadavg()[0], results }, null, 2)}\n`);
if (results.some((r) => !r.ok)) {
  console.error(`fuzz: FAILED: ${results.filter((r) => !r.ok).map((r) => r.name).join(', ')} (inputs under ${path.relative(root, findings)})`);
  process.exit(1);
}
