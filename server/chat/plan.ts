// plan.ts - what one chat turn sends (docs/PROMPTS.md, "Attachments" and "Long
// conversations"): which earlier messages are kept (a regenerate or an edit replaces a
// message and everything after it; the oldest turns are left out when the history does not
// fit), how much of each attachment goes (budget.ts's cut rule), and the counts
// k3/chat/budget shows before sending. The same plan serves k3/chat/budget and
// k3/chat/send, so what the page shows is what is sent. It checks the params' new fields.
import * as crypto from 'node:crypto';
import { K3Failure, invalidRequest } from '../errors';
import type { ChatAttachment, ChatBudget } from '../../protocol/lsp';
import type { StoredConversation, StoredMessage } from '../state/store';
import { MAX_ATTACHMENTS, MAX_ATTACHMENT_BYTES, lineCount, messagesLeftOut, planAttachments, replyReserve, userContent } from './budget';
import type { ChatRenderer, RenderMessage } from './render';

/** How a backend counts: the context, and tokens of text and of whole messages. */
export interface TurnCounter {
  context: number;
  /** Counts from the text's length, not a tokenizer. */
  estimated: boolean;
  /** Tokens of message content. */
  text(t: string): number;
  /** Tokens of one message as the conversation renders it. */
  message(m: RenderMessage): number;
  /** The tokens every prompt has besides its messages (a thinking-effort message, the
   * generation prompt). */
  overhead: number;
  /** Kept free after the reply: what closes a reply cut short (0 for a remote server). */
  closing: number;
}

/** Counting with the model's chat renderer: exact. `closing`: the room kept to close a cut
 * reply (the local engine closes it; a remote server does not). */
export function rendererCounter(renderer: ChatRenderer, context: number, thinking: boolean, closing = renderer.closerRoom()): TurnCounter {
  return {
    context,
    estimated: false,
    text: (t) => renderer.textTokens(t),
    message: (m) => renderer.messageTokens(m, thinking),
    overhead: renderer.render([], { thinking, generationPrompt: true }).length,
    closing,
  };
}

/** Bytes per token of the estimate used without a tokenizer (code and English run near 4). */
const BYTES_PER_TOKEN = 4;
/** An OpenAI-style chat template's tokens around each message, and around the prompt (a
 * system message such as K3's thinking-effort one included). */
const TEMPLATE_TOKENS = 8;
const PROMPT_TOKENS = 96;

/** Counting for a remote server: its tokenizer when the model folder has one, else an
 * estimate from the bytes (said so: `estimated`). */
export function remoteCounter(context: number, encode: ((t: string) => number) | undefined): TurnCounter {
  const text = encode ?? ((t: string) => Math.ceil(Buffer.byteLength(t, 'utf8') / BYTES_PER_TOKEN));
  return {
    context,
    estimated: encode === undefined,
    text,
    message: (m) => text(m.content) + text(m.reasoning ?? '') + TEMPLATE_TOKENS,
    overhead: PROMPT_TOKENS,
    closing: 0,
  };
}

/** A stored message as the model reads it: a user message carries its attachments. */
export function renderable(m: StoredMessage): RenderMessage {
  if (m.role === 'user') return { role: 'user', content: userContent(m.content, m.attachments) };
  return { role: 'assistant', content: m.content, reasoning: m.reasoning, ...(m.ids ? { ids: m.ids } : {}) };
}

export interface TurnPlan {
  /** The messages before the new one (a replaced message and those after it gone). */
  kept: StoredMessage[];
  /** The first this many of `kept` are not sent. */
  notSent: number;
  /** The new message, its attachments as sent. */
  userMessage: StoredMessage;
  /** The rendering a saved state or a held session holds no longer starts this turn's
   * prompt (messages replaced, or more left out): the turn prefills from the kept ones. */
  historyChanged: boolean;
  budget: ChatBudget;
}

