// core.ts - what the fake servers share: an HTTP server on 127.0.0.1 (a free port, or a
// given one) that records every request (route, whether it carried a key, JSON body) and
// lets a test await one by predicate; the generation replies a test scripts (pieces, then
// a clean end, an error event, or a stall with keep-alive pings), written as each server
// writes its stream; and a token count shared by all fakes (3 characters a token, the
// remote backend's own estimate without a tokenizer, so a prompt's size is predictable);
// and the tokenizer a fake's tokenize route answers with, when a test gives it one.
// The per-server files decide what to answer: llama-server.ts, vllm.ts, sglang.ts.
import { once } from 'node:events';
import * as http from 'node:http';
import type * as net from 'node:net';

export interface Recorded {
  method: string;
  path: string;
  /** The bearer token sent, if any. */
  key: string | undefined;
  /** The JSON body, if any. */
  body: Record<string, unknown> | undefined;
  /** The status the fake answered. */
  status?: number;
  /** Resolves when the answer's connection closes (the reply ended, or the client hung up). */
  closed?: Promise<void>;
}

/** One piece of a streamed reply. */
export interface Piece {
  content?: string;
  reasoning?: string;
}

/** How a scripted generation reply goes: its pieces, then how it ends. */
export interface Script {
  pieces: Piece[];
  /** `done`: usage and [DONE]; `error`: the server's mid-stream error event, with this
   * message; `stall`: nothing more but keep-alive comments until the client goes. */
  end: { done: true } | { error: string } | { stall: true };
}

export const DEFAULT_SCRIPT: Script = { pieces: [{ reasoning: 'Think. ' }, { content: 'Hello' }, { content: ' there.' }], end: { done: true } };

/** The tokenizer a fake server tokenizes with (its tokenize route): a real one opened by
 * the test, or any function of the text. Without one the fake has no tokenize route. */
export type ServerTokenizer = (text: string) => number[];

/** Tokens a text takes at the fakes' rate (what the remote backend estimates without a tokenizer). */
export function tokensOf(text: string): number {
  return Math.ceil(Array.from(text).length / 3);
}

/** Prompt tokens of a completion or chat request body. */
export function promptTokens(body: Record<string, unknown>): number {
  if (Array.isArray(body.prompt)) return body.prompt.length;
  if (typeof body.prompt === 'string') return tokensOf(body.prompt);
  const messages = Array.isArray(body.messages) ? (body.messages as Array<{ content?: unknown }>) : [];
  return messages.reduce((n, m) => n + (typeof m.content === 'string' ? tokensOf(m.content) : 0) + 4, 0);
}

export interface FakeServer {
  port: number;
  base: string;
  requests: Recorded[];
  /** Generation replies to give, in order; DEFAULT_SCRIPT when empty. */
  scripts: Script[];
  /** Resolves with the first request (seen or to come) that satisfies pred. */
  waitForRequest(pred: (r: Recorded) => boolean): Promise<Recorded>;
  close(): Promise<void>;
}

export type Handler = (r: Recorded, res: http.ServerResponse, fake: FakeServer) => void;

/** Answers JSON. */
export function json(res: http.ServerResponse, status: number, value: unknown): void {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length) });
  res.end(body);
}

/** Starts a server-sent-event answer. */
export function startEvents(res: http.ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
}

export function event(res: http.ServerResponse, value: unknown): void {
  res.write(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`);
}

/** Keeps sending keep-alive comments (llama-server's ping) until the client closes. */
export function stallWithPings(res: http.ServerResponse): void {
  const timer = setInterval(() => res.write(':\n\n'), 20);
  res.on('close', () => clearInterval(timer));
}

/** The bearer token of a request. */
function bearer(req: http.IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  return h?.startsWith('Bearer ') ? h.slice(7) : undefined;
}

export async function startFake(handler: Handler, port = 0): Promise<FakeServer> {
  const requests: Recorded[] = [];
  const waiters: Array<() => void> = [];
  const sockets = new Set<net.Socket>();
  const fake: FakeServer = {
    port: 0,
    base: '',
    requests,
    scripts: [],
    async waitForRequest(pred) {
      for (let seen = 0; ; ) {
        for (; seen < requests.length; seen++) if (pred(requests[seen])) return requests[seen];
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      let body: Record<string, unknown> | undefined;
      try {
        body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : undefined;
      } catch {
        body = undefined;
      }
      const r: Recorded = { method: req.method ?? '', path: (req.url ?? '').split('?')[0], key: bearer(req), body };
      res.on('finish', () => {
        r.status = res.statusCode;
        for (const w of waiters.splice(0)) w();
      });
      r.status = undefined;
      r.closed = new Promise<void>((resolve) => res.on('close', () => resolve()));
      requests.push(r);
      handler(r, res, fake);
      if (res.headersSent) r.status = res.statusCode;
      for (const w of waiters.splice(0)) w();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  fake.port = (server.address() as net.AddressInfo).port;
  fake.base = `http://127.0.0.1:${fake.port}`;
  return fake;
}

/** The next scripted generation reply. */
export function nextScript(fake: FakeServer): Script {
  return fake.scripts.shift() ?? DEFAULT_SCRIPT;
}
