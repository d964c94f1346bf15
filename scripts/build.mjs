// build.mjs - `npm run build`: type-check (a failure stops the build), the three esbuild
// bundles, and the native engine, CLI, tests and addon. The addon is copied next to the
// server bundle (dist/k3.node), where server/ loads it from.
//   --no-native     skip the C build (TypeScript only)
//   --engine-only   of the C build, only what the extension runs: the engine library and the
//                   addon (no CLI, no C tests, no AddressSanitizer builds; `npm start`)
//   --minify        minified bundles (what `npm run package` ships)
//   --quiet         one progress line per step instead of the tools' output, which is shown
//                   only when a step fails
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildProduct, root } from './esbuild-common.mjs';

const args = new Set(process.argv.slice(2));
const quiet = args.has('--quiet');

/** Runs one step; with --quiet its output is kept and printed only if it fails. */
function run(what, cmd, argv) {
  const t0 = Date.now();
  const r = spawnSync(cmd, argv, { stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit', cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 ** 2 });
  if (r.status !== 0) {
    if (quiet) process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}`);
    console.error(`build: ${what} failed ('${cmd} ${argv.join(' ')}', exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
  if (quiet) console.log(`build: ${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

run('type-check', process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', root]);
const t0 = Date.now();
await buildProduct({ minify: args.has('--minify') });
if (quiet) console.log(`build: bundles: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
if (!args.has('--no-native')) {
  const targets = args.has('--engine-only') ? ['lib', 'addon'] : ['all'];
  run(args.has('--engine-only') ? 'engine and addon' : 'engine, CLI, C tests and addon', 'make', ['-C', 'native', '-j2', ...targets, '--no-print-directory']);
  fs.copyFileSync(path.join(root, 'native/build/k3.node'), path.join(root, 'dist/k3.node'));
}
console.log('build: ok');
