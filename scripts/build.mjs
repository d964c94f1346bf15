// build.mjs - `npm run build`: type-check (a failure stops the build), the three esbuild
// bundles, and the native engine, CLI, tests and addon. The addon is copied next to the
// server bundle (dist/k3.node), where server/ loads it from.
//   --no-native   skip the C build (TypeScript only)
//   --minify      minified bundles (what `npm run package` ships)
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildProduct, root } from './esbuild-common.mjs';

const args = new Set(process.argv.slice(2));

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { stdio: 'inherit', cwd: root, ...opts });
  if (r.status !== 0) {
    console.error(`build: '${cmd} ${argv.join(' ')}' failed (exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
}

run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', root]);
await buildProduct({ minify: args.has('--minify') });
if (!args.has('--no-native')) {
  run('make', ['-C', 'native', '-j2', 'all', '--no-print-directory']);
  fs.copyFileSync(path.join(root, 'native/build/k3.node'), path.join(root, 'dist/k3.node'));
}
console.log('build: ok');
