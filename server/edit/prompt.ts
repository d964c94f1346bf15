// prompt.ts - the user message an inline edit sends to the chat model (docs/PROMPTS.md,
// "Inline edit"): the instruction, the file's path and language, the code around the
// selection as context, and the selection itself, each in its own code fence, with the one
// rule the reply parser (reply.ts) relies on: answer with the rewritten selection in one
// code block. The message goes through the model's ordinary chat format (render.ts locally,
// the server's template remotely). It does not talk to the engine.
import type { EditStartParams } from '../../protocol/lsp';

/** Context kept around the selection: at most this many lines and characters each side.
 * Enough for the model to see the function and its neighbours, small enough to prefill fast. */
export const CONTEXT_LINES_BEFORE = 60;
export const CONTEXT_LINES_AFTER = 30;
export const CONTEXT_CHARS = 6000;

/** The last `lines` lines of `text`, within `chars` characters, cut at a line start. */
export function tailLines(text: string, lines: number, chars: number): string {
  let start = text.length;
  let count = 0;
  while (start > 0 && count < lines) {
    const prev = text.lastIndexOf('\n', start - 2);
    const next = prev + 1;
    if (text.length - next > chars) break;
    start = next;
    count++;
  }
  return text.slice(start);
}

/** The first `lines` lines of `text`, within `chars` characters, cut at a line end. */
export function headLines(text: string, lines: number, chars: number): string {
  let end = 0;
  let count = 0;
  while (end < text.length && count < lines) {
    const nl = text.indexOf('\n', end);
    const next = nl < 0 ? text.length : nl + 1;
    if (next > chars) break;
    end = next;
    count++;
  }
  return text.slice(0, end);
}

/** A fence longer than any run of backticks in `code`, so the code cannot close it. */
export function fenceFor(code: string): string {
  let longest = 0;
  for (const m of code.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return '`'.repeat(Math.max(3, longest + 1));
}

function block(code: string, language: string): string {
  const fence = fenceFor(code);
  return `${fence}${language}\n${code}${code.endsWith('\n') || code === '' ? '' : '\n'}${fence}`;
}

/** The user message for an edit. */
export function editMessage(p: EditStartParams): string {
  const lang = p.languageId && p.languageId !== 'plaintext' ? p.languageId : '';
  const before = tailLines(p.before, CONTEXT_LINES_BEFORE, CONTEXT_CHARS);
  const after = headLines(p.after, CONTEXT_LINES_AFTER, CONTEXT_CHARS);
  const file = p.path ? `the file ${p.path}` : 'a file';
  const parts = [
    `Rewrite the selected code of ${file}${lang ? ` (${lang})` : ''} as the instruction says.`,
    'Reply with the rewritten selection only, in one fenced code block: the whole selection, changed where the instruction asks, ' +
      'with the indentation of the surrounding code. Do not repeat the code before or after it. ' +
      'If the instruction cannot be done as code, say why in a sentence and write no code block.',
    '',
    `Instruction: ${p.instruction.trim()}`,
  ];
  if (before.trim()) parts.push('', 'Code before the selection:', block(before, lang));
  parts.push('', 'The selection:', block(p.selection, lang));
  if (after.trim()) parts.push('', 'Code after the selection:', block(after, lang));
  return parts.join('\n');
}
