// sse.ts - a server-sent-event reader for untrusted bytes: lines end at LF, CRLF or CR;
// `data:` lines are joined into one event, dispatched at a blank line; comments (`:`, the
// keep-alive pings llama-server sends) and other fields are skipped. Each byte is looked at
// once however the stream is cut into chunks (a line that spans chunks is kept as a list of
// pieces, never rescanned), and a line or an event past its bound is refused with the byte
// counts, so a stream without newlines cannot grow memory or keep a request busy. It knows
// nothing about JSON or HTTP (http.ts does).

/** A line or an event over its bound; `what` says which, the numbers what was seen. */
export class SseLimitError extends Error {
  constructor(
    readonly what: 'line' | 'event',
    readonly limit: number,
    readonly seen: number,
  ) {
    super(
      what === 'line'
        ? `a line of the event stream is over ${limit} bytes (${seen} bytes without a line end)`
        : `an event of the event stream is over ${limit} bytes (${seen} bytes of data lines)`,
    );
    this.name = 'SseLimitError';
  }
}

export interface SseLimits {
  /** Most bytes one line may hold, its line end excluded. */
  lineBytes: number;
  /** Most bytes the data lines of one event may hold together. */
  eventBytes: number;
}

const LF = 0x0a;
const CR = 0x0d;
const DATA = Buffer.from('data:');

export class SseParser {
  /** The current line's bytes from earlier chunks. */
  private pieces: Buffer[] = [];
  private pieceBytes = 0;
  /** The last line ended with CR: an LF first in the next chunk belongs to it. */
  private afterCr = false;
  private data: Buffer[] = [];
  private dataBytes = 0;
  private hasData = false;

  constructor(
    private readonly limits: SseLimits,
    /** One event's data (the `data:` lines joined by LF), in order. */
    private readonly onEvent: (data: string) => void,
  ) {}

  /** Takes the next bytes of the stream; throws SseLimitError, or what onEvent throws. */
  push(chunk: Buffer): void {
    let start = 0;
    if (this.afterCr && chunk.length > 0) {
      this.afterCr = false;
      if (chunk[0] === LF) start = 1;
    }
    for (let i = start; i < chunk.length; i++) {
      const c = chunk[i];
      if (c !== LF && c !== CR) continue;
      this.line(this.take(chunk.subarray(start, i)));
      if (c === CR) {
        if (i + 1 < chunk.length) {
          if (chunk[i + 1] === LF) i++;
        } else this.afterCr = true;
      }
      start = i + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.pieceBytes += rest.length;
      if (this.pieceBytes > this.limits.lineBytes) throw new SseLimitError('line', this.limits.lineBytes, this.pieceBytes);
      this.pieces.push(Buffer.from(rest));
    }
  }

  /** The stream ended: a last event without its blank line still counts. */
  end(): void {
    if (this.pieceBytes > 0) this.line(this.take(Buffer.alloc(0)));
    this.dispatch();
  }

  /** The line that ends with `tail`: the pieces before it plus tail. */
  private take(tail: Buffer): Buffer {
    if (this.pieces.length === 0) {
      if (tail.length > this.limits.lineBytes) throw new SseLimitError('line', this.limits.lineBytes, tail.length);
      return tail;
    }
    const bytes = this.pieceBytes + tail.length;
    if (bytes > this.limits.lineBytes) throw new SseLimitError('line', this.limits.lineBytes, bytes);
    const line = Buffer.concat([...this.pieces, tail], bytes);
    this.pieces = [];
    this.pieceBytes = 0;
    return line;
  }

  private line(line: Buffer): void {
    if (line.length === 0) {
      this.dispatch();
      return;
    }
    if (line.length < DATA.length || !line.subarray(0, DATA.length).equals(DATA)) return; // comments, event:, id:, retry:
    const value = line.subarray(line[DATA.length] === 0x20 ? DATA.length + 1 : DATA.length);
    this.dataBytes += value.length + (this.hasData ? 1 : 0);
    if (this.dataBytes > this.limits.eventBytes) throw new SseLimitError('event', this.limits.eventBytes, this.dataBytes);
    this.data.push(Buffer.from(value));
    this.hasData = true;
  }

  private dispatch(): void {
    if (!this.hasData) return;
    const parts = this.data;
    this.data = [];
    this.dataBytes = 0;
    this.hasData = false;
    const joined: Buffer[] = [];
    parts.forEach((p, k) => {
      if (k > 0) joined.push(Buffer.from([LF]));
      joined.push(p);
    });
    this.onEvent(Buffer.concat(joined).toString('utf8'));
  }
}
