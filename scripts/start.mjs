// start.mjs - `npm start`: the one-command demo. Builds and packages the extension, installs
// code-server if missing (scripts/e2e/setup.sh), installs the .vsix into out/demo/, opens a
// sample workspace and prints the URL to open in a browser. k3.modelPath is left unset, so the
// extension runs its embedded default model (media/models/k3-mini, a small code model the
// project trained; see its MODEL_CARD.md). Ctrl+C stops it.
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
const demo = path.join(root, 'out/demo');
const dirs = { data: path.join(demo, 'data'), exts: path.join(demo, 'extensions'), ws: path.join(demo, 'workspace'), tmp: path.join(demo, 't') };
fs.rmSync(dirs.exts, { recursive: true, force: true });
for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
const quiet = JSON.parse(fs.readFileSync(path.join(root, 'scripts/e2e/workbench-settings.json'), 'utf8'));
fs.mkdirSync(path.join(dirs.data, 'User'), { recursive: true });
fs.writeFileSync(path.join(dirs.data, 'User', 'settings.json'), JSON.stringify(quiet, null, 2));
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
console.log(`\nK3 Code is running in VS Code (code-server ${'4.100.3'}). Open:\n\n  ${url}\n\nModel: the embedded default (media/models/k3-mini).\nCtrl+C stops it.`);
const stop = () => server.kill('SIGTERM');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
server.on('exit', (code) => process.exit(code ?? 0));
