// range.ts - bracket- and quote-aware replace ranges (docs/PROMPTS.md, "Closers after the
// cursor"). With auto-closing on, `items.findIndex((item) => |)` has a `)` after the
// cursor that the model writes again (`0);`): inserting the completion would leave two.
// When the rest of the line is only closers, quotes, `;` and `,`, the completion's own
// closers of brackets and strings opened before the cursor are matched, in order, against
// that rest; what they re-emit is replaced rather than duplicated, and what they do not
// is kept after the completion. The user's characters are never lost: the rest of the line
// is always a subsequence of what replaces it. It does not filter or shape text.

const OPENERS: Record<string, string> = { '(': ')', '[': ']', '{': '}' };
const CLOSERS: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
const QUOTES = new Set(['"', "'", '`']);
/** A line suffix this module handles: closers, quotes and separators only, no spaces. */
const CLOSERS_ONLY = /^[)\]}"'`;,]+$/;

/** Openers left open at the end of a line, innermost last; an open string's quote is last. */
export function openAtEnd(line: string): string[] {
  const stack: string[] = [];
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = null;
    } else if (QUOTES.has(ch)) quote = ch;
    else if (OPENERS[ch]) stack.push(ch);
    else if (CLOSERS[ch] && stack[stack.length - 1] === CLOSERS[ch]) stack.pop();
  }
  if (quote) stack.push(quote);
  return stack;
}

export interface SuffixMerge {
  /** The text that replaces the range. */
  insertText: string;
  /** True when the range runs to the end of the line (over `lineSuffix`); false: an
   * insertion at the cursor. */
  coversSuffix: boolean;
  /** Characters of the suffix the completion re-emitted. */
  merged: number;
}

/** Merges a one-line completion with the closers after the cursor (see the file comment). */
export function mergeClosers(completion: string, linePrefix: string, lineSuffix: string): SuffixMerge {
  const insertOnly = { insertText: completion, coversSuffix: false, merged: 0 };
  const suffix = lineSuffix.replace(/\s+$/, '');
  if (!CLOSERS_ONLY.test(suffix) || completion.includes('\n')) return insertOnly;
  const outer = openAtEnd(linePrefix);
  const local: string[] = [];
  let p = 0; // suffix characters re-emitted so far
  const reemit = (ch: string): void => {
    if (p < suffix.length && suffix[p] === ch) p++;
  };
  for (let i = 0; i < completion.length; i++) {
    const ch = completion[i];
    const top = local[local.length - 1];
    if (top !== undefined && QUOTES.has(top)) {
      // Inside a string the completion opened.
      if (ch === '\\') i++;
      else if (ch === top) local.pop();
      continue;
    }
    const outerTop = outer[outer.length - 1];
    if (local.length === 0 && outerTop !== undefined && QUOTES.has(outerTop)) {
      // Inside a string opened before the cursor: only its quote ends it.
      if (ch === '\\') i++;
      else if (ch === outerTop) {
        outer.pop();
        reemit(ch);
      }
      continue;
    }
    if (OPENERS[ch] || QUOTES.has(ch)) local.push(ch);
    else if (CLOSERS[ch]) {
      if (top === CLOSERS[ch]) local.pop();
      else if (local.length === 0 && outerTop === CLOSERS[ch]) {
        outer.pop();
        reemit(ch);
      }
    } else if ((ch === ';' || ch === ',') && local.length === 0) reemit(ch);
  }
  if (p === 0) return insertOnly;
  return { insertText: completion + lineSuffix.slice(p), coversSuffix: true, merged: p };
}
