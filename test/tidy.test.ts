// tidy.test.ts - the repository's own invariants, checked on the source tree: every source
// file says what it is for in its opening comment, dependencies point one way (server/
// never imports vscode, the engine layer never imports the services that use it, nor they
// the context that holds them, the addon sees only k3.h, the engine never sees Node), tests are
// never focused or skipped, the command table matches package.json, the preset list has one
// source, the engine's table (native/src/presets.c), which every other list follows, and no
// tracked file names a path of one machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { engine } from './support/engine';
import { k3Cli, repoRoot } from './support/paths';

const SOURCE_DIRS = ['protocol', 'extension', 'server', 'webview', 'scripts', 'test', 'training', 'native/src', 'native/include', 'native/tools', 'native/tests', 'native/addon', 'native/fuzz'];
const SOURCE_EXT = /\.(ts|mjs|js|c|h|cc|py)$/;
const SKIP_DIRS = new Set(['node_modules', 'data', 'build']);
// Dot folders are git-ignored work (training/.corpus holds other projects' sources, training/.runs checkpoints).
const skipDir = (name: string) => SKIP_DIRS.has(name) || name.startsWith('.');

function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (!skipDir(e.name)) out.push(...walk(p));
    } else if (SOURCE_EXT.test(e.name)) out.push(p);
  }
  return out;
}

const sources = SOURCE_DIRS.flatMap((d) => walk(path.join(repoRoot, d)));
const rel = (f: string) => path.relative(repoRoot, f);
const read = (f: string) => fs.readFileSync(f, 'utf8');

