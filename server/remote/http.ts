// http.ts - the transport of the remote backend: one JSON request, or one request whose
// answer is a server-sent-event stream, to an OpenAI-compatible server over Node's http or
// https, with a timeout for connecting, for the answer to start and between two events,
// and an AbortSignal that closes the connection (which is how a remote generation is
// cancelled). Every byte it reads is bounded (LIMITS): an endless or oversized answer is
// refused naming the route and the byte counts, never buffered. Every failure becomes a
// RemoteError whose reason says what the user can do about it, with the server's own
// message. Headers are never logged (the API key travels in one). It knows nothing about
// completions, chat or which server answers (backend.ts, profile.ts do).
import * as http from 'node:http';
import * as https from 'node:https';
import { SseLimitError, SseParser } from './sse';

export type RemoteErrorReason =
  /** No connection: refused, unknown host, network down, reset before an answer. */
  | 'unreachable'
  /** 401 or 403. */
  | 'unauthorized'
  /** 404 for the model. */
  | 'model-missing'
  /** 404 for the route: not an OpenAI-compatible server at that URL. */
  | 'not-found'
  /** 503 because the server is still loading its model (llama-server says so). */
  | 'loading'
  /** 429 or another 503: the server queues no more. */
  | 'busy'
  /** 400 because the prompt is longer than the model's context. */
  | 'context'
  /** Any other 4xx. */
  | 'bad-request'
  /** 5xx, or an error event in the stream. */
  | 'server'
  /** Nothing arrived within the timeout. */
  | 'timeout'
  /** The answer is not what the API promises (not JSON, a stream cut short). */
  | 'protocol'
  /** The answer, a line or an event of it is larger than anything the API sends. */
  | 'too-large'
  /** The caller aborted. */
  | 'aborted';

export class RemoteError extends Error {
  constructor(
    readonly reason: RemoteErrorReason,
    message: string,
    /** The HTTP status, when the server answered. */
    readonly httpStatus?: number,
    /** The server's own message, when it sent one. */
    readonly serverMessage?: string,
  ) {
    super(message);
    this.name = 'RemoteError';
  }
}

/** The most bytes read of each kind of answer. The largest real ones: `/props` of
 * llama-server with its chat template (tens of KB), `/v1/models` with many adapters. */
export const LIMITS = {
  /** A JSON answer (`/v1/models`, `/props`). */
  jsonBytes: 4 << 20,
  /** The body of an HTTP error; the rest is not read. */
  errorBytes: 64 << 10,
  /** One line, and one event, of a server-sent-event stream. */
  sse: { lineBytes: 1 << 20, eventBytes: 1 << 20 },
};

