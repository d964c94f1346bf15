// start.mjs - `npm start`: the one-command demo. Builds and packages the extension, installs
// code-server if missing (scripts/e2e/setup.sh), installs the .vsix into out/demo/, opens a
// sample workspace and prints the URL to open in a browser. The model folder is the tiny
// generated test checkpoint (random weights: the replies are gibberish, but every part of
// the extension runs) until the embedded default model lands. Ctrl+C stops it.
//   npm start [-- --port N] [-- --no-package]
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { root } from './esbuild-common.mjs';

const args = process.argv.slice(2);
const portArg = args.indexOf('--port');
const port = portArg >= 0 ? Number(args[portArg + 1]) : Number(process.env.K3_PORT ?? 8123);

function run(name, cmd, argv, opts = {}) {
  console.log(`start: ${name}`);
  const r = spawnSync(cmd, argv, { stdio: ['ignore', 'inherit', 'inherit'], cwd: root, ...opts });
  if (r.status !== 0) {
    console.error(`start: ${name} failed`);
    process.exit(1);
  }
  return r;
}

const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const vsix = path.join(root, `k3-code-${version}-${process.platform}-${process.arch}.vsix`);
if (!args.includes('--no-package') || !fs.existsSync(vsix)) run('build and package', process.execPath, [path.join(root, 'scripts/package.mjs')]);
run('code-server', 'bash', [path.join(root, 'scripts/e2e/setup.sh')]);
console.log('start: model folder (the tiny generated checkpoint; the embedded default model is not there yet)');
const fixture = spawnSync(process.execPath, [path.join(root, 'scripts/run-ts.mjs'), path.join(root, 'scripts/e2e/ensure-fixture.ts')], {
  cwd: root,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
});
const modelPath = fixture.stdout.trim().split('\n').pop();
if (fixture.status !== 0 || !modelPath) process.exit(1);

const demo = path.join(root, 'out/demo');
const dirs = { data: path.join(demo, 'data'), exts: path.join(demo, 'extensions'), ws: path.join(demo, 'workspace'), tmp: path.join(demo, 't') };
fs.rmSync(dirs.exts, { recursive: true, force: true });
for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
const quiet = JSON.parse(fs.readFileSync(path.join(root, 'scripts/e2e/workbench-settings.json'), 'utf8'));
for (const [scope, values] of [['User', quiet], ['Machine', { 'k3.modelPath': modelPath }]]) {
  fs.mkdirSync(path.join(dirs.data, scope), { recursive: true });
  fs.writeFileSync(path.join(dirs.data, scope, 'settings.json'), JSON.stringify(values, null, 2));
}
const sample = path.join(dirs.ws, 'src/math.ts');
if (!fs.existsSync(sample)) {
  fs.mkdirSync(path.dirname(sample), { recursive: true });
  fs.writeFileSync(sample, '// Type below and wait for the ghost text; Tab accepts it, Alt+\\ asks at once.\nexport function add(a: number, b: number): number {\n  return a + b;\n}\n\n');
}
const config = path.join(demo, 'config.yaml');
fs.writeFileSync(config, '{}\n');
const entry = path.join(root, '.e2e/code-server/node_modules/code-server/out/node/entry.js');
run('install the extension', process.execPath, [entry, '--config', config, '--user-data-dir', dirs.data, '--extensions-dir', dirs.exts, '--install-extension', vsix]);

const server = spawn(
  process.execPath,
  [entry, '--config', config, '--user-data-dir', dirs.data, '--extensions-dir', dirs.exts, '--bind-addr', `127.0.0.1:${port}`,
    '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-getting-started-override', dirs.ws],
  { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, TMPDIR: dirs.tmp } },
);
const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.ws)}`;
for (let i = 0; i < 300; i++) {
  try {
    if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
  } catch {
    // not up yet
  }
  await new Promise((r) => setTimeout(r, 100));
}
console.log(`\nK3 Code is running in VS Code (code-server ${'4.100.3'}). Open:\n\n  ${url}\n\nModel folder: ${modelPath}\nCtrl+C stops it.`);
const stop = () => server.kill('SIGTERM');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
server.on('exit', (code) => process.exit(code ?? 0));
