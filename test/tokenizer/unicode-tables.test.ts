// unicode-tables.test.ts - native/src/tokenizer_unicode.c is exactly what
// scripts/gen-unicode-tables.mjs generates from this Node's Unicode data, so the committed
// tables were not edited by hand and are not stale.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/paths';

test('regenerating the tokenizer Unicode tables reproduces the committed file byte for byte', () => {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'scripts/gen-unicode-tables.mjs'), '--stdout'], {
    maxBuffer: 16 << 20,
  });
  assert.equal(r.status, 0, r.stderr.toString());
  const committed = fs.readFileSync(path.join(repoRoot, 'native/src/tokenizer_unicode.c'));
  assert.ok(
    r.stdout.equals(committed),
    `native/src/tokenizer_unicode.c differs from a fresh run on Unicode ${process.versions.unicode}: ` +
      'run `node scripts/gen-unicode-tables.mjs` and commit the result',
  );
});