/** Checks `attachments` (from a request: unknown at run time). */
export function checkAttachments(v: unknown, method: string): ChatAttachment[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw invalidRequest(`${method}: attachments must be an array`);
  if (v.length > MAX_ATTACHMENTS) throw invalidRequest(`${method}: ${v.length} attachments, at most ${MAX_ATTACHMENTS}`);
  return v.map((raw, i): ChatAttachment => {
    const a = raw as Record<string, unknown> | null;
    const where = `${method}: attachments[${i}]`;
    if (!a || typeof a !== 'object') throw invalidRequest(`${where} is not an object`);
    if (a.kind !== 'selection' && a.kind !== 'file') throw invalidRequest(`${where}.kind must be "selection" or "file"`);
    if (typeof a.path !== 'string' || a.path === '' || typeof a.uri !== 'string' || typeof a.text !== 'string')
      throw invalidRequest(`${where} needs path, uri and text strings`);
    if (a.languageId !== undefined && typeof a.languageId !== 'string') throw invalidRequest(`${where}.languageId must be a string`);
    const bytes = Buffer.byteLength(a.text, 'utf8');
    if (bytes > MAX_ATTACHMENT_BYTES) throw invalidRequest(`${where} (${a.path}) is ${bytes} bytes, more than the ${MAX_ATTACHMENT_BYTES} an attachment may have`);
    const lines = a.lines as Record<string, unknown> | undefined;
    const start = lines?.start;
    const end = lines?.end;
    if (!Number.isInteger(start) || !Number.isInteger(end) || (start as number) < 1 || (end as number) < (start as number))
      throw invalidRequest(`${where}.lines must be { start, end }, 1-based with end >= start`);
    const n = lineCount(a.text);
    if (n !== (end as number) - (start as number) + 1)
      throw invalidRequest(`${where} (${a.path}): lines ${String(start)}-${String(end)} are ${(end as number) - (start as number) + 1} lines, its text has ${n}`);
    const out: ChatAttachment = { kind: a.kind, path: a.path, uri: a.uri, lines: { start: start as number, end: end as number }, text: a.text };
    if (a.languageId !== undefined) out.languageId = a.languageId as string;
    return out;
  });
}

/**
 * Plans a turn of `conv` (undefined: a new conversation). The reply's reserve and the new
 * message come first; the attachments get what is left of the context, by the cut rule; the
 * history gets what they leave, its oldest turns left out first. A message that does not
 * fit even alone is refused, with its numbers.
 */
export function planTurn(
  conv: StoredConversation | undefined,
  message: string,
  attachments: readonly ChatAttachment[] | undefined,
  replaceFrom: string | undefined,
  maxTokens: number,
  counter: TurnCounter,
  now: number,
): TurnPlan {
  let kept = conv?.messages ?? [];
  let already = conv?.notSent ?? 0;
  if (replaceFrom !== undefined) {
    const at = kept.findIndex((m) => m.id === replaceFrom);
    if (at < 0 || kept[at].role !== 'user')
      throw invalidRequest(`replaceFrom: ${replaceFrom} is not a message the user wrote in conversation ${conv?.id ?? '(new)'}`);
    kept = kept.slice(0, at);
    already = Math.min(already, at);
  }
  const context = counter.context;
  const reply = replyReserve(maxTokens, context) + counter.closing;
  const bare = counter.message({ role: 'user', content: message });
  const fixed = reply + counter.overhead + bare;
  if (fixed > context) {
    throw new K3Failure(
      'context-full',
      `The message is ${bare} tokens; with ${reply} kept for the reply and ${counter.overhead} of the chat format it does not fit the context of ${context} tokens. Shorten it.`,
    );
  }
  const plan = planAttachments(attachments ?? [], context - fixed, (t) => counter.text(t));
  const userMessage: StoredMessage = { id: crypto.randomUUID(), role: 'user', content: message, reasoning: '', createdAt: now };
  if (plan.sent.length) userMessage.attachments = plan.sent;
  const userTokens = counter.message(renderable(userMessage));
  const tokens = kept.map((m) => counter.message(renderable(m)));
  const room = context - reply - counter.overhead - userTokens;
  const notSent = messagesLeftOut(
    tokens,
    kept.map((m) => m.role),
    room,
    already,
  );
  let historyTokens = 0;
  for (let i = notSent; i < tokens.length; i++) historyTokens += tokens[i];
  return {
    kept,
    notSent,
    userMessage,
    historyChanged: replaceFrom !== undefined || notSent !== (conv?.notSent ?? 0),
    budget: {
      contextTokens: context,
      replyTokens: reply,
      messageTokens: bare,
      historyTokens,
      attachments: plan.sent.map((a) => ({ tokens: a.tokens, sentTokens: a.sentTokens, fate: a.fate })),
      totalTokens: counter.overhead + historyTokens + userTokens,
      notSent,
      estimated: counter.estimated,
    },
  };
}
