// filters.ts - the junk filter of ghost text (docs/PROMPTS.md, "Junk filter"): rules that
// recognise text no developer would accept, each named so the log can say which one acted
// and why. A rule either cuts the completion at the last good point or drops it; either
// way generation stops there, since more tokens of a loop are more of the loop. Rules
// follow Tabby's and Continue's post-processing (shared/docs/token-healing.md, §3) with
// one addition of ours: a cap on line length drawn from the file itself. It does not
// shape lines (postprocess.ts) or compute ranges (range.ts).

export type FilterRule = 'line-loop' | 'repeated-lines' | 'repeats-line-above' | 'long-line' | 'non-code';

export interface FilterNote {
  rule: FilterRule;
  /** `cut`: the completion was shortened to what came before; `dropped`: nothing is shown. */
  action: 'cut' | 'dropped';
  /** Why, with the numbers. */
  detail: string;
}

export interface FilterContext {
  /** The cursor's line up to the cursor. */
  linePrefix: string;
  /** The last non-blank line above the cursor's line ('' if none). */
  lineAbove: string;
  /** The longest line a completed line may be (see maxLineLength()). */
  maxLineLength: number;
  /** True when the file around the cursor is (nearly) all ASCII. */
  asciiFile: boolean;
  /** false: no rule applies (measurements and tests of raw output); default true. */
  filter?: boolean;
}

export interface FilterResult {
  /** The lines that stand (possibly none). */
  lines: string[];
  note?: FilterNote;
}

/** A completed line may be as long as the file's own longest nearby line, and at least
 * LONG_LINE_FLOOR: lines of 200 characters in a file whose lines stay under 100 are what
 * a small model writes when it has lost its way. */
export const LONG_LINE_FLOOR = 120;

export function maxLineLength(fileLines: readonly string[]): number {
  let longest = 0;
  for (const l of fileLines) longest = Math.max(longest, l.length);
  return Math.max(LONG_LINE_FLOOR, longest);
}

/** Share of characters outside ASCII in a text. */
export function nonAsciiShare(text: string): number {
  if (text.length === 0) return 0;
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7e) n++;
  return n / text.length;
}

// A unit of at least 3 characters repeated 6 times, or of at least 10 repeated 4 times
// (Tabby's removeLineEndsWithRepetition, found anywhere in the line, not only at its end,
// since ours may still be growing).
const SHORT_LOOP = /(.{3,}?)\1{5,}/;
const LONG_LOOP = /(.{10,}?)\1{3,}/;
// Continue's stopAtRepeatingLines: this many identical consecutive lines; and, ours, the
// same for a block of up to MAX_BLOCK_LINES lines (a doc comment's `text` / `///` pair
// repeated is the loop a small model falls into when it writes prose).
const REPEATED_LINES = 3;
const MAX_BLOCK_LINES = 4;
// A copy of the line above counts only when it says something (not `}` or `break;`).
const LINE_ABOVE_MIN_CHARS = 10;
// Non-code: mostly characters the file does not use.
const NON_ASCII_MIN_SHARE = 0.3;
const NON_ASCII_MIN_CHARS = 8;

// A number whose fraction repeats one digit other than 0 seven times (`0.5777777777`): what a
// model that lost its way writes, where a developer writes `0.58` (trailing zeros pad).
const NUMERIC_LOOP = /(\d\.\d*?)([1-9])\2{6,}/;

/** The start of the first repetition loop in a line, or -1. A unit of one repeated
 * character (`-----`, `0000`, spaces) is a rule or a literal, not a loop, except a digit
 * repeating in a number's fraction (NUMERIC_LOOP), where the loop starts at the repeat. */
export function loopStart(line: string): number {
  let best = -1;
  const numeric = NUMERIC_LOOP.exec(line);
  if (numeric) best = numeric.index + numeric[1].length;
  for (const re of [SHORT_LOOP, LONG_LOOP]) {
    const m = re.exec(line);
    if (!m) continue;
    const unit = m[1];
    if (unit.trim() === '' || [...unit].every((c) => c === unit[0])) continue;
    if (best < 0 || m.index < best) best = m.index;
  }
  return best;
}