test('every source file opens with a comment saying what it is for', () => {
  assert.ok(sources.length > 20, `found only ${sources.length} source files`);
  const bare = sources.filter((f) => {
    const lines = read(f).split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#!'));
    const first = lines[0]?.trim() ?? '';
    const opening = first.startsWith('//') || first.startsWith('/*') || first.startsWith('"""');
    return !opening || lines.slice(0, 6).join(' ').replace(/[/*\s"]/g, '').length < 30;
  });
  assert.deepEqual(bare.map(rel), []);
});

test('server code never imports vscode', () => {
  const offenders = walk(path.join(repoRoot, 'server')).filter((f) =>
    /(from\s+['"]vscode['"]|require\(\s*['"]vscode['"]\s*\))/.test(read(f)),
  );
  assert.deepEqual(offenders.map(rel), []);
});

test('protocol/ imports nothing of the sides that share it', () => {
  // The extension, the server and the webview all import protocol/; a dependency the other
  // way would pull one side's code into another's bundle. Only its own files and the LSP
  // type package are allowed.
  const offenders: string[] = [];
  for (const f of walk(path.join(repoRoot, 'protocol'))) {
    for (const m of read(f).matchAll(/(?:from|import|require\()\s*['"]([^'"]+)['"]/g)) {
      const spec = m[1];
      const own = spec.startsWith('./') && !spec.includes('..');
      if (!own && spec !== 'vscode-languageserver-protocol') offenders.push(`${rel(f)} imports ${spec}`);
    }
  }
  assert.ok(walk(path.join(repoRoot, 'protocol')).length >= 2, 'protocol/ holds lsp.ts and webview.ts');
  assert.deepEqual(offenders, []);
});

/** The repository files `f` imports by a relative path, without their extension. */
function relativeImports(f: string): string[] {
  return [...read(f).matchAll(/(?:from|import|require\()\s*['"](\.[^'"]+)['"]/g)].map((m) =>
    rel(path.resolve(path.dirname(f), m[1])).replace(/\.(ts|js)$/, ''),
  );
}

test('the engine layer imports no service, and the services do not import the context that holds them', () => {
  // server/engine/ runs the model; the completion and chat services use it, never the other
  // way. Each service declares the little it uses of ServerCtx as a host interface, so
  // server/ctx.ts (which builds them) is never imported back.
  const offenders: string[] = [];
  for (const f of walk(path.join(repoRoot, 'server/engine'))) {
    for (const spec of relativeImports(f)) {
      if (/^server\/(chat|completion)(\/|$)/.test(spec)) offenders.push(`${rel(f)} imports ${spec}`);
    }
  }
  const services = [...walk(path.join(repoRoot, 'server/chat')), ...walk(path.join(repoRoot, 'server/completion')), path.join(repoRoot, 'server/status.ts')];
  assert.ok(services.length >= 5, `found only ${services.length} service files`);
  for (const f of services) {
    for (const spec of relativeImports(f)) if (spec === 'server/ctx') offenders.push(`${rel(f)} imports ${spec}`);
  }
  assert.deepEqual(offenders, []);
});

test('the addon includes only the public engine header besides its own, napi and the C++ library', () => {
  const addonDir = path.join(repoRoot, 'native/addon');
  const own = new Set(fs.readdirSync(addonDir));
  for (const f of walk(addonDir)) {
    const quoted = [...read(f).matchAll(/#include\s+"([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(quoted.filter((h) => h !== 'k3.h' && !own.has(h)), [], `${rel(f)} includes engine internals`);
  }
});

test('the engine sources never depend on Node', () => {
  const engine = ['native/src', 'native/include', 'native/tools', 'native/tests'].flatMap((d) => walk(path.join(repoRoot, d)));
  const offenders = engine.filter((f) => /#include\s*[<"](napi|node_api|node)\.h/.test(read(f)));
  assert.deepEqual(offenders.map(rel), []);
});

test('no test is focused or skipped', () => {
  const pattern = /\b(test|it|describe|suite)\.(only|skip|todo)\s*\(|\{\s*(only|skip|todo)\s*:\s*true/;
  const offenders = walk(path.join(repoRoot, 'test'))
    .filter((f) => f !== __filename && !f.endsWith('tidy.test.ts'))
    .filter((f) => pattern.test(read(f)));
  assert.deepEqual(offenders.map(rel), []);
});

test('every command declared in package.json is in the extension command table and back', () => {
  const manifest = JSON.parse(read(path.join(repoRoot, 'package.json')));
  const declared = (manifest.contributes.commands as { command: string }[]).map((c) => c.command).sort();
  const table = read(path.join(repoRoot, 'extension/commands.ts'));
  const registered = [...table.matchAll(/^\s*'(k3\.[A-Za-z.]+)':/gm)].map((m) => m[1]).sort();
  assert.deepEqual(registered, declared);
});

test('no tracked doc or source names a path of one machine', () => {
  // The rule of the project's before-stop hook, applied to each path rather than each line:
  // an absolute path names a place inside the repository's own tree or none at all. System
  // paths (/usr, /proc, /tmp in an example command...) and the /path/to/ placeholder are
  // everyone's. Tests are left out: they pass made-up paths (a settings test's /home/me/k3)
  // to the code they test.
  const DOC_EXT = /\.(md|sh|ts|mjs|js|c|h|cc|py|json|yml|yaml)$/;
  const files = [
    ...['docs', ...SOURCE_DIRS].filter((d) => d !== 'test' && d !== 'native/tests').flatMap((d) => walkAll(path.join(repoRoot, d), DOC_EXT)),
    ...fs.readdirSync(repoRoot).filter((f) => /\.md$/.test(f)).map((f) => path.join(repoRoot, f)),
  ];
  const absolute = /(?:^|[\s`'"(=])(\/[a-z]+\/[A-Za-z0-9_.+-]+\/)/gm;
  const everyones = /^\/(usr|etc|dev|proc|sys|bin|opt|var|tmp|run|lib|home\/user|path\/to)\//;
  const offenders: string[] = [];
  for (const f of files) {
    const text = read(f);
    for (const m of text.matchAll(absolute)) {
      const line = text.slice(0, m.index).split('\n').length;
      if (!everyones.test(m[1])) offenders.push(`${rel(f)}:${line}: ${m[1]}`);
    }
  }
  assert.deepEqual(offenders, []);
});

function walkAll(dir: string, ext: RegExp): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (!skipDir(e.name)) out.push(...walkAll(p, ext));
    } else if (ext.test(e.name)) out.push(p);
  }
  return out;
}

test("every list of presets is the engine's: package.json's k3.preset enum and the CLI's usage", () => {
  // The names k3_preset_resolve takes: "auto", the table's, "mapped".
  const names = ['auto', ...engine.presets().map((p) => p.name), 'mapped'];
  const manifest = JSON.parse(read(path.join(repoRoot, 'package.json')));
  assert.deepEqual(manifest.contributes.configuration.properties['k3.preset'].enum, names, "package.json's k3.preset enum");
  const help = spawnSync(k3Cli, ['--help'], { encoding: 'utf8' });
  const usage = /--preset NAME +([a-z |]+):/.exec(help.stdout);
  assert.ok(usage, `k3 --help has no --preset NAME line:\n${help.stdout}${help.stderr}`);
  assert.deepEqual(usage[1].split('|').map((n) => n.trim()).sort(), [...names].sort(), "the --preset line of k3's usage (main.c)");
});
