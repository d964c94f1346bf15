// paths.ts - where things are, for tests: the repository root (found from the compiled
// test file's location, so it works from out/test/**) and the build outputs under it.
import * as fs from 'node:fs';
import * as path from 'node:path';

function findRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, 'utf8')).name === 'k3-code') return dir;
    if (path.dirname(dir) === dir) throw new Error(`no k3-code package.json above ${start}`);
  }
}

export const repoRoot = findRoot(__dirname);
export const distDir = path.join(repoRoot, 'dist');
export const serverBundle = path.join(distDir, 'server.js');
export const addonFile = path.join(distDir, 'k3.node');
export const k3Cli = path.join(repoRoot, 'native/build/k3');
