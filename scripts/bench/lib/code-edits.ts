// code-edits.ts - the code-editing workloads the speculation benchmarks share: five of the
// language server's own TypeScript files (real code, never in k3-mini's corpus), each cut
// at the first line start past 40 %; the prompt is the 2,400 characters before the cut, the
// real continuation the next 600, and the drafting material the rest of the file plus the
// first 4,000 characters of the next two files. Also the parser of `k3 draft-replay`'s
// summary line. Used by scripts/bench/spec.ts and scripts/bench/scale.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../../../test/support/paths';

export interface CodeEdit {
  /** The file, relative to server/. */
  workload: string;
  prefix: string;
  truth: string;
  material: string;
}

const SOURCES = ['completion/service.ts', 'chat/service.ts', 'engine/runner.ts', 'state/store.ts', 'scheduler.ts'];

export function codeEdits(): CodeEdit[] {
  const files = SOURCES.map((f) => path.join(repoRoot, 'server', f));
  return files.map((file, i) => {
    const text = fs.readFileSync(file, 'utf8');
    const cut = text.indexOf('\n', Math.floor(text.length * 0.4)) + 1;
    const neighbours = [1, 2].map((k) => fs.readFileSync(files[(i + k) % files.length], 'utf8').slice(0, 4000));
    return {
      workload: path.relative(path.join(repoRoot, 'server'), file),
      prefix: text.slice(Math.max(0, cut - 2400), cut),
      truth: text.slice(cut, cut + 600),
      material: [text.slice(cut + 600), ...neighbours].join('\n'),
    };
  });
}

/** Writes a workload's prefix, truth and material next to `base` (base.prefix, ...). */
export function writeCodeEdit(e: CodeEdit, base: string): void {
  fs.writeFileSync(`${base}.prefix`, e.prefix);
  fs.writeFileSync(`${base}.truth`, e.truth);
  fs.writeFileSync(`${base}.material`, e.material);
}

/** The counts of `k3 draft-replay`'s summary line. */
export function parseReplay(out: string): { drafted: number; accepted: number; tokensPerPass: number } {
  const m = /(\d+) drafted, (\d+) accepted \(([\d.]+)%\), ([\d.]+) tokens per pass/.exec(out);
  if (!m) throw new Error(`no replay line in:\n${out}`);
  return { drafted: Number(m[1]), accepted: Number(m[2]), tokensPerPass: Number(m[4]) };
}
