// bench.mjs - `npm run bench`: builds, then runs every benchmark under scripts/bench/ in
// turn (each prints its own table and writes JSON under out/bench/). Not part of `npm test`.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { root } from './esbuild-common.mjs';

function run(argv) {
  const r = spawnSync(process.execPath, argv, { stdio: 'inherit', cwd: root });
  if (r.status !== 0) {
    console.error(`bench: '${argv.map((a) => path.relative(root, a) || a).join(' ')}' failed`);
    process.exit(1);
  }
}

run([path.join(root, 'scripts/build.mjs')]);
const only = process.argv.slice(2);
for (const f of fs.readdirSync(path.join(root, 'scripts/bench')).sort()) {
  if (!/\.(ts|mjs)$/.test(f) || (only.length && !only.some((o) => f.includes(o)))) continue;
  const file = path.join(root, 'scripts/bench', f);
  run(f.endsWith('.ts') ? [path.join(root, 'scripts/run-ts.mjs'), file] : [file]);
}
