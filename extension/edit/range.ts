// range.ts - which whole lines an inline edit rewrites when nothing is selected: the
// innermost function, method or class around the cursor as the language's document symbols
// give it, else the indentation block the cursor is in (the line that opens it and the
// lines indented under it). Pure: session.ts and inlineEdit.ts ask VS Code for the symbols.

/** Lines [start, end] inclusive. */
export interface LineSpan {
  start: number;
  end: number;
}

/** A document symbol's span and kind name (vscode.SymbolKind's, e.g. 'Function'). */
export interface SymbolSpan extends LineSpan {
  kind: string;
  children: SymbolSpan[];
}

const BLOCK_KINDS = new Set(['Function', 'Method', 'Constructor', 'Class', 'Interface', 'Enum', 'Struct', 'Module', 'Namespace']);

/** The innermost function-like symbol holding `line`, if any. */
export function enclosingSymbol(symbols: readonly SymbolSpan[], line: number): LineSpan | undefined {
  for (const s of symbols) {
    if (line < s.start || line > s.end) continue;
    const inner = enclosingSymbol(s.children, line);
    if (inner) return inner;
    if (BLOCK_KINDS.has(s.kind)) return { start: s.start, end: s.end };
  }
  return undefined;
}

function indent(line: string): number {
  return line.length - line.trimStart().length;
}

const blank = (line: string): boolean => line.trim() === '';

/** The indentation block around `line`: when the next non-blank line is indented deeper, the
 * block `line` opens; else the block `line` sits in (from the line that opens it, the nearest
 * one above indented less). It runs down to the last line indented deeper than its opener,
 * blank lines inside it included, trailing blank lines not. A line with nothing around it is
 * a block of one. */
export function indentationBlock(lines: readonly string[], line: number): LineSpan {
  let at = line;
  while (at > 0 && blank(lines[at]!)) at--;
  let next = at + 1;
  while (next < lines.length && blank(lines[next]!)) next++;
  let opener = at;
  if (!(next < lines.length && indent(lines[next]!) > indent(lines[at]!))) {
    opener = -1;
    for (let k = at - 1; k >= 0; k--) {
      if (!blank(lines[k]!) && indent(lines[k]!) < indent(lines[at]!)) {
        opener = k;
        break;
      }
    }
    if (opener < 0) return { start: at, end: at };
  }
  const base = indent(lines[opener]!);
  let end = opener;
  for (let k = opener + 1; k < lines.length; k++) {
    if (blank(lines[k]!)) continue;
    if (indent(lines[k]!) <= base) {
      // A closing line at the opener's indentation (`}`, `end`) belongs to the block.
      if (/^[\s]*[}\])]|^\s*end\b/.test(lines[k]!)) end = k;
      break;
    }
    end = k;
  }
  return { start: opener, end };
}
