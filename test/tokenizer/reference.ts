// reference.ts - an independent K3 tokenizer to check the engine's against: js-tiktoken
// (a JavaScript port of tiktoken) configured with the checkpoint's ranks, its split pattern
// translated for JavaScript (pattern.ts) and its 256 special slots, wrapped in the
// release's own cuts of long inputs (tokenization_kimi.py: 400,000-character chunks, runs
// of more than 25,000 whitespace or non-whitespace characters cut). Test and benchmark
// code only; nothing ships.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Tiktoken as TiktokenClass } from 'js-tiktoken/lite' with { 'resolution-mode': 'require' };
import { translatePattern } from './pattern';

// js-tiktoken is an ES module with a CommonJS build; tests are CommonJS, so require it.
const { Tiktoken } = require('js-tiktoken/lite') as { Tiktoken: typeof TiktokenClass };

export const MAX_ENCODE_CHARS = 400_000;
export const MAX_RUN_CHARS = 25_000;

/** Python's str.isspace(): White_Space plus the information separators U+001C..U+001F. */
const PY_SPACE = /^[\p{White_Space}\x1c-\x1f]$/u;

/**
 * The release's cuts of text (TikTokenTokenizer.encode before tiktoken sees it): chunks of
 * 400,000 code points, each cut again wherever a run of whitespace or non-whitespace would
 * exceed 25,000 code points (_split_whitespaces_or_nonwhitespaces).
 */
export function releaseCuts(text: string, maxRun = MAX_RUN_CHARS, maxChars = MAX_ENCODE_CHARS): string[] {
  if (text === '') return []; // no chunk at all, as range(0, 0, n) in the release
  if (text.length <= Math.min(maxRun, maxChars)) return [text]; // UTF-16 units >= code points
  const cuts: string[] = [];
  const chars = Array.from(text);
  for (let c = 0; c < chars.length; c += maxChars) {
    const chunk = chars.slice(c, c + maxChars);
    let runLen = 0;
    let inSpace = PY_SPACE.test(chunk[0] ?? '');
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const space = PY_SPACE.test(chunk[i]!);
      if (space !== inSpace) {
        runLen = 1;
        inSpace = space;
      } else if (++runLen > maxRun) {
        cuts.push(chunk.slice(start, i).join(''));
        start = i;
        runLen = 1;
      }
    }
    cuts.push(chunk.slice(start).join(''));
  }
  return cuts;
}

export interface ReferenceTokenizer {
  /** The release's TikTokenTokenizer.encode(text, allow_special_tokens=allowSpecial). */
  encode(text: string, allowSpecial: boolean): number[];
  /** The special-token table: name -> id. */
  readonly specials: Record<string, number>;
}

/** Loads the reference from a tokenizer directory (tiktoken.model, tokenizer_config.json)
 * and the verbatim split pattern. */
export function loadReference(dir: string, patStr: string): ReferenceTokenizer {
  const lines = fs.readFileSync(path.join(dir, 'tiktoken.model'), 'utf8').split('\n').filter(Boolean);
  // js-tiktoken's rank format: "<ignored> <first rank> <base64> <base64> ..." per line.
  const bpeRanks = `! 0 ${lines.map((l) => l.split(' ')[0]).join(' ')}`;
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')) as {
    added_tokens_decoder: Record<string, { content: string }>;
  };
  const specials: Record<string, number> = {};
  for (let id = lines.length; id < lines.length + 256; id++) {
    specials[config.added_tokens_decoder[String(id)]?.content ?? `<|reserved_token_${id}|>`] = id;
  }
  const tiktoken = new Tiktoken({ pat_str: translatePattern(patStr, 'u'), special_tokens: specials, bpe_ranks: bpeRanks });
  return {
    specials,
    encode(text, allowSpecial) {
      return releaseCuts(text).flatMap((cut) => tiktoken.encode(cut, allowSpecial ? 'all' : [], []));
    },
  };
}
