// run-ts.mjs - runs a TypeScript developer tool: `node scripts/run-ts.mjs FILE.ts [args...]`.
// The file is bundled to out/run/ and executed with the remaining arguments; its exit code
// becomes ours.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { buildNodeScripts, root } from './esbuild-common.mjs';

const [entry, ...args] = process.argv.slice(2);
if (!entry) {
  console.error('usage: node scripts/run-ts.mjs FILE.ts [args...]');
  process.exit(2);
}
const abs = path.resolve(entry);
const outdir = path.join(root, 'out/run');
await buildNodeScripts([abs], root, outdir);
const js = path.join(outdir, path.relative(root, abs).replace(/\.ts$/, '.js'));
const r = spawnSync(process.execPath, ['--enable-source-maps', js, ...args], { stdio: 'inherit' });
process.exit(r.status ?? 1);