export interface RequestOptions {
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  timeoutMs: number;
  /** Aborting closes the connection; the call rejects with reason `aborted`. */
  signal?: AbortSignal;
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/** `url` without user name and password, for messages and logs. */
export function displayUrl(url: URL): string {
  const u = new URL(url.href);
  u.username = '';
  u.password = '';
  return u.href.replace(/\/$/, '');
}

export interface ServerError {
  message: string;
  /** OpenAI's string code (`context_length_exceeded`), or the numeric one as text. */
  code?: string;
  /** llama-server's and vLLM's error type (`exceed_context_size_error`, `BadRequestError`). */
  type?: string;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);

/**
 * The server's error from a body: OpenAI's, llama-server's and vLLM's {error:{message,type,
 * code}}, vLLM's and SGLang's auth answer {error:"Unauthorized"}, SGLang's {object:"error",
 * message,type,code}, FastAPI's {detail}, or the text itself.
 */
export function serverError(text: string): ServerError {
  try {
    const v = JSON.parse(text) as { error?: unknown; message?: unknown; detail?: unknown; type?: unknown; code?: unknown } | null;
    const e = v?.error as { message?: unknown; code?: unknown; type?: unknown } | string | null | undefined;
    if (e && typeof e === 'object' && typeof e.message === 'string') return { message: e.message, code: str(e.code), type: str(e.type) };
    if (typeof e === 'string') return { message: e };
    if (typeof v?.message === 'string') return { message: v.message, code: str(v.code), type: str(v.type) };
    if (typeof v?.detail === 'string') return { message: v.detail };
  } catch {
    // not JSON: the text itself
  }
  const t = text.trim();
  return { message: t.length > 300 ? `${t.slice(0, 300)}…` : t };
}

/** How each server words a prompt past the context (docs/REMOTE.md's table): vLLM "the
 * model's context length is only N", "maximum context length", "maximum model length";
 * SGLang "longer than the model's context length"; llama-server "exceeds the available
 * context size"; k3 serve "maximum context length". */
const CONTEXT_WORDS = /context length|maximum context|context window|context size|maximum model length|too long/i;

/** Whether the server's error says the prompt does not fit the model's context. */
export function isContextError(e: ServerError): boolean {
  return e.code === 'context_length_exceeded' || e.type === 'exceed_context_size_error' || CONTEXT_WORDS.test(e.message);
}

/** The context size an overflow message names, when it names one ("context size (512
 * tokens)", "context length is only 4096 tokens", "maximum context length is 8192",
 * "context length (2048 tokens)", "maximum model length of 4096"). */
export function contextFromMessage(message: string): number | undefined {
  const m =
    /context (?:size|length|window) (?:is (?:only )?|of )?\(?(\d+)(?: tokens)?\)?/i.exec(message) ??
    /maximum (?:context length|model length) (?:is |of )?(\d+)/i.exec(message);
  const n = m ? Number(m[1]) : NaN;
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/** What an HTTP error status means for the user; the server's message is kept. */
export function statusError(status: number, body: string, what: string): RemoteError {
  const e = serverError(body);
  const said = e.message ? `: ${e.message}` : '';
  const err = (reason: RemoteErrorReason, message: string) => new RemoteError(reason, message, status, e.message || undefined);
  if (status === 401 || status === 403) return err('unauthorized', `${what} was refused (HTTP ${status}): the API key is missing or wrong${said}`);
  if (status === 404) {
    const model = e.code === 'model_not_found' || /model/i.test(e.message);
    return model
      ? err('model-missing', `${what}: the server does not serve that model (HTTP 404)${said}`)
      : err('not-found', `${what}: no such route (HTTP 404); is the endpoint an OpenAI-compatible API?${said}`);
  }
  if (status === 503 && /loading(?: the)? model/i.test(e.message)) return err('loading', `${what}: the server is loading its model (HTTP 503)${said}`);
  if (status === 429 || status === 503) return err('busy', `${what}: the server is busy (HTTP ${status})${said}`);
  if ((status === 400 || status === 413) && isContextError(e)) return err('context', `${what}: the prompt is longer than the model's context (HTTP ${status})${said}`);
  if (status >= 400 && status < 500) return err('bad-request', `${what} was rejected (HTTP ${status})${said}`);
  return err('server', `${what} failed on the server (HTTP ${status})${said}`);
}

/** An error event inside a stream (`data: {"error": …}`): the server's failure, kept in
 * its own words. */
function eventError(payload: string, what: string): RemoteError {
  const e = serverError(payload);
  const tag = [e.code, e.type].filter(Boolean).join(' ');
  const said = `${tag ? ` (${tag})` : ''}: ${e.message || payload.slice(0, 300)}`;
  if (isContextError(e)) return new RemoteError('context', `${what}: the prompt is longer than the model's context${said}`, undefined, e.message);
  return new RemoteError('server', `${what}: the server failed in the middle of the reply${said}`, undefined, e.message);
}

interface Exchange {
  /** Called with the response once its head arrived (status < 300); `touch` restarts the
   * timeout (called for each sign of progress); returns when the body ended. */
  onResponse(res: http.IncomingMessage, touch: () => void): Promise<void>;
}

/** One HTTP exchange with the timeouts, abort, error classification and error-body bound
 * shared by both calls. */
function exchange(url: URL, method: 'GET' | 'POST', body: unknown, opts: RequestOptions, accept: string, handler: Exchange): Promise<void> {
  const what = `${method} ${displayUrl(url)}`;
  return new Promise<void>((resolve, reject) => {
    if (opts.signal?.aborted) {
      reject(new RemoteError('aborted', `${what} was cancelled`));
      return;
    }
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { Accept: accept };
    if (payload) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(payload.length);
    }
    if (opts.apiKey) headers.Authorization = `Bearer ${opts.apiKey}`;
    const lib = url.protocol === 'https:' ? https : http;
    let settled = false;
    let answered = false;
    let timer: NodeJS.Timeout | undefined;
    let response: http.IncomingMessage | undefined;
    const finish = (e?: RemoteError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (e) {
        req.destroy();
        reject(e);
      } else {
        // An answer the handler is done with but the server still sends (bytes after
        // [DONE]) is not read on.
        if (response && !response.complete) req.destroy();
        resolve();
      }
    };
    const touch = (): void => {
      clearTimeout(timer);
      timer = setTimeout(
        () =>
          finish(
            new RemoteError('timeout', answered ? `${what}: nothing arrived for ${opts.timeoutMs} ms` : `${what}: no answer within ${opts.timeoutMs} ms`),
          ),
        opts.timeoutMs,
      );
    };
    const onAbort = (): void => finish(new RemoteError('aborted', `${what} was cancelled`));
    const req = lib.request(url, { method, headers }, (res) => {
      answered = true;
      response = res;
      touch();
      const status = res.statusCode ?? 0;
      if (status >= 300) {
        // The first LIMITS.errorBytes say what went wrong; the rest is not read.
        const pieces: Buffer[] = [];
        let bytes = 0;
        const done = (): void => finish(statusError(status, Buffer.concat(pieces).toString('utf8'), what));
        res.on('data', (d: Buffer) => {
          const room = LIMITS.errorBytes - bytes;
          if (room > 0) pieces.push(d.subarray(0, room));
          bytes += d.length;
          if (bytes >= LIMITS.errorBytes) done();
        });
        res.on('end', done);
        res.on('error', done);
        return;
      }
      res.on('aborted', () => finish(new RemoteError('protocol', `${what}: the server closed the connection before the answer ended`)));
      handler.onResponse(res, touch).then(
        () => finish(),
        (e: unknown) => finish(e instanceof RemoteError ? e : new RemoteError('protocol', `${what}: ${(e as Error).message}`)),
      );
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (!answered && e.code && NETWORK_CODES.has(e.code)) finish(new RemoteError('unreachable', `${what}: cannot reach the server (${e.code})`));
      else if (answered) finish(new RemoteError('protocol', `${what}: the connection failed while the answer arrived (${e.code ?? e.message})`));
      else finish(new RemoteError('unreachable', `${what}: ${e.message}`));
    });
    opts.signal?.addEventListener('abort', onAbort);
    touch();
    req.end(payload);
  });
}

/** A request whose answer is one JSON value of at most LIMITS.jsonBytes; its head must come
 * within timeoutMs of the request, and all of its body within timeoutMs of the head. */
export async function requestJson(url: URL, method: 'GET' | 'POST', body: unknown, opts: RequestOptions): Promise<unknown> {
  const what = `${method} ${displayUrl(url)}`;
  const limit = LIMITS.jsonBytes;
  const tooLarge = (n: number, how: string) =>
    new RemoteError('too-large', `${what}: the answer is over ${limit} bytes (${how} ${n}); no OpenAI-compatible server sends that`);
  let value: unknown;
  await exchange(url, method, body, opts, 'application/json', {
    onResponse: (res) =>
      new Promise<void>((resolve, reject) => {
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > limit) {
          reject(tooLarge(declared, 'Content-Length'));
          return;
        }
        const pieces: Buffer[] = [];
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          if (bytes > limit) {
            res.removeAllListeners('data');
            reject(tooLarge(bytes, 'read so far'));
            return;
          }
          pieces.push(d);
        });
        res.on('end', () => {
          try {
            value = JSON.parse(Buffer.concat(pieces, bytes).toString('utf8'));
            resolve();
          } catch {
            reject(new RemoteError('protocol', `${what}: the answer is not JSON (${bytes} bytes)`));
          }
        });
      }),
  });
  return value;
}

