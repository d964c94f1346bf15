// vsix.test.ts - `npm run package` writes a .vsix holding exactly the bundles, the native
// addon, the media and the manifest: nothing from the sources, tests or node_modules.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/paths';
import { listZipEntries } from '../support/zip';

test('the vsix contains the bundles, the addon and media, and nothing else', () => {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'scripts/package.mjs')], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
  const { version } = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
  const vsix = path.join(repoRoot, `k3-code-${version}-${process.platform}-${process.arch}.vsix`);
  const entries = listZipEntries(vsix).filter((e) => e.startsWith('extension/'));

  const required = [
    'extension/package.json',
    'extension/readme.md',
    'extension/LICENSE.txt',
    'extension/dist/extension.js',
    'extension/dist/server.js',
    'extension/dist/k3.node',
    'extension/dist/webview/main.js',
  ];
  for (const name of required) assert.ok(entries.includes(name), `${name} missing from the vsix`);

  const allowed = (e: string) =>
    required.includes(e) || /^extension\/dist\/webview\/[^/]+\.(js|css)$/.test(e) || e.startsWith('extension/media/');
  assert.deepEqual(entries.filter((e) => !allowed(e)), [], 'files outside the allow-list');
});
