// postprocess.ts - what of the model's continuation becomes ghost text (docs/PROMPTS.md,
// "Post-processing"). A pure function of the text generated so far and what surrounds the
// cursor; it also says when more tokens cannot change the answer, so generation stops
// there. Where a block of several lines fits and ends is block.ts; the junk filter
// (filters.ts) runs on the lines it keeps. It never re-indents: lines keep the indentation
// the model gave them.
import type { MultilineMode } from '../../protocol/lsp';
import { blockEnd, multilineFits } from './block';
import { type FilterContext, type FilterNote, filterJunk } from './filters';

export interface PostprocessInput extends FilterContext {
  /** The cursor's line up to the cursor. */
  linePrefix: string;
  /** The cursor's line after the cursor. */
  lineSuffix: string;
  /** The document's lines after the cursor's line. */
  nextLines: readonly string[];
  /** The document's language id (what opens a block, how comments look). */
  languageId: string;
  multiline: MultilineMode;
  /** Most lines a multi-line completion shows (the cursor's line counts when it gets text). */
  maxLines: number;
}

export interface PostprocessResult {
  /** The completion to show ('' for none). */
  text: string;
  /** True when more generated text cannot change `text`: stop generating. */
  final: boolean;
  /** What the junk filter did, when it acted. */
  note?: FilterNote;
}

/** The first line after the cursor's that is not blank, trimmed ('' if none). */
function nextContentLine(next: readonly string[]): string {
  for (const l of next) if (l.trim() !== '') return l.trim();
  return '';
}

function finish(shaped: string[], shapedFinal: boolean, input: PostprocessInput): PostprocessResult {
  const filtered = filterJunk(shaped, input);
  const note = filtered.note;
  // Junk ends generation: more tokens of a loop are more of the loop.
  const final = shapedFinal || note !== undefined;
  const lines = filtered.lines.length ? filtered.lines : [''];
  const text = lines.join('\n').replace(/\s+$/, '');
  const noted = note ? { note } : {};
  if (text.trim() === '') return { text: '', final, ...noted };
  // A completion that only retypes the line below is no completion.
  const next = nextContentLine(input.nextLines);
  const firstContent = lines.find((l) => l.trim() !== '') ?? '';
  const completedLine = lines[0].trim() === '' ? firstContent.trim() : (input.linePrefix + lines[0]).trim();
  if (input.lineSuffix.trim() === '' && next !== '' && completedLine === next && lines.filter((l) => l.trim() !== '').length === 1) {
    return { text: '', final, ...noted };
  }
  return { text, final, ...noted };
}

/**
 * Rules, in order:
 * - Text after the cursor on its line (a suffix): one line only; a copy of the suffix at the
 *   end of that line is dropped.
 * - One line (mode `never`, or `auto` inside a line): the rest of the cursor's line; when the
 *   model ends the line at once and nothing follows the cursor, the next line instead (a
 *   line break plus that line).
 * - Several lines (mode `always`, or `auto` at an empty line or after a block opener): up to
 *   the end of the block (block.ts), at most maxLines lines, stopping before a line that
 *   repeats the next non-blank line of the document.
 * - Trailing whitespace goes; a completion that is blank, or that only retypes the line
 *   below, is dropped.
 */
export function postprocess(raw: string, input: PostprocessInput): PostprocessResult {
  const lines = raw.split(/\r?\n/);
  const complete = lines.length - 1; // lines ended by a line break
  const suffix = input.lineSuffix.trim();

  if (suffix !== '' && input.multiline !== 'never' && closesOpenerAtCursor(input.linePrefix, suffix)) {
    // `{|}` (VS Code closed the `{`): a body that starts on a new line goes between the two,
    // and the closer after the cursor ends the block. A first line with code is one line.
    if (complete === 0 && lines[0].trim() === '') return { text: '', final: false };
    if (lines[0].trim() === '') return blockBetween(lines, complete, input);
  }

  if (suffix !== '') {
    let line = lines[0];
    const final = complete >= 1;
    if (final) {
      const trimmed = line.replace(/\s+$/, '');
      if (trimmed.endsWith(suffix)) line = trimmed.slice(0, trimmed.length - suffix.length);
    }
    return finish([line], final, input);
  }

  const several = input.multiline === 'always' || (input.multiline === 'auto' && multilineFits(input.languageId, input.linePrefix));
  if (!several) {
    if (complete === 0) return finish([lines[0]], false, input);
    if (lines[0].trim() !== '') return finish([lines[0]], true, input);
    // The model ended the cursor's line without adding to it: offer the next line.
    return finish(['', lines[1]], complete >= 2, input);
  }

  return severalLines(lines, complete, input);
}

/** Up to the end of the block (block.ts), at most maxLines lines, stopping before a copy of
 * the next non-blank line of the document. */
function severalLines(lines: string[], complete: number, input: PostprocessInput): PostprocessResult {
  // `filter: false` (measurements, a random-weight model's raw output) keeps every line.
  const block = input.filter === false ? { keep: lines.length, ended: false } : blockEnd(lines, complete, input);
  const next = nextContentLine(input.nextLines);
  // An empty rest of the cursor's line is not a line the user sees.
  const maxKept = input.maxLines + (lines[0].trim() === '' ? 1 : 0);
  const kept: string[] = [];
  for (let i = 0; i < block.keep; i++) {
    const ended = i < complete;
    if (i > 0 && next !== '' && lines[i].trim() === next && ended) return finish(kept, true, input);
    if (i > 0 && next !== '' && !ended && next.startsWith(lines[i].trim()) && lines[i].trim() !== '') {
      // Might still become a copy of the next line: wait.
      return finish(kept, false, input);
    }
    kept.push(lines[i]);
    if (kept.length >= maxKept && ended) return finish(kept, true, input);
  }
  return finish(kept, block.ended, input);
}

const PAIRS: Record<string, string> = { '{': '}', '(': ')', '[': ']' };

/** True when the cursor stands between an opener and its closer: the line before it ends
 * with `{`, `(` or `[`, and the text after it is that closer and only closers, `;` or `,`. */
function closesOpenerAtCursor(linePrefix: string, suffix: string): boolean {
  const opener = linePrefix.trimEnd().slice(-1);
  return PAIRS[opener] !== undefined && suffix.startsWith(PAIRS[opener]) && /^[)\]}]+[;,]*$/.test(suffix);
}

/** A block between an opener and the closer after the cursor: shaped as several lines with
 * the text after the cursor as the next line (so the model's own closing line is a copy and
 * goes), then a line break and the opener line's indentation, which put that closer on its
 * own line below the block. */
function blockBetween(lines: string[], complete: number, input: PostprocessInput): PostprocessResult {
  const inner: PostprocessInput = { ...input, lineSuffix: '', nextLines: [input.lineSuffix, ...input.nextLines] };
  const result = severalLines(lines, complete, inner);
  if (result.text === '') return result;
  const indent = /^[ \t]*/.exec(input.linePrefix)![0];
  return { ...result, text: `${result.text}\n${indent}` };
}