function hasControlOrReplacement(text: string): boolean {
  // U+FFFD is a byte sequence that was not UTF-8; C0 controls other than tab never occur
  // in source text.
  return /[\u0000-\u0008\u000b-\u001f\u007f\ufffd]/.test(text);
}

/** The first block of 1 to MAX_BLOCK_LINES lines that follows itself REPEATED_LINES times
 * in a row, or undefined. A block of one line must not be blank; a longer one must hold a
 * line that says something (LINE_ABOVE_MIN_CHARS), so closing braces and blank lines in
 * turn are not a loop. */
function repeatedBlock(whole: readonly string[]): { start: number; size: number } | undefined {
  for (let i = 0; i < whole.length; i++) {
    for (let size = 1; size <= MAX_BLOCK_LINES && i + size * REPEATED_LINES <= whole.length; size++) {
      const unit = whole.slice(i, i + size);
      const says = size === 1 ? unit[0] !== '' : unit.some((l) => l.replace(/\s/g, '').length >= LINE_ABOVE_MIN_CHARS);
      if (!says) continue;
      let repeats = true;
      for (let k = size; k < size * REPEATED_LINES && repeats; k++) repeats = whole[i + k] === unit[k % size];
      if (repeats) return { start: i, size };
    }
  }
  return undefined;
}

/** What is left before a rule's cut: the kept lines, or nothing when they are blank. */
function shortened(kept: string[], rule: FilterRule, detail: string): FilterResult {
  const empty = kept.every((l) => l.trim() === '');
  return { lines: empty ? [] : kept, note: { rule, action: empty ? 'dropped' : 'cut', detail } };
}

/** Applies the rules in order to the completion's lines (lines[0] continues the cursor's
 * line); the first that acts decides. */
export function filterJunk(lines: readonly string[], ctx: FilterContext): FilterResult {
  if (ctx.filter === false) return { lines: [...lines] };
  const text = lines.join('\n');
  if (hasControlOrReplacement(text)) {
    return { lines: [], note: { rule: 'non-code', action: 'dropped', detail: 'a control character or invalid UTF-8' } };
  }
  const share = nonAsciiShare(text);
  const nonAscii = Math.round(share * text.length);
  if (ctx.asciiFile && share >= NON_ASCII_MIN_SHARE && nonAscii >= NON_ASCII_MIN_CHARS) {
    return {
      lines: [],
      note: { rule: 'non-code', action: 'dropped', detail: `${nonAscii} of ${text.length} characters outside ASCII in an ASCII file` },
    };
  }

  for (let i = 0; i < lines.length; i++) {
    const at = loopStart(lines[i]);
    if (at < 0) continue;
    const kept = [...lines.slice(0, i), lines[i].slice(0, at).replace(/\s+$/, '')];
    return shortened(kept, 'line-loop', `line ${i + 1} repeats ${JSON.stringify(lines[i].slice(at, at + 24))}… from column ${at + 1}`);
  }

  for (let i = 0; i < lines.length; i++) {
    const length = (i === 0 ? ctx.linePrefix.length : 0) + lines[i].length;
    if (length <= ctx.maxLineLength) continue;
    return shortened(lines.slice(0, i), 'long-line', `line ${i + 1} would be ${length} characters, over the ${ctx.maxLineLength} this file allows`);
  }

  // Whole lines: the first one completes the cursor's line.
  const whole = lines.map((l, i) => (i === 0 ? ctx.linePrefix + l : l).trim());
  const block = repeatedBlock(whole);
  if (block) {
    const { start, size } = block;
    const what = size === 1 ? `line ${start + 1}` : `lines ${start + 1}-${start + size}`;
    return {
      lines: lines.slice(0, start + size),
      note: {
        rule: 'repeated-lines',
        action: 'cut',
        detail: `${what} repeat${size === 1 ? 's' : ''} ${REPEATED_LINES} times: ${JSON.stringify(whole[start].slice(0, 40))}`,
      },
    };
  }

  const first = whole[0];
  if (lines.length === 1 && first.replace(/\s/g, '').length >= LINE_ABOVE_MIN_CHARS && first === ctx.lineAbove.trim()) {
    return {
      lines: [],
      note: { rule: 'repeats-line-above', action: 'dropped', detail: `the completed line equals the line above: ${JSON.stringify(first.slice(0, 40))}` },
    };
  }
  return { lines: [...lines] };
}
