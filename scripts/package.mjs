// package.mjs - `npm run package`: a minified build, then `vsce package` for this platform
// (the native addon is platform code), writing k3-code-<version>-linux-x64.vsix at the
// repository root. What goes in is decided by .vscodeignore (an allow-list).
//   --engine-only, --quiet   passed to build.mjs (`npm start` builds only what it runs, quietly)
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { root } from './esbuild-common.mjs';

const target = `${process.platform}-${process.arch}`;
const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const out = path.join(root, `k3-code-${version}-${target}.vsix`);

const passed = process.argv.slice(2).filter((a) => a === '--engine-only' || a === '--quiet');
const quiet = passed.includes('--quiet');

for (const [cmd, argv] of [
  [process.execPath, [path.join(root, 'scripts/build.mjs'), '--minify', ...passed]],
  [
    process.execPath,
    [
      path.join(root, 'node_modules/@vscode/vsce/vsce'),
      'package',
      '--target', target,
      '--no-dependencies',
      '--allow-missing-repository',
      // The README's screenshots are repository-relative; there is no public URL to point them at.
      '--no-rewrite-relative-links',
      '--out', out,
    ],
  ],
]) {
  // The build prints its own progress; vsce's listing is kept unless it fails.
  const capture = quiet && !argv[0].endsWith('build.mjs');
  const r = spawnSync(cmd, argv, { stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit', cwd: root, encoding: 'utf8' });
  if (r.status !== 0) {
    if (capture) process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}`);
    console.error(`package: '${path.basename(argv[0])} ${argv.slice(1).join(' ')}' failed`);
    process.exit(1);
  }
}
console.log(`package: wrote ${path.relative(root, out)}`);
