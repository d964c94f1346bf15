// bench.mjs - `npm run bench`: builds, then runs every benchmark under scripts/bench/ in
// turn (each prints its own table and writes JSON under out/bench/). Not part of `npm test`.
// `npm run bench -- NAME...` runs those whose file name contains a NAME. The opt-in ones
// run only when named: `scale` generates a 13.8 GB checkpoint and holds up to 10 GB.
// side-by-side.ts is never run from here: it needs a llama.cpp build and a GGUF as arguments.
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
const OPT_IN = ['scale.ts'];
const BY_HAND = ['side-by-side.ts'];
for (const f of fs.readdirSync(path.join(root, 'scripts/bench')).sort()) {
  if (!/\.(ts|mjs)$/.test(f) || (only.length && !only.some((o) => f.includes(o)))) continue;
  if (OPT_IN.includes(f) && !only.some((o) => f.includes(o))) continue;
  if (BY_HAND.includes(f)) continue;
  const file = path.join(root, 'scripts/bench', f);
  run(f.endsWith('.ts') ? [path.join(root, 'scripts/run-ts.mjs'), file] : [file]);
}