/**
 * POSTs body and reads the answer as server-sent events: each `data:` payload is parsed as
 * JSON and given to onEvent, in order, until `data: [DONE]`. A payload holding `error` (how
 * OpenAI-compatible servers report a failure after the stream began) rejects with the
 * server's message (reason `server`, or `context`); a stream that ends without [DONE]
 * rejects with reason `protocol`; a line or an event past LIMITS.sse with `too-large`. The
 * timeout runs between two events: keep-alive comments do not count as progress. onEvent
 * returning 'close' ends the stream there, as [DONE] would (the caller has all it will take).
 */
export async function streamEvents(url: URL, body: unknown, opts: RequestOptions, onEvent: (data: unknown) => void | 'close'): Promise<void> {
  const what = `POST ${displayUrl(url)}`;
  await exchange(url, 'POST', body, opts, 'text/event-stream', {
    onResponse: (res, touch) =>
      new Promise<void>((resolve, reject) => {
        let done = false;
        let events = 0;
        let bytes = 0;
        const parser = new SseParser(LIMITS.sse, (payload) => {
          if (payload === '' || done) return;
          touch();
          if (payload === '[DONE]') {
            done = true;
            return;
          }
          events++;
          let value: unknown;
          try {
            value = JSON.parse(payload);
          } catch {
            throw new RemoteError('protocol', `${what}: streamed event ${events} is not JSON (${Buffer.byteLength(payload)} bytes)`);
          }
          const err = (value as { error?: unknown } | null)?.error;
          if (err !== undefined && err !== null) throw eventError(payload, what);
          if (onEvent(value) === 'close') done = true;
        });
        const fail = (e: unknown): void => {
          res.removeAllListeners('data');
          if (e instanceof SseLimitError) reject(new RemoteError('too-large', `${what}: ${e.message}, after ${bytes} bytes and ${events} events`));
          else reject(e);
        };
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          try {
            parser.push(chunk);
            if (done) resolve(); // the server ends the stream itself; anything after [DONE] is ignored
          } catch (e) {
            fail(e);
          }
        });
        res.on('end', () => {
          try {
            if (!done) parser.end();
          } catch (e) {
            fail(e);
            return;
          }
          if (done) resolve();
          else reject(new RemoteError('protocol', `${what}: the server closed the stream before the reply ended (${events} events, no [DONE])`));
        });
      }),
  });
}
