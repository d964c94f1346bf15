// render.ts - the K3 chat format ("XTML", docs/k3-architecture.md §5.4; docs/PROMPTS.md):
// messages become segments, segments become token ids, and a reply's ids become its
// reasoning and response. Each segment is encoded on its own: structure tokens (<|open|>,
// <|close|>, <|sep|>, <|end_of_msg|>) with specials allowed, every piece of text (tag
// names, attribute names and values, message content) with specials disallowed, so text
// that spells a special token stays text. An assistant message that carries the exact ids
// it was generated with is rendered from them, so a conversation's rendering at turn N is
// a prefix of its rendering at turn N+1 and a saved engine state stays reusable. It does
// not talk to the engine.
import { SPECIAL_TOKENS } from '../engine/tokenizer';

/** The encoder the renderer needs (server/engine/tokenizer.ts's Tokenizer fits). */
export interface ChatTokenizer {
  encode(text: string, allowSpecial: boolean): Int32Array;
  specialId(name: string): number | undefined;
  stopIds(): number[];
  stream(): { push(id: number): string; end(): string };
}

/** A piece of the rendering: text encoded alone, or ids taken as they are. */
export type Segment = { text: string; special: boolean } | { ids: readonly number[] };

export interface RenderMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
  reasoning?: string;
  /** An assistant turn's exact ids, from its `<|open|>message` to its last token. */
  ids?: readonly number[];
}

export type ThinkingEffort = 'low' | 'medium' | 'high' | 'max';

export interface RenderOptions {
  /** The model thinks before answering: adds the thinking-effort system message, renders
   * assistant turns with their think block, and opens the think channel. */
  thinking: boolean;
  effort?: ThinkingEffort;
  /** End with the assistant turn's opening (the generation prompt). */
  generationPrompt: boolean;
}

const special = (text: string): Segment => ({ text, special: true });
const text = (t: string): Segment => ({ text: t, special: false });

/** `&` and `"` escaped, as attribute values are. */
export function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
}

/** <|open|>tag key="value"...<|sep|>, with tag, each ` key`, `="`, value and `"` apart. */
export function openTag(tag: string, attrs: ReadonlyArray<readonly [string, string]> = []): Segment[] {
  const out: Segment[] = [special(SPECIAL_TOKENS.open), text(tag)];
  for (const [k, v] of attrs) out.push(text(` ${k}`), text('="'), text(escapeAttribute(v)), text('"'));
  out.push(special(SPECIAL_TOKENS.sep));
  return out;
}

/** <|close|>tag<|sep|> */
export function closeTag(tag: string): Segment[] {
  return [special(SPECIAL_TOKENS.close), text(tag), special(SPECIAL_TOKENS.sep)];
}

const END = special(SPECIAL_TOKENS.endOfMessage);

/** A system or user message. */
export function messageSegments(role: 'system' | 'user', content: string): Segment[] {
  return [...openTag('message', [['role', role]]), text(content), ...closeTag('message'), END];
}

export function thinkingEffortText(effort: ThinkingEffort): string {
  return (
    '`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), ' +
    'supported values include `low`, `medium`, `high`, and `max`.\n' +
    `Now the system is invoked with \`thinking_effort=${effort}\`.`
  );
}

export function thinkingEffortSegments(effort: ThinkingEffort): Segment[] {
  return [
    ...openTag('message', [
      ['role', 'system'],
      ['type', 'thinking-effort'],
    ]),
    text(thinkingEffortText(effort)),
    ...closeTag('message'),
    END,
  ];
}

/** The generation prompt: the assistant turn opened, then the think (or response) channel. */
export function generationPromptSegments(thinking: boolean): Segment[] {
  return [...openTag('message', [['role', 'assistant']]), ...openTag(thinking ? 'think' : 'response')];
}

