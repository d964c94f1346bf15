// block.ts - where a completion of several lines fits and where it ends (docs/PROMPTS.md,
// "Post-processing"). It fits at an empty line and after a line that opens a block (`{`,
// `(` or `[` at its end, `:` ending a Python header, `=>`, `then`/`do`). It ends where the
// block the cursor opened, or the one its empty line stands in, ends: at the first line
// indented below the block, or at the line that closes a bracket opened before the block,
// brackets counted outside strings and comments (Tabby's limitScopeByIndentation, with a
// bracket count of ours). A closing line (`}`, `end`) stays in the completion unless the
// document after the cursor already has it. It reads text only: postprocess.ts decides what
// is shown and when generation stops.
import { lineComment } from './layout';

export interface BlockContext {
  languageId: string;
  /** The cursor's line up to the cursor. */
  linePrefix: string;
  /** The document's lines after the cursor's line. */
  nextLines: readonly string[];
}

export interface BlockEnd {
  /** How many of the completion's lines (the first continues the cursor's line) stay. */
  keep: number;
  /** True when the block ended within the lines given: more text cannot add to it. */
  ended: boolean;
}

/** What the bracket count must skip in a language. */
interface Syntax {
  lineComment?: string;
  blockComment?: [string, string];
  /** Python's `"""` and `'''` strings, which run over lines. */
  tripleQuotes: boolean;
  /** Template literals (JS/TS) and raw strings (Go), which run over lines. */
  backtick: boolean;
  /** `'` delimits one character only (`'a'`, `'\n'`); elsewhere it is a lifetime or a label. */
  charQuote: boolean;
}

const BACKTICK = new Set(['javascript', 'typescript', 'javascriptreact', 'typescriptreact', 'vue', 'svelte', 'go']);
const CHAR_QUOTE = new Set(['rust', 'c', 'cpp', 'java', 'go', 'csharp', 'kotlin', 'scala', 'swift', 'dart', 'zig']);
const THEN_DO = new Set(['lua', 'ruby', 'shellscript', 'elixir', 'julia']);

function syntaxOf(languageId: string): Syntax {
  const line = lineComment(languageId);
  return {
    lineComment: line,
    // Languages that comment with `//` also have `/* */`; CSS has only those.
    blockComment: line === '//' || languageId === 'css' || languageId === 'scss' || languageId === 'less' ? ['/*', '*/'] : undefined,
    tripleQuotes: languageId === 'python',
    backtick: BACKTICK.has(languageId),
    charQuote: CHAR_QUOTE.has(languageId),
  };
}

interface LineScan {
  /** Bracket depth at the end of the line. */
  depth: number;
  /** The lowest depth within the line (below `depth` when it closes and reopens: `} else {`). */
  min: number;
  /** The line began inside a string or comment of several lines. */
  startsInside: boolean;
  /** Index just after the last character of code (not string, not comment); 0 if none. */
  codeEnd: number;
}

/** Counts brackets line by line, skipping strings and comments; carries what runs over lines. */
class BracketScanner {
  depth = 0;
  /** The delimiter that closes the string or comment open at the end of the last line. */
  private open: string | undefined;

  constructor(private readonly syntax: Syntax) {}

