// test-remote.mjs - `npm run test:remote`: the opt-in check of the remote backend against a
// real llama-server binary (not part of `npm test`: it needs a llama.cpp build and a GGUF,
// ../shared/peers/llama-cpp/ makes both). Builds the product, then runs
// test/remote-real/llama-server.check.ts with Node's test runner; it starts llama-server on
// loopback ports itself and prints the figures it measured.
//   npm run test:remote -- --llama-server PATH --gguf FILE [--tokenizer DIR]
// --tokenizer names a model folder with tiktoken.model and tokenizer_config.json (the
// fixture the GGUF was converted from), so prompts go as token ids as they would in use.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildNodeScripts, root } from './esbuild-common.mjs';

function usage(message) {
  console.error(`test:remote: ${message}`);
  console.error('usage: npm run test:remote -- --llama-server PATH --gguf FILE [--tokenizer DIR]');
  process.exit(2);
}

const args = process.argv.slice(2);
const opts = {};
for (let i = 0; i < args.length; i++) {
  const flag = args[i];
  if (!['--llama-server', '--gguf', '--tokenizer'].includes(flag)) usage(`unknown argument ${JSON.stringify(flag)}`);
  if (i + 1 >= args.length) usage(`${flag} needs a value`);
  opts[flag.slice(2)] = path.resolve(args[++i]);
}
if (!opts['llama-server']) usage('--llama-server PATH is required (a llama-server binary built at the Kimi-K3 commit)');
if (!opts.gguf) usage('--gguf FILE is required (the K3 fixture converted to GGUF, ../shared/peers/llama-cpp/README.md step 3)');
for (const [flag, p] of Object.entries(opts)) {
  if (!fs.existsSync(p)) usage(`--${flag} ${p} does not exist`);
}
if (opts.tokenizer && !fs.existsSync(path.join(opts.tokenizer, 'tiktoken.model'))) usage(`--tokenizer ${opts.tokenizer} has no tiktoken.model`);

const build = spawnSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { stdio: 'inherit', cwd: root });
if (build.status !== 0) process.exit(build.status ?? 1);
const entry = path.join(root, 'test/remote-real/llama-server.check.ts');
const outdir = path.join(root, 'out/test-remote');
fs.rmSync(outdir, { recursive: true, force: true });
await buildNodeScripts([entry], path.join(root, 'test'), outdir);
const js = path.join(outdir, 'remote-real/llama-server.check.js');
const r = spawnSync(process.execPath, ['--enable-source-maps', '--test', '--test-reporter=spec', '--test-concurrency=1', js], {
  stdio: 'inherit',
  cwd: root,
  env: { ...process.env, LLAMA_SERVER: opts['llama-server'], K3_GGUF: opts.gguf, ...(opts.tokenizer ? { K3_TOKENIZER: opts.tokenizer } : {}) },
});
process.exit(r.status ?? 1);
