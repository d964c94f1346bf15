// esbuild-common.mjs - the one place that knows how TypeScript becomes runnable
// JavaScript here: the three product bundles, test files and developer scripts.
import * as esbuild from 'esbuild';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const nodeDefaults = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: 'linked',
  logLevel: 'warning',
};

/** The shipped bundles: extension host (cjs, `vscode` external), server (node), webview (browser). */
export async function buildProduct({ minify = false } = {}) {
  await Promise.all([
    esbuild.build({
      ...nodeDefaults,
      entryPoints: [path.join(root, 'extension/main.ts')],
      outfile: path.join(root, 'dist/extension.js'),
      external: ['vscode'],
      minify,
    }),
    esbuild.build({
      ...nodeDefaults,
      entryPoints: [path.join(root, 'server/main.ts')],
      outfile: path.join(root, 'dist/server.js'),
      minify,
    }),
    esbuild.build({
      bundle: true,
      platform: 'browser',
      target: 'es2022',
      format: 'iife',
      sourcemap: 'linked',
      logLevel: 'warning',
      entryPoints: [path.join(root, 'webview/main.ts'), path.join(root, 'webview/main.css')],
      outdir: path.join(root, 'dist/webview'),
      minify,
    }),
  ]);
}

/** Node-side TypeScript (tests, tools) bundled one entry per file, packages left to node_modules. */
export async function buildNodeScripts(entryPoints, outbase, outdir) {
  await esbuild.build({
    ...nodeDefaults,
    sourcemap: 'inline',
    packages: 'external',
    entryPoints,
    outbase,
    outdir,
  });
}
