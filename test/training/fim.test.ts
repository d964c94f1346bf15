// fim.test.ts - the fill-in-the-middle examples k3-mini v2 trains on are the layout the server
// sends: training/check_fim.py learns a small tokenizer with the three FIM names in reserved
// special slots, builds 60 examples of a TypeScript document at seeded split points, and
// reports what it checked. The engine must read the FIM names as those ids, training's
// Python encoder must give the engine's ids on every piece (the server encodes each piece on
// its own), and every example must reassemble the document (header + whole lines up to the
// middle's end, suffix from there, [EOS] last, inside its token budget).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/paths';

interface Report {
  fim_ids: number[];
  n_ranks: number;
  engine_fim_ids: number[];
  examples: number;
  pieces_checked: number;
  piece_mismatches: number;
  layout_errors: unknown[];
  single_line: number;
  multi_line: number;
  mid_line: number;
  healed_bytes: number;
}

test('FIM training examples are the server layout, encoded as the engine encodes', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-fim-'));
  try {
    const r = spawnSync('/usr/bin/python3', [path.join(repoRoot, 'training/check_fim.py'), dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, `check_fim.py failed (is python3-regex installed?):\n${r.stderr}`);
    const report = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as Report;
    assert.deepEqual(report.fim_ids, [report.n_ranks + 10, report.n_ranks + 11, report.n_ranks + 12]);
    assert.deepEqual(report.engine_fim_ids, report.fim_ids);
    assert.equal(report.examples, 60);
    assert.equal(report.pieces_checked, 240);
    assert.equal(report.piece_mismatches, 0);
    assert.deepEqual(report.layout_errors, []);
    assert.ok(report.single_line > 0 && report.multi_line > 0 && report.mid_line > 0, JSON.stringify(report));
    assert.ok(report.healed_bytes > 0, 'some cursors are inside a pre-token and are healed');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
