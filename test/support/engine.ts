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

/** Token bytes of every ordinary id (not the 256 specials), for the healing reference. */
export function ordinaryTokenBytes(tok: { vocabSize: number; tokenBytes(id: number): Uint8Array }): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let id = 0; id < tok.vocabSize - 256; id++) out.push(tok.tokenBytes(id));
  return out;
}

/** The rule of token healing written out independently of the engine (docs/PROMPTS.md):
 * while bytes remain to be spelled, the allowed token with the largest logit (the lowest
 * id on ties), allowed meaning its bytes are a prefix of what remains or spell all of it
 * and go on; then plain greedy. One-token decode steps from the prompt. */
export function healedGreedy(ctx: NativeContext, prompt: readonly number[], heal: Uint8Array, tokens: readonly Uint8Array[], steps: number): number[] {
  const ids: number[] = [];
  let left = heal;
  let next = Int32Array.from(prompt);
  for (let s = 0; s < steps; s++) {
    const logits = ctx.decode(next, 1).logits;
    let best = -1;
    for (let id = 0; id < logits.length; id++) {
      if (left.length > 0) {
        const b = tokens[id];
        if (!b || b.length === 0) continue;
        const n = Math.min(b.length, left.length);
        let ok = true;
        for (let i = 0; i < n && ok; i++) ok = b[i] === left[i];
        if (!ok) continue;
      }
      if (best < 0 || logits[id] > logits[best]) best = id;
    }
    ids.push(best);
    if (left.length > 0) left = left.subarray(Math.min(left.length, tokens[best].length));
    next = Int32Array.of(best);
  }
  return ids;
}
