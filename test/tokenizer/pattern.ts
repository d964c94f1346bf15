// pattern.ts - translates the checkpoint's split pattern (pat_str, written for Rust's
// fancy-regex) into JavaScript regular-expression source with the same meaning, so
// js-tiktoken can serve as the independent reference for the C tokenizer. It handles what
// the K3 pattern uses and refuses anything else rather than guess:
//   \p{Han}            a script name alone: JavaScript wants \p{Script=Han}
//   \s, \S             Unicode White_Space in Rust; JavaScript's \s differs (it adds U+FEFF
//                      and lacks U+0085), so they become \p{White_Space}, \P{White_Space}
//   [A&&[^B]]          class intersection: [[A]&&[^B]] with the `v` flag, or
//                      (?:(?=[^B])[A]) with the `u` flag (js-tiktoken compiles with "ug")
//   (?i:'s|'t|...)     scoped case-insensitivity, which Node 20 lacks: each ASCII letter
//                      becomes a class of every character that matches it case-insensitively
//                      under Unicode simple case folding (so 's' also matches U+017F)
export type PatternFlags = 'u' | 'v';

const GENERAL_CATEGORIES = new Set(
  'L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn'.split(' '),
);

let foldCache: Map<string, string[]> | undefined;

/** Every character a case-insensitive (`iu`) match of the ASCII letter accepts. */
export function caseVariants(letter: string): string[] {
  if (!foldCache) {
    foldCache = new Map();
    const anyLetter = /[a-z]/iu;
    for (let cp = 0; cp < 0x110000; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      if (!anyLetter.test(ch)) continue;
      for (let a = 0x61; a <= 0x7a; a++) {
        const l = String.fromCharCode(a);
        if (new RegExp(`^${l}$`, 'iu').test(ch)) foldCache.set(l, [...(foldCache.get(l) ?? []), ch]);
      }
    }
  }
  return foldCache.get(letter.toLowerCase()) ?? [letter];
}

function fail(pat: string, at: number, what: string): never {
  throw new Error(`pattern: ${what} at offset ${at}: ${pat.slice(at, at + 24)}`);
}

/** One escape at pat[i] (a backslash); returns its translation and the index after it. */
function escape(pat: string, i: number): [string, number] {
  const c = pat[i + 1];
  if (c === 'p' || c === 'P') {
    const m = /^\{([A-Za-z_=]+)\}/.exec(pat.slice(i + 2));
    if (!m) fail(pat, i, 'malformed property escape');
    const name = m[1]!;
    const js = name.includes('=') || GENERAL_CATEGORIES.has(name) ? name : `Script=${name}`;
    return [`\\${c}{${js}}`, i + 2 + m[0].length];
  }
  if (c === 's') return ['\\p{White_Space}', i + 2];
  if (c === 'S') return ['\\P{White_Space}', i + 2];
  if (c !== undefined && 'rnt\\^$.|?*+()[]{}-/'.includes(c)) return [`\\${c}`, i + 2];
  return fail(pat, i, 'unsupported escape');
}

/** A class starting at pat[i] ('['); returns the JS source and the index after its ']'. */
function charClass(pat: string, i: number, flags: PatternFlags): [string, number] {
  let j = i + 1;
  let body = '';
  let negated = false;
  if (pat[j] === '^') {
    negated = true;
    j++;
  }
  while (j < pat.length && pat[j] !== ']') {
    if (pat[j] === '\\') {
      const [s, k] = escape(pat, j);
      body += s;
      j = k;
    } else if (pat.startsWith('&&', j)) {
      if (negated) fail(pat, j, 'intersection in a negated class');
      if (pat[j + 2] !== '[') fail(pat, j, 'intersection with something other than a class');
      const [right, k] = charClass(pat, j + 2, flags);
      if (pat[k] !== ']') fail(pat, k, 'intersection that is not the end of its class');
      const src = flags === 'v' ? `[[${body}]&&${right}]` : `(?:(?=${right})[${body}])`;
      return [src, k + 1];
    } else if (pat[j] === '[') {
      fail(pat, j, 'nested class outside an intersection');
    } else {
      body += pat[j];
      j++;
    }
  }
  if (pat[j] !== ']') fail(pat, i, 'unterminated class');
  return [`[${negated ? '^' : ''}${body}]`, j + 1];
}

/** A (?i: ... ) group starting at pat[i]: letters become classes of their case variants. */
function caseless(pat: string, i: number): [string, number] {
  let j = i + 4;
  let out = '(?:';
  while (j < pat.length && pat[j] !== ')') {
    const c = pat[j]!;
    if (/[A-Za-z]/.test(c)) out += `[${caseVariants(c).join('')}]`;
    else if (c === "'" || c === '|') out += c;
    else fail(pat, j, 'unsupported character in a (?i:) group');
    j++;
  }
  if (pat[j] !== ')') fail(pat, i, 'unterminated (?i:) group');
  return [out + ')', j + 1];
}

/** JavaScript regular-expression source equivalent to pat under the given flag. */
export function translatePattern(pat: string, flags: PatternFlags): string {
  let out = '';
  for (let i = 0; i < pat.length; ) {
    const c = pat[i]!;
    if (c === '\\') {
      const [s, k] = escape(pat, i);
      out += s;
      i = k;
    } else if (c === '[') {
      const [s, k] = charClass(pat, i, flags);
      out += s;
      i = k;
    } else if (pat.startsWith('(?i:', i)) {
      const [s, k] = caseless(pat, i);
      out += s;
      i = k;
    } else if (pat.startsWith('(?', i) && !pat.startsWith('(?!', i) && !pat.startsWith('(?=', i) && !pat.startsWith('(?:', i)) {
      fail(pat, i, 'unsupported group');
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The pattern as a global RegExp, ready for matchAll. */
export function patternRegExp(pat: string, flags: PatternFlags): RegExp {
  return new RegExp(translatePattern(pat, flags), flags + 'g');
}
