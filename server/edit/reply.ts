// reply.ts - reads a model's reply to an edit prompt (prompt.ts; docs/PROMPTS.md, "Inline
// edit") as the rewritten selection: the body of the reply's first fenced code block (```
// or ~~~, with or without a language or a path after it), whatever text the model wrote
// around it. A reply with no code block, or one cut off before its block closed, is a
// message, never code: an edit is applied only when the model finished writing it. While
// the reply streams, partialEditCode() gives the block's finished lines so far. Pure: no
// engine, no IO.
import type { EditReply } from '../../protocol/lsp';

interface Fence {
  /** The fence's character repeated, e.g. "```" or "~~~~". */
  marker: string;
  /** The info string's first word (a language), '' when none. */
  language: string;
  /** Offset in the reply where the block's first line starts. */
  bodyStart: number;
}

const OPENING = /^ {0,3}(`{3,}|~{3,})([^`\n]*)$/;

/** The first opening fence line, complete (followed by a line break), or undefined. */
function openingFence(reply: string): Fence | undefined {
  let start = 0;
  while (start < reply.length) {
    const end = reply.indexOf('\n', start);
    if (end < 0) return undefined; // the line may still grow into a fence
    const m = OPENING.exec(reply.slice(start, end).replace(/\r$/, ''));
    if (m) {
      const info = (m[2] ?? '').trim();
      return { marker: m[1] as string, language: info.split(/\s+/)[0] ?? '', bodyStart: end + 1 };
    }
    start = end + 1;
  }
  return undefined;
}

/** Whether `line` closes a block opened with `marker` (same character, at least as long). */
function closes(line: string, marker: string): boolean {
  const t = line.replace(/\r$/, '').trim();
  return t.length >= marker.length && t === marker[0]!.repeat(t.length);
}

/** The block's body lines up to its closing fence, and whether the fence came. While the
 * reply streams (`final` false) a last line without its break may still grow, so it is left
 * out unless it is the closing fence. */
function body(reply: string, fence: Fence, final: boolean): { lines: string[]; closed: boolean } {
  const lines: string[] = [];
  let start = fence.bodyStart;
  for (;;) {
    const end = reply.indexOf('\n', start);
    const line = end < 0 ? reply.slice(start) : reply.slice(start, end);
    if (closes(line, fence.marker)) return { lines, closed: true };
    if (end < 0) {
      if (final && line !== '') lines.push(line.replace(/\r$/, ''));
      return { lines, closed: false };
    }
    lines.push(line.replace(/\r$/, ''));
    start = end + 1;
  }
}

/** The code block's finished lines while the reply streams; undefined before the block opens. */
export function partialEditCode(reply: string): string | undefined {
  const fence = openingFence(reply);
  if (!fence) return undefined;
  return body(reply, fence, false).lines.join('\n');
}

/** The finished reply read as an edit. `cut`: the reply ended at the token limit or a stop,
 * not because the model ended it. */
export function parseEditReply(reply: string, cut: boolean): EditReply {
  const fence = openingFence(reply.endsWith('\n') ? reply : `${reply}\n`);
  if (!fence) {
    const text = reply.trim();
    return { kind: 'message', text: text || (cut ? 'The reply was stopped before it said anything.' : 'The model replied with nothing.') };
  }
  const { lines, closed } = body(reply, fence, true);
  // A model that ended its turn without closing the fence wrote the whole block; a reply cut
  // inside it did not, and half a rewrite must not replace the whole selection.
  if (!closed && cut) {
    const n = lines.length;
    return { kind: 'message', text: `The reply was cut off inside its code block (${n} line${n === 1 ? '' : 's'} arrived), so nothing was applied.` };
  }
  return { kind: 'code', code: lines.join('\n'), language: fence.language };
}
