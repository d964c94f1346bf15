// addon.test.ts - the native addon loads in Node from where the server bundle finds it and
// reports the same engine version as the CLI.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { addonFile, k3Cli } from '../support/paths';

test('the addon loads from dist/ and reports the engine version the CLI reports', () => {
  const addon = require(addonFile) as { version(): string };
  const cli = spawnSync(k3Cli, ['--version'], { encoding: 'utf8' });
  assert.equal(cli.status, 0);
  assert.equal(`k3 ${addon.version()}`, cli.stdout.trim());
});
