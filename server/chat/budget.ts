// budget.ts - how a chat turn fits the model's context (docs/PROMPTS.md, "Attachments" and
// "Long conversations"): the text an attachment becomes in the user message, the cut rule
// that decides how much of each attachment is sent, and which oldest messages are left
// out when the history does not fit. Pure: token counts come from the caller (the
// tokenizer through the chat renderer, or an estimate for a remote backend).
import type { AttachmentFate, ChatAttachment, SentAttachment } from '../../protocol/lsp';

/** Bytes of one attachment's text the server accepts; the extension refuses bigger files
 * before they are sent (with their size), this only guards the request. */
export const MAX_ATTACHMENT_BYTES = 4 * 1024 * 1024;
/** Attachments one message may carry. */
export const MAX_ATTACHMENTS = 32;

/** The reply's reserve: the request's token limit, but at most a quarter of the context, so
 * a small context still holds a conversation (a reply that reaches the reserve's end stops
 * there, as at its token limit). */
export function replyReserve(maxTokens: number, context: number): number {
  return Math.max(1, Math.min(maxTokens, Math.floor(context / 4)));
}

/** The text's lines, each without its line break (a final break adds no empty line). */
function splitLines(text: string): string[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** A fence of backticks longer than any run in the text, so the text cannot close it. */
function fenceFor(text: string): string {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  return '`'.repeat(Math.max(3, longest + 1));
}

/** How an attachment is introduced: `File <path>` for a whole file, `Selection from <path>,
 * lines a-b` for a selection; a cut one says which lines were kept and why. */
function header(a: ChatAttachment, sentLines: number): string {
  const where = a.kind === 'file' ? `File ${a.path}` : `Selection from ${a.path}, lines ${a.lines.start}-${a.lines.end}`;
  if (sentLines >= a.lines.end - a.lines.start + 1) return `${where}:`;
  const last = a.lines.start + sentLines - 1;
  return `${where} (only lines ${a.lines.start}-${last} are shown: the rest did not fit the context):`;
}

/** One attachment as the user message carries it: its header, then the first `sentLines`
 * lines of its text (all when absent) in a fenced block tagged with the language, then a
 * blank line. `a.lines` is the range the whole attachment covers. */
export function attachmentBlock(a: ChatAttachment, sentLines?: number): string {
  const lines = splitLines(a.text);
  const n = Math.min(sentLines ?? lines.length, lines.length);
  const body = lines.slice(0, n).join('\n');
  const fence = fenceFor(body);
  return `${header(a, n)}\n${fence}${a.languageId ?? ''}\n${body}\n${fence}\n\n`;
}

/** The lines of an attachment's text. */
export function lineCount(text: string): number {
  return splitLines(text).length;
}

/** The user message's content as the model reads it: the attachments that were sent, in
 * order, then what the user typed. */
export function userContent(message: string, attachments: readonly SentAttachment[] | undefined): string {
  let out = '';
  for (const a of attachments ?? []) if (a.fate !== 'left-out') out += attachmentBlock(a);
  return out + message;
}

export interface AttachmentPlan {
  /** The attachments as they would be sent: text cut to the lines sent ('' when left out). */
  sent: SentAttachment[];
  /** What they add to the user message, as one text (userContent's prefix). */
  tokens: number;
}

/**
 * The cut rule. Attachments are taken in the order they were attached, each while it fits
 * `room` tokens whole; the first that does not is cut to its first lines that fit (at least
 * one), and it and every later one that does not fit are left out. `count` counts a text's
 * tokens as the user message encodes it.
 */
export function planAttachments(attachments: readonly ChatAttachment[], room: number, count: (text: string) => number): AttachmentPlan {
  const sent: SentAttachment[] = [];
  let left = Math.max(0, room);
  let used = 0;
  for (const a of attachments) {
    const tokens = count(attachmentBlock(a));
    const total = lineCount(a.text);
    let fate: AttachmentFate;
    let lines = 0;
    let sentTokens = 0;
    if (tokens <= left) {
      fate = 'whole';
      lines = total;
      sentTokens = tokens;
    } else {
      // The most lines whose block fits: a block's count grows with its lines.
      let lo = 0;
      let hi = total - 1;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (count(attachmentBlock(a, mid)) <= left) lo = mid;
        else hi = mid - 1;
      }
      lines = lo;
      fate = lines > 0 ? 'cut' : 'left-out';
      sentTokens = lines > 0 ? count(attachmentBlock(a, lines)) : 0;
    }
    left -= sentTokens;
    used += sentTokens;
    const text = fate === 'whole' ? a.text : splitLines(a.text).slice(0, lines).join('\n');
    sent.push({ ...a, text, tokens, sentTokens, fate });
  }
  return { sent, tokens: used };
}

/**
 * The messages left out of a turn: at least `already` (a conversation never sends a turn
 * again once it was left out, so each turn's rendering stays a prefix of the next one's),
 * and more, whole turns from the oldest, while the kept history's tokens exceed `room`.
 * `tokens[i]` is message i's rendering; a kept history starts with a user message.
 */
export function messagesLeftOut(tokens: readonly number[], roles: readonly ('user' | 'assistant')[], room: number, already: number): number {
  let start = Math.min(Math.max(0, already), tokens.length);
  let kept = 0;
  for (let i = start; i < tokens.length; i++) kept += tokens[i];
  while (start < tokens.length && kept > room) {
    kept -= tokens[start];
    start++;
    // A turn is its user message and the reply after it: never keep a reply without it.
    while (start < tokens.length && roles[start] !== 'user') {
      kept -= tokens[start];
      start++;
    }
  }
  return start;
}
