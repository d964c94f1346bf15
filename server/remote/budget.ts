// budget.ts - how much of a streamed reply a remote server may send, whatever it does with
// `max_tokens`: a server that ignores it (or streams forever) is cut off at the request's
// budget plus a margin, in pieces (events with text) and in bytes, so the language server's
// memory stays bounded and its event loop free; and how long one request may take in all
// (the inter-event timeout alone restarts at every event). docs/REMOTE.md, "Bounds", states
// the same numbers. It reads no stream itself (chat.ts and completion.ts count through it).

/** Pieces allowed past max_tokens: a quarter more, at least this many (a server may split a
 * token's text between the reasoning and content channels, or send a last empty piece). */
export const PIECE_MARGIN_MIN = 16;
/** Bytes of text one allowed piece may average: far past any token's text (K3's longest
 * tokens are runs of spaces or punctuation of a few dozen bytes). */
export const BYTES_PER_PIECE = 256;
/** A chat turn may take this many k3.remote.timeoutMs in all (10 minutes at the default). */
export const CHAT_DEADLINE_TIMEOUTS = 10;
/** A completion may take this many k3.remote.timeoutMs in all: the answer may take one to
 * start, the reply the other. */
export const COMPLETION_DEADLINE_TIMEOUTS = 2;

/** Counts a reply's pieces and bytes against the budget of a request for `maxTokens`. */
export class ReplyBudget {
  readonly maxPieces: number;
  readonly maxBytes: number;
  pieces = 0;
  bytes = 0;
  /** Why the reply was cut off, once it was. */
  exceeded: string | undefined;

  constructor(readonly maxTokens: number) {
    this.maxPieces = maxTokens + Math.max(PIECE_MARGIN_MIN, Math.ceil(maxTokens / 4));
    this.maxBytes = this.maxPieces * BYTES_PER_PIECE;
  }

  /**
   * Counts one piece (an event's texts, e.g. its reasoning and its content) and returns what
   * of each text to keep: all of it while within the budget, the part up to the byte bound
   * where it is crossed, '' after. Once it keeps less than it was given, `exceeded` says why
   * and the stream should close.
   */
  take(...texts: string[]): string[] {
    if (this.exceeded !== undefined) return texts.map(() => '');
    this.pieces++;
    if (this.pieces > this.maxPieces) {
      this.exceeded = `the server sent more than ${this.maxPieces} pieces for max_tokens ${this.maxTokens}`;
      return texts.map(() => '');
    }
    return texts.map((text) => {
      const n = Buffer.byteLength(text);
      if (this.exceeded === undefined && this.bytes + n <= this.maxBytes) {
        this.bytes += n;
        return text;
      }
      if (this.exceeded !== undefined) return '';
      this.exceeded = `the server sent more than ${this.maxBytes} bytes of text for max_tokens ${this.maxTokens}`;
      // Cut on a character: a sequence the cut splits is dropped whole.
      const kept = Buffer.from(text).subarray(0, this.maxBytes - this.bytes).toString('utf8').replace(/\uFFFD$/, '');
      this.bytes = this.maxBytes;
      return kept;
    });
  }
}
