// start.mjs - `npm start`: the one-command demo. Makes sure code-server is there
// (scripts/e2e/setup.sh --no-browser: no browser is installed, apt is asked only for what is
// missing, after saying what and why), builds and packages only what the extension runs
// (type-check, bundles, the engine library and the addon: no CLI, no C tests, no sanitizer
// builds) when a source changed since the last package, installs the .vsix into out/demo/
// when it changed, opens a sample workspace and prints the URL to open in your browser.
// It prints one progress line per step; a tool's own output appears only when it fails.
// k3.modelPath is left unset, so the extension runs its embedded default model
// (media/models/k3-mini, a small code model the project trained; see its MODEL_CARD.md).
// Chat history and choices persist under out/demo/ between runs. Ctrl+C stops it.
//   npm start [-- --port N]
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { root } from './esbuild-common.mjs';

const started = Date.now();
const args = process.argv.slice(2);
const portArg = args.indexOf('--port');
const port = portArg >= 0 ? Number(args[portArg + 1]) : Number(process.env.K3_PORT ?? 8123);
const CODE_SERVER_VERSION = '4.100.3';

const seconds = (t0) => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

/** Runs a step that prints its own progress lines (or, when `capture`, only fails loudly). */
function run(name, cmd, argv, { capture = false } = {}) {
  const t0 = Date.now();
  const r = spawnSync(cmd, argv, { stdio: capture ? ['ignore', 'pipe', 'pipe'] : ['ignore', 'inherit', 'inherit'], cwd: root, encoding: 'utf8' });
  if (r.status !== 0) {
    if (capture) process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}`);
    console.error(`start: ${name} failed`);
    process.exit(1);
  }
  console.log(`start: ${name}: ${seconds(t0)}`);
}

/** The newest modification time among the files under `p` (a file or a folder). */
function newest(p) {
  const st = fs.statSync(p, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.mtimeMs;
  let t = st.mtimeMs;
  for (const e of fs.readdirSync(p)) t = Math.max(t, newest(path.join(p, e)));
  return t;
}

/** What the .vsix is made from: a change to any of these repackages it. */
const INPUTS = [
  'package.json', 'README.md', 'LICENSE', '.vscodeignore', 'tsconfig.json', 'scripts/build.mjs', 'scripts/package.mjs',
  'scripts/esbuild-common.mjs', 'extension', 'server', 'webview', 'media', 'native/src', 'native/include', 'native/addon', 'native/Makefile',
];

// A port that answers already is another demo (or something else): say so instead of failing later.
try {
  await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
  console.error(`start: port ${port} is in use (another npm start?); choose another with npm start -- --port N`);
  process.exit(1);
} catch {
  // free
}

run(`code-server ${CODE_SERVER_VERSION}`, 'bash', [path.join(root, 'scripts/e2e/setup.sh'), '--no-browser']);

const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const vsix = path.join(root, `k3-code-${version}-${process.platform}-${process.arch}.vsix`);
const packaged = fs.statSync(vsix, { throwIfNoEntry: false })?.mtimeMs ?? 0;
if (packaged > Math.max(...INPUTS.map((p) => newest(path.join(root, p))))) {
  console.log(`start: ${path.basename(vsix)} is up to date`);
} else {
  console.log('start: building and packaging the extension (the engine and its addon only: no CLI, C tests or sanitizer builds)');
  run('packaged', process.execPath, [path.join(root, 'scripts/package.mjs'), '--engine-only', '--quiet']);
}

const demo = path.join(root, 'out/demo');
const dirs = { data: path.join(demo, 'data'), exts: path.join(demo, 'extensions'), ws: path.join(demo, 'workspace'), tmp: path.join(demo, 't') };
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

// Reinstall only a .vsix this demo has not installed yet.
const stamp = path.join(demo, 'installed.json');
const vsixStat = fs.statSync(vsix);
const current = JSON.stringify({ vsix, mtimeMs: vsixStat.mtimeMs, size: vsixStat.size });
if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === current && fs.readdirSync(dirs.exts).some((d) => d.startsWith('k3-code.k3-code-'))) {
  console.log('start: the extension is installed already');
} else {
  fs.rmSync(dirs.exts, { recursive: true, force: true });
  fs.mkdirSync(dirs.exts, { recursive: true });
  run('extension installed', process.execPath, [entry, '--config', config, '--user-data-dir', dirs.data, '--extensions-dir', dirs.exts, '--install-extension', vsix], { capture: true });
  fs.writeFileSync(stamp, current);
}

const server = spawn(
  process.execPath,
  [entry, '--config', config, '--user-data-dir', dirs.data, '--extensions-dir', dirs.exts, '--bind-addr', `127.0.0.1:${port}`,
    '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-getting-started-override', dirs.ws],
  { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, TMPDIR: dirs.tmp } },
);
let exited = false;
server.on('exit', (code) => {
  exited = true;
  process.exit(code ?? 0);
});
const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.ws)}`;
for (;;) {
  try {
    if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
  } catch {
    // not listening yet; code-server answers within a second or two
  }
  if (exited) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(
  `\nK3 Code is running in VS Code (code-server ${CODE_SERVER_VERSION}), ready in ${seconds(started)}. Open in your browser:\n\n  ${url}\n\n` +
    'Model: the embedded default, k3-mini (a code-completion model: ghost text; chat needs a K3 model folder).\nCtrl+C stops it.',
);
const stop = () => server.kill('SIGTERM');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