  line(text: string): LineScan {
    const s = this.syntax;
    const startsInside = this.open !== undefined;
    let min = this.depth;
    let codeEnd = 0;
    let i = 0;
    while (i < text.length) {
      if (this.open !== undefined) {
        const close = this.open;
        let j = i;
        // Strings honour backslash escapes; comments do not.
        while (j < text.length && !text.startsWith(close, j)) j += close !== '*/' && text[j] === '\\' ? 2 : 1;
        if (j >= text.length) break;
        i = j + close.length;
        this.open = undefined;
        continue;
      }
      const c = text[i];
      if (s.lineComment && text.startsWith(s.lineComment, i)) break;
      if (s.blockComment && text.startsWith(s.blockComment[0], i)) {
        this.open = s.blockComment[1];
        i += s.blockComment[0].length;
        continue;
      }
      if (s.tripleQuotes && (text.startsWith('"""', i) || text.startsWith("'''", i))) {
        this.open = text.slice(i, i + 3);
        i += 3;
        continue;
      }
      if (c === '`' && s.backtick) {
        this.open = '`';
        i++;
        continue;
      }
      if (c === "'" && s.charQuote) {
        const m = /^'(?:\\[^']{1,10}|[^\\'])'/.exec(text.slice(i, i + 14));
        i += m ? m[0].length : 1;
        continue;
      }
      if (c === '"' || c === "'") {
        // A plain string ends with its line, closed or not.
        let j = i + 1;
        while (j < text.length && text[j] !== c) j += text[j] === '\\' ? 2 : 1;
        i = Math.min(j + 1, text.length);
        continue;
      }
      if (c === '(' || c === '[' || c === '{') this.depth++;
      else if (c === ')' || c === ']' || c === '}') min = Math.min(min, --this.depth);
      if (c !== ' ' && c !== '\t') codeEnd = i + 1;
      i++;
    }
    return { depth: this.depth, min, startsInside, codeEnd };
  }
}

// A Python line that a `:` at its end makes a block header.
const PYTHON_HEADER = /^\s*(?:async\s+)?(?:def|class|if|elif|else|for|while|with|try|except|finally|match|case)\b/;
// Lines that go on with the statement whose block just ended (`} else {` is found by brackets).
const CONTINUATION = /^\s*(?:else|elif|except|finally|catch|elsif|rescue|ensure)\b/;
// Lines that close a block without a bracket, or with one.
const CLOSER = /^\s*(?:[)\]}]|end\b|fi\b|done\b|esac\b|until\b|<\/)/;
// What a dedented line still being written may grow into and stay in the block: the words
// of CONTINUATION and CLOSER.
const KEYWORDS = ['else', 'elif', 'except', 'finally', 'catch', 'elsif', 'rescue', 'ensure', 'end', 'fi', 'done', 'esac', 'until', '</'];

/** True when a partial line may still become a continuing or closing line. */
function mayContinue(line: string): boolean {
  const t = line.trimStart();
  return CONTINUATION.test(line) || CLOSER.test(line) || KEYWORDS.some((k) => k.startsWith(t));
}

function indentOf(line: string): number {
  return /^[ \t]*/.exec(line)![0].length;
}

/** What opens a block at the end of a line: a bracket, a Python header's `:`, an arrow, or
 * a `then`/`do` (whose block ends with a keyword). */
type Opener = 'bracket' | 'colon' | 'arrow' | 'keyword';

