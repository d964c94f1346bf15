// corpus.ts - texts for comparing the engine's tokenizer with the reference: generated
// strings that reach every alternative of the split pattern in many scripts (seeded, so
// runs repeat), random code points from the whole Unicode range, and real source files.
import * as fs from 'node:fs';
import * as path from 'node:path';

/** A small seeded generator (mulberry32): the same seed gives the same texts. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FRAGMENTS: readonly string[] = [
  // source code in many languages
  'def f(x):\n    return x ** 2\n', 'class Foo(Bar):\n\tpass', 'import numpy as np', 'if __name__ == "__main__":',
  '#include <stdio.h>', 'int main(void) { return 0; }', 'for (int i = 0; i < n; ++i)', 'ptr->next = NULL;',
  'fn main() { println!("{}", x); }', "impl<'a> Iterator for Foo<'a>", 'let mut v: Vec<u8> = vec![];',
  'func (s *Server) Serve() error {', 'package main', 'public static void main(String[] args) {',
  'const x = async () => await fetch(url);', 'export default function App() {', '<div className="app">',
  'interface Foo<T extends object> { bar?: T[] }', 'SELECT * FROM t WHERE id = 42;', 'echo "$HOME" | grep -v ^#',
  'puts "hello" if x.nil?', '$arr = array(1, 2, 3);', 'main :: IO ()', '(defun sq (x) (* x x))',
  'body { margin: 0 auto; }', '{"key": [1, 2.5, null, true]}', 'key: value\n  - item', '## Heading\n\n- list',
  '\\begin{equation} \\alpha^2 \\end{equation}', 'mov eax, [ebp+8]', '@@ -10,7 +10,8 @@', '// TODO: fix',
  '/* comment */', '"""docstring"""', "r'^\\d+$'", '0xDEADBEEF', '1e-10', '3.14159', '1_000_000',
  // CJK and other scripts
  '你好，世界！', '漢字かな交じり文', 'こんにちは世界', 'カタカナ', '안녕하세요 세계', '中文abc中文', '１２３',
  '𠀀𠀁𪚥', '〇一二三', '⺀⻳', '\u3000', '「引用」', 'Привет, мир', 'Ελληνικά', 'مرحبا بالعالم', 'שָׁלוֹם',
  'नमस्ते दुनिया', 'สวัสดีครับ', 'Tiếng Việt', 'İstanbul', 'straße', 'ǅǈǋ', 'ʰʲʷ', 'ﬁﬂ', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '١٢٣٤', 'Ⅻ', '½', '²³', 'ꙮ',
  // emoji and combining marks
  '😀', '👩‍💻', '👨‍👩‍👧‍👦', '🇯🇵🇺🇸', '👍🏽', '1️⃣', '❤️', 'e\u0301', 'a\u0308\u0323', '\u0301abc',
  '\u20dd', 'Z\u0351\u0352\u0353',
  // contractions in every case, and near misses
  "I'm", "you're", "THEY'LL", "we'Ve", "it'S", "don'\u017f", "rock'n'roll", "'s", "''", '\u2019s', "O'Neil",
  "x'D", "'RE", "'lL",
  // numbers
  '1234567', '42', '7', '00', '-1', '+2',
  // whitespace of every kind
  ' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u2003', '\u0085', '\u2028', '\u2029', '\ufeff', '\x1c',
  '\x1f', '\v', '\f', '\n\n\n', ' \t \n', '\t\t\t', '    ',
  // special-token spellings, real and not
  '<|open|>', '<|close|>', '<|sep|>', '<|end_of_msg|>', '[EOS]', '[BOS]', '[PAD]', '<|reserved_token_163700|>',
  '<|reserved_token_163839|>', '<|im_start|>', '<|open', '[BOS', '<||>', '<osagent_mode>',
  // punctuation and control characters
  '...', '!!!', '->', '=>', '::', '{{', '}}', '#', '@', '$$', '%%', '^_^', '~~', '`', '\x00', '\x07',
  '\x1b[31m', '\\', '"', "'",
  // lone surrogates (not UTF-8: the engine sees U+FFFD, as js-tiktoken does)
  '\ud800', '\udfff', 'a\ud83d',
];

/** `count` generated texts of 1..40 fragments, with whitespace runs of up to `maxRun`
 * characters now and then. (js-tiktoken's merge loop is quadratic in a piece's length, so
 * long runs cost the reference far more than the engine.) */
export function generatedTexts(count: number, seed = 1, maxRun = 64): string[] {
  const r = rng(seed);
  const out: string[] = [];
  const run = () => 1 + Math.floor(r() * maxRun);
  for (let i = 0; i < count; i++) {
    const parts: string[] = [];
    const n = 1 + Math.floor(r() * 40);
    for (let k = 0; k < n; k++) {
      const x = r();
      if (x < 0.01) parts.push(' '.repeat(run()));
      else if (x < 0.015) parts.push('\n'.repeat(run()));
      else if (x < 0.02) parts.push(' \t'.repeat(run() >> 1));
      else if (x < 0.025) parts.push('\r\n    '.repeat(run() >> 3));
      else parts.push(FRAGMENTS[Math.floor(r() * FRAGMENTS.length)]!);
      if (r() < 0.3) parts.push(' ');
    }
    out.push(parts.join(''));
  }
  return out;
}

/** `count` texts of 1..24 code points drawn from all of Unicode (no surrogates), biased
 * towards the assigned planes. */
export function randomCodePointTexts(count: number, seed = 2): string[] {
  const r = rng(seed);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let s = '';
    const n = 1 + Math.floor(r() * 24);
    for (let k = 0; k < n; k++) {
      const x = r();
      let cp = x < 0.5 ? Math.floor(r() * 0x10000) : x < 0.8 ? 0x10000 + Math.floor(r() * 0x20000) : Math.floor(r() * 0x110000);
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x20;
      s += String.fromCodePoint(cp);
    }
    out.push(s);
  }
  return out;
}

/** Every .ts and .js file under dir (recursively), sorted. */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|js|mjs|cjs)$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** True when s holds an unpaired surrogate (so it is not valid UTF-16 and has no exact
 * UTF-8 form). */
export function hasLoneSurrogate(s: string): boolean {
  return /[\ud800-\udfff]/u.test(s);
}
