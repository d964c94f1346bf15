// fixtures.ts - shared generated checkpoints for tests and benchmarks: ensureFixture()
// generates a checkpoint into <repo>/.fixtures/<name> once and reuses it while its stamp
// (options, generator version, hash of the generator's sources and tokenizer files)
// matches. Safe when several test processes ask at once: each generates into its own
// temporary directory and the first rename wins. It does not generate anything else.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_SEED, GENERATOR_VERSION, generateCheckpoint, validateOptions } from '../fixture/checkpoint';
import { repoRoot, TOKENIZER_FILES, tokenizerDir } from '../fixture/paths';
import type { FixtureSize, GateForm, RouterForm } from '../fixture/sizes';

export type { FixtureSize, GateForm, RouterForm } from '../fixture/sizes';

export interface FixtureRequest {
  /** Default 'tiny'. */
  size?: FixtureSize;
  /** Default 'lowerbound' (the release's gate form). */
  gate?: GateForm;
  /** Default 1. */
  seed?: number;
  /** Default 'soft'; 'sharp' puts the router's scores far from 0.5; 'balanced' favours no expert. */
  router?: RouterForm;
}

const STAMP = '.ensure-stamp.json';

/** The directory name a request maps to, e.g. `tiny-lowerbound-s1`, `tiny-lowerbound-sharp-s1`. */
export function fixtureName(r: FixtureRequest = {}): string {
  return `${r.size ?? 'tiny'}-${r.gate ?? 'lowerbound'}${r.router && r.router !== 'soft' ? `-${r.router}` : ''}-s${r.seed ?? DEFAULT_SEED}`;
}

/** Changes whenever the generator's code or the copied tokenizer files change. */
function sourceHash(): string {
  const h = crypto.createHash('sha256');
  const dir = path.join(repoRoot(), 'test/fixture');
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts')).sort()) {
    h.update(f).update(fs.readFileSync(path.join(dir, f)));
  }
  for (const f of TOKENIZER_FILES) h.update(f).update(fs.readFileSync(path.join(tokenizerDir(), f)));
  return h.digest('hex');
}

function readStamp(dir: string): string | null {
  try {
    return fs.readFileSync(path.join(dir, STAMP), 'utf8');
  } catch {
    return null;
  }
}

/** The directory of a generated checkpoint for `r`, generating it first if needed. */
export function ensureFixture(r: FixtureRequest = {}): string {
  const options = validateOptions({ size: r.size ?? 'tiny', gate: r.gate ?? 'lowerbound', seed: r.seed ?? DEFAULT_SEED, router: r.router });
  const root = path.join(repoRoot(), '.fixtures');
  const dir = path.join(root, fixtureName(options));
  const stamp = JSON.stringify({ ...options, version: GENERATOR_VERSION, source: sourceHash() });
  if (readStamp(dir) === stamp) return dir;

  const tmp = `${dir}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  try {
    generateCheckpoint(tmp, options);
    fs.writeFileSync(path.join(tmp, STAMP), stamp);
    for (let attempt = 0; ; attempt++) {
      try {
        fs.renameSync(tmp, dir);
        return dir;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e;
        if (readStamp(dir) === stamp) return dir; // another process got there first
        if (attempt > 0) throw e;
        fs.rmSync(dir, { recursive: true, force: true }); // stale: an older generator's output
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
