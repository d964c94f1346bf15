// tokenizer.ts - encode throughput of the engine's tokenizer (through the addon, as
// the server calls it) and of js-tiktoken configured as the release (test/tokenizer/
// reference.ts), on one large source file, in the same run; also checks that both give
// the same ids. Not a test.
//   node scripts/run-ts.mjs scripts/bench/tokenizer.ts (or npm run bench tokenizer) [FILE] [--runs N]
// FILE defaults to node_modules/typescript/lib/typescript.js (about 9 MB). The addon is
// dist/k3.node (npm run build) unless K3_ADDON names another.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Tokenizer } from '../../server/engine/tokenizer';
import { repoRoot as root } from '../../test/support/paths';
import { loadReference } from '../../test/tokenizer/reference';

const args = process.argv.slice(2);
const runsAt = args.indexOf('--runs');
const runs = runsAt >= 0 ? Number(args.splice(runsAt, 2)[1]) : 3;
const file = args[0] ?? path.join(root, 'node_modules/typescript/lib/typescript.js');
process.env.K3_ADDON ??= path.join(root, 'dist/k3.node');

const dir = path.join(root, 'test/data/kimi-tokenizer');
const text = fs.readFileSync(file, 'utf8');
const megabytes = Buffer.byteLength(text) / 1e6;

/** Best wall time of `times` calls, in seconds, and the last result. */
function best<T>(times: number, fn: () => T): [number, T] {
  let bestS = Infinity;
  let out: T | undefined;
  for (let i = 0; i < times; i++) {
    const t0 = process.hrtime.bigint();
    out = fn();
    bestS = Math.min(bestS, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return [bestS, out as T];
}

const tok = Tokenizer.open(dir);
const ref = loadReference(dir, fs.readFileSync(path.join(dir, 'pat_str.txt'), 'utf8'));
const [cSeconds, cIds] = best(runs, () => tok.encode(text, false));
const [jsSeconds, jsIds] = best(Math.max(1, Math.min(runs, 2)), () => ref.encode(text, false));
const same = cIds.length === jsIds.length && jsIds.every((id, i) => cIds[i] === id);

console.log(`${path.relative(root, file) || file}: ${megabytes.toFixed(2)} MB, ${cIds.length} tokens`);
console.log(`engine (C, via addon): ${(megabytes / cSeconds).toFixed(1)} MB/s (${(cSeconds * 1e3).toFixed(0)} ms, best of ${runs})`);
console.log(`js-tiktoken:           ${(megabytes / jsSeconds).toFixed(1)} MB/s (${(jsSeconds * 1e3).toFixed(0)} ms)`);
console.log(`same ids: ${same ? 'yes' : 'NO'}; engine / js-tiktoken speed: ${(jsSeconds / cSeconds).toFixed(1)}x`);
process.exit(same ? 0 : 1);
