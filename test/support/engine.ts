// engine.ts - the native engine for tests: the addon built into dist/ (the same file the
// server loads), typed through the server's facade, and the CLI binaries (plain and
// AddressSanitizer builds).
import * as path from 'node:path';
import type { NativeAddon, NativeContext } from '../../server/engine/addon';
import { addonFile, repoRoot } from './paths';

export const engine = require(addonFile) as NativeAddon;

export const k3Binaries = {
  plain: path.join(repoRoot, 'native/build/k3'),
  asan: path.join(repoRoot, 'native/build/k3-asan'),
};

/** Greedy continuation: decode the prompt, then one token per step; returns the new ids
 * and a copy of each step's logits. */
export function greedyIncremental(ctx: NativeContext, prompt: readonly number[], steps: number) {
  const ids: number[] = [];
  const logits: Float32Array[] = [];
  let next = Int32Array.from(prompt);
  for (let s = 0; s < steps; s++) {
    const step = ctx.decode(next, 1).logits;
    logits.push(step);
    let best = 0;
    for (let i = 1; i < step.length; i++) if (step[i] > step[best]) best = i;
    ids.push(best);
    next = Int32Array.of(best);
  }
  return { ids, logits };
}

/** True when two float arrays hold the same bits. */
export function bitIdentical(a: Float32Array, b: Float32Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}