/** An assistant message rendered from its text (when its ids are not known). */
export function assistantSegments(reasoning: string, content: string, thinking: boolean): Segment[] {
  const out: Segment[] = openTag('message', [['role', 'assistant']]);
  if (thinking) out.push(...openTag('think'), text(reasoning), ...closeTag('think'));
  out.push(...openTag('response'), text(content), ...closeTag('response'), ...closeTag('message'), END);
  return out;
}

/** One message of a conversation as segments (its ids when it has them). */
export function oneMessageSegments(m: RenderMessage, thinking: boolean): Segment[] {
  if (m.role !== 'assistant') return messageSegments(m.role, m.content);
  return m.ids ? [{ ids: m.ids }] : assistantSegments(m.reasoning ?? '', m.content, thinking);
}

/** The whole conversation as segments. Each message's segments stand alone, so the
 * rendering's length is the sum of its parts' (server/chat/budget.ts counts on it). */
export function renderSegments(messages: readonly RenderMessage[], options: RenderOptions): Segment[] {
  const out: Segment[] = [];
  if (options.thinking) out.push(...thinkingEffortSegments(options.effort ?? 'max'));
  for (const m of messages) out.push(...oneMessageSegments(m, options.thinking));
  if (options.generationPrompt) out.push(...generationPromptSegments(options.thinking));
  return out;
}

/** Where a reply stands, by the structure tokens it has produced. */
export type ReplyState = 'think' | 'between' | 'response' | 'tools' | 'after-response' | 'done' | 'ended';

export interface ReplyDelta {
  channel: 'reasoning' | 'content';
  text: string;
}

export class ChatRenderer {
  private readonly open: number;
  private readonly close: number;
  private readonly sep: number;
  readonly stopIds: readonly number[];

  constructor(private readonly tok: ChatTokenizer) {
    const id = (name: string): number => {
      const v = tok.specialId(name);
      if (v === undefined) throw new Error(`the tokenizer has no special token ${name}`);
      return v;
    };
    this.open = id(SPECIAL_TOKENS.open);
    this.close = id(SPECIAL_TOKENS.close);
    this.sep = id(SPECIAL_TOKENS.sep);
    id(SPECIAL_TOKENS.endOfMessage);
    this.stopIds = tok.stopIds();
  }

  /** Segments to ids, each encoded alone (empty text segments add nothing). */
  encode(segments: readonly Segment[]): number[] {
    const ids: number[] = [];
    for (const s of segments) {
      if ('ids' in s) ids.push(...s.ids);
      else if (s.text !== '') ids.push(...this.tok.encode(s.text, s.special));
    }
    return ids;
  }

  render(messages: readonly RenderMessage[], options: RenderOptions): number[] {
    return this.encode(renderSegments(messages, options));
  }

  /** Tokens of one message as a conversation renders it. */
  messageTokens(m: RenderMessage, thinking: boolean): number {
    return this.encode(oneMessageSegments(m, thinking)).length;
  }

  /** Tokens of `t` as message content (text, specials disallowed). */
  textTokens(t: string): number {
    return t === '' ? 0 : this.tok.encode(t, false).length;
  }

  generationPrompt(thinking: boolean): number[] {
    return this.encode(generationPromptSegments(thinking));
  }

  /** A parser for a reply generated after generationPrompt(thinking). */
  parser(thinking: boolean): ReplyParser {
    return new ReplyParser(this.tok, { open: this.open, close: this.close, sep: this.sep }, this.stopIds, thinking);
  }

  /** The most ids closer() can add (a reply cut inside a think tag): kept free at the
   * context's end, so a cut reply can always be closed. */
  closerRoom(): number {
    return this.closer('think', true).length;
  }

