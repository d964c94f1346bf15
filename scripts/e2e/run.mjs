// run.mjs - `npm run test:e2e`: the real-editor tests. Installs what is missing
// (scripts/e2e/setup.sh: chromium, code-server), packages the extension (`npm run package`),
// installs the .vsix into a fresh extensions folder under out/e2e/, bundles test/e2e/*.e2e.ts
// and runs them one file at a time with Node's test runner. Screenshots of failed steps go to
// test-results/. Not part of `npm test`: .ci/run calls it after `npm test`.
//   node scripts/e2e/run.mjs [--no-package] [substring...]
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildNodeScripts, root } from '../esbuild-common.mjs';

const args = process.argv.slice(2);
const noPackage = args.includes('--no-package');
const filters = args.filter((a) => !a.startsWith('--'));
const started = Date.now();

function run(name, cmd, argv, env = {}) {
  const t = Date.now();
  const r = spawnSync(cmd, argv, { stdio: 'inherit', cwd: root, env: { ...process.env, ...env } });
  console.log(`e2e: ${name} ${r.status === 0 ? 'done' : 'FAILED'} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  if (r.status !== 0) process.exit(1);
}

run('setup', 'bash', [path.join(root, 'scripts/e2e/setup.sh')]);
const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const vsix = path.join(root, `k3-code-${version}-${process.platform}-${process.arch}.vsix`);
if (!noPackage || !fs.existsSync(vsix)) run('package', process.execPath, [path.join(root, 'scripts/package.mjs')]);

const out = path.join(root, 'out/e2e');
const extensions = path.join(out, 'extensions');
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(extensions, { recursive: true });
const config = path.join(out, 'cs-config.yaml');
fs.writeFileSync(config, '{}\n');
run('install the vsix', process.execPath, [
  path.join(root, '.e2e/code-server/node_modules/code-server/out/node/entry.js'),
  '--config', config,
  '--user-data-dir', path.join(out, 'install-data'),
  '--extensions-dir', extensions,
  '--install-extension', vsix,
]);

const dir = path.join(root, 'test/e2e');
const sources = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.e2e.ts') && (filters.length === 0 || filters.some((s) => f.includes(s))))
  .map((f) => path.join(dir, f));
await buildNodeScripts(sources, path.join(root, 'test'), path.join(out, 'tests'));
const compiled = sources.map((f) => path.join(out, 'tests', path.relative(path.join(root, 'test'), f)).replace(/\.ts$/, '.js'));
fs.rmSync(path.join(root, 'test-results'), { recursive: true, force: true });
run(
  'tests',
  process.execPath,
  ['--enable-source-maps', '--test', '--test-concurrency=1', '--test-reporter=spec', ...compiled],
  { K3_E2E_EXTENSIONS: extensions },
);
console.log(`e2e: all done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
