// cli.test.ts - the `k3` command-line tool's basic contract: --help prints usage and exits
// 0, --version matches the engine, an unknown option is refused with exit 2 and the usage.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { k3Cli } from '../support/paths';

test('k3 --help prints usage and exits 0', () => {
  const r = spawnSync(k3Cli, ['--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^k3 \d+\.\d+\.\d+, the Kimi K3 inference engine/);
  assert.match(r.stdout, /usage: k3 /);
});

test('k3 --version prints the engine version', () => {
  const r = spawnSync(k3Cli, ['--version'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout.trim(), /^k3 \d+\.\d+\.\d+$/);
});

test('k3 refuses an unknown option with exit 2 and the usage on stderr', () => {
  const r = spawnSync(k3Cli, ['--no-such-option'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown option or command '--no-such-option'/);
  assert.match(r.stderr, /usage: k3 /);
});

test('k3 refuses --spec-always without --spec, naming what it needs', () => {
  const r = spawnSync(k3Cli, ['/nonexistent', '--ids', '1', '--spec-always'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--spec-always .* needs --spec N/);
});