  /** The ids that close a reply left in `state` (cut by the token limit or a stop), so the
   * turn ends the way a finished one does: channels closed, message closed, <|end_of_msg|>. */
  closer(state: ReplyState, inTag: boolean): number[] {
    const segs: Segment[] = inTag ? [special(SPECIAL_TOKENS.sep)] : [];
    switch (state) {
      case 'think':
        segs.push(...closeTag('think'), ...openTag('response'), ...closeTag('response'), ...closeTag('message'));
        break;
      case 'between':
        segs.push(...openTag('response'), ...closeTag('response'), ...closeTag('message'));
        break;
      case 'response':
        segs.push(...closeTag('response'), ...closeTag('message'));
        break;
      case 'tools':
        segs.push(...closeTag('tools'), ...closeTag('message'));
        break;
      case 'after-response':
        segs.push(...closeTag('message'));
        break;
      case 'done':
        break;
      case 'ended':
        return [];
    }
    segs.push(END);
    return this.encode(segs);
  }
}

/**
 * Reads a reply's ids as they come: text tokens go to the channel that is open (think ->
 * reasoning, response -> content), structure tokens move between channels, a stop id ends
 * it. Ids other than the structure ones, specials included, are text (a special reads as
 * its name).
 */
export class ReplyParser {
  state: ReplyState;
  reasoning = '';
  content = '';
  private tag: { kind: 'open' | 'close'; ids: number[] } | undefined;
  private readonly stream: { push(id: number): string; end(): string };
  private readonly stops: Set<number>;

  constructor(
    private readonly tok: ChatTokenizer,
    private readonly ids: { open: number; close: number; sep: number },
    stopIds: readonly number[],
    thinking: boolean,
  ) {
    this.state = thinking ? 'think' : 'response';
    this.stream = tok.stream();
    this.stops = new Set(stopIds);
  }

  /** True while a structure tag has been opened but not finished with <|sep|>. */
  get inTag(): boolean {
    return this.tag !== undefined;
  }

  feed(ids: Iterable<number>): ReplyDelta[] {
    const out: ReplyDelta[] = [];
    for (const id of ids) {
      if (this.state === 'ended') break;
      if (this.stops.has(id)) {
        this.flush(out);
        this.state = 'ended';
      } else if (id === this.ids.open || id === this.ids.close) {
        this.flush(out);
        this.tag = { kind: id === this.ids.open ? 'open' : 'close', ids: [] };
      } else if (this.tag) {
        if (id === this.ids.sep) {
          this.enter(this.tag.kind, this.tagName(this.tag.ids));
          this.tag = undefined;
        } else {
          this.tag.ids.push(id);
        }
      } else {
        this.emit(out, this.stream.push(id));
      }
    }
    return out;
  }

  /** The text still held back (an incomplete character at the very end). */
  finish(): ReplyDelta[] {
    const out: ReplyDelta[] = [];
    this.flush(out);
    return out;
  }

  private tagName(ids: number[]): string {
    const s = this.tok.stream();
    let name = ids.map((i) => s.push(i)).join('') + s.end();
    name = name.trim();
    const space = name.indexOf(' ');
    return space < 0 ? name : name.slice(0, space);
  }

  private enter(kind: 'open' | 'close', name: string): void {
    if (kind === 'open') {
      if (name === 'think') this.state = 'think';
      else if (name === 'response') this.state = 'response';
      else if (name === 'tools') this.state = 'tools';
    } else if (name === 'think') {
      this.state = 'between';
    } else if (name === 'response') {
      this.state = 'after-response';
    } else if (name === 'tools') {
      this.state = 'after-response';
    } else if (name === 'message') {
      this.state = 'done';
    }
  }

  private flush(out: ReplyDelta[]): void {
    this.emit(out, this.stream.end());
  }

  private emit(out: ReplyDelta[], t: string): void {
    if (!t) return;
    if (this.state === 'think') {
      this.reasoning += t;
      push(out, 'reasoning', t);
    } else if (this.state === 'response') {
      this.content += t;
      push(out, 'content', t);
    }
  }
}

function push(out: ReplyDelta[], channel: ReplyDelta['channel'], t: string): void {
  const last = out[out.length - 1];
  if (last && last.channel === channel) last.text += t;
  else out.push({ channel, text: t });
}