/** What `line` ends with, outside strings and comments, that opens a block (if anything). */
function openerAtEnd(languageId: string, line: string): Opener | undefined {
  const scan = new BracketScanner(syntaxOf(languageId)).line(line);
  const code = line.slice(0, scan.codeEnd);
  // A line that ends inside a string, or with one, opens nothing.
  if (!lineCommentFollows(languageId, line, scan.codeEnd)) return undefined;
  if (/[{([]$/.test(code)) return 'bracket';
  if (code.endsWith('=>')) return 'arrow';
  if (languageId === 'python' && code.endsWith(':') && PYTHON_HEADER.test(code)) return 'colon';
  return THEN_DO.has(languageId) && /\b(?:then|do)(?:\s*\|[^|]*\|)?$/.test(code) ? 'keyword' : undefined;
}

/** True when `line` ends, outside strings and comments, with what opens a block. */
export function opensBlock(languageId: string, line: string): boolean {
  return openerAtEnd(languageId, line) !== undefined;
}

/** True when what follows the code on `line` is only a line comment (the line's code is whole). */
function lineCommentFollows(languageId: string, line: string, codeEnd: number): boolean {
  const rest = line.slice(codeEnd).trim();
  const marker = lineComment(languageId);
  return rest === '' || (marker !== undefined && rest.startsWith(marker));
}

/** Auto mode: several lines fit at an empty line and after a line that opens a block. */
export function multilineFits(languageId: string, linePrefix: string): boolean {
  return linePrefix.trim() === '' || opensBlock(languageId, linePrefix);
}

/**
 * How many of `lines` (lines[0] continues the cursor's line; the first `complete` are ended
 * by a line break) stay inside the block, and whether it ended there. A dedented line
 * still being written that may become a closing or continuing line (`el`, `en`) is held
 * back without ending the block.
 */
export function blockEnd(lines: readonly string[], complete: number, ctx: BlockContext): BlockEnd {
  const scanner = new BracketScanner(syntaxOf(ctx.languageId));
  const first = ctx.linePrefix + lines[0];
  const emptyLine = ctx.linePrefix.trim() === '';
  const firstScan = scanner.line(first);
  // The block's lines are indented at least `limit`; a bracket closed below `refDepth` ends it.
  // At an empty line the block is the one the cursor stands in: the first line written sets
  // its indentation. After code, it is the block that line opens.
  const refDepth = emptyLine ? 0 : firstScan.depth;
  const opener = emptyLine ? undefined : openerAtEnd(ctx.languageId, ctx.linePrefix);
  if (opener !== undefined) {
    // The block the cursor's line opened may end on that line: its bracket closed there
    // (`{ return 1; }`), or a one-line body after `:` or `=>` (`def f(): return 1`).
    const prefixDepth = new BracketScanner(syntaxOf(ctx.languageId)).line(ctx.linePrefix).depth;
    const closed = firstScan.depth < prefixDepth;
    const oneLineBody = (opener === 'colon' || opener === 'arrow') && lines[0].trim() !== '' && firstScan.depth === prefixDepth;
    if (closed || oneLineBody) return { keep: 1, ended: complete >= 1 };
  }
  let refIndent: number | undefined = emptyLine ? (first.trim() !== '' ? indentOf(first) : undefined) : indentOf(first);
  let opened = !emptyLine && (firstScan.depth > 0 || opensBlock(ctx.languageId, first));
  let limit = refIndent === undefined ? 0 : refIndent + (opened ? 1 : 0);
  let judgedOpening = emptyLine || opened;
  const next = ctx.nextLines.find((l) => l.trim() !== '');

  // A closing line stays unless the document after the cursor has it already, or goes on
  // inside the block (then the closer the model wrote is not where the block ends).
  const keepsClosing = (line: string): boolean => {
    if (next === undefined) return true;
    const a = line.trim();
    const b = next.trim();
    if (a.startsWith(b) || b.startsWith(a)) return false;
    return indentOf(next) < limit;
  };

  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const ended = i < complete;
    const scan = scanner.line(line);
    if (line.trim() === '' || scan.startsInside) continue;
    const indent = indentOf(line);
    if (refIndent === undefined) {
      refIndent = indent;
      limit = indent;
      continue;
    }
    if (!judgedOpening) {
      // Code that opens a block the language does not mark (`x = \`, a YAML key): the first
      // line below it being indented deeper says so.
      judgedOpening = true;
      if (indent > refIndent) {
        opened = true;
        limit = refIndent + 1;
      }
    }
    if (scan.depth < refDepth) return { keep: keepsClosing(line) ? i + 1 : i, ended };
    if (indent >= limit || scan.min < refDepth) continue;
    // A dedented line still being written ends the block at once unless it may still
    // become `else:` or `end` (then it waits): more of it is not in the block.
    if (!ended) return { keep: i, ended: !mayContinue(line) };
    if (CONTINUATION.test(line) && lines[i - 1].trim() !== '') continue;
    if (CLOSER.test(line)) return { keep: keepsClosing(line) ? i + 1 : i, ended: true };
    return { keep: i, ended: true };
  }
  return { keep: lines.length, ended: false };
}
