// http.ts - the transport of the remote backend: one JSON request, or one request whose
// answer is a server-sent-event stream, to an OpenAI-compatible server over Node's http or
// https, with a timeout for connecting, for the answer to start and between two events,
// and an AbortSignal that closes the connection (which is how a remote generation is
// cancelled). Every failure becomes a RemoteError whose reason says what the user can do
// about it. Headers are never logged (the API key travels in one). It knows nothing about
// completions or chat (api.ts does).
import * as http from 'node:http';
import * as https from 'node:https';

export type RemoteErrorReason =
  /** No connection: refused, unknown host, network down, reset before an answer. */
  | 'unreachable'
  /** 401 or 403. */
  | 'unauthorized'
  /** 404 for the model. */
  | 'model-missing'
  /** 404 for the route: not an OpenAI-compatible server at that URL. */
  | 'not-found'
  /** 429 or 503: the server queues no more. */
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
  /** The caller aborted. */
  | 'aborted';

export class RemoteError extends Error {
  constructor(
    readonly reason: RemoteErrorReason,
    message: string,
    /** The HTTP status, when the server answered. */
    readonly httpStatus?: number,
  ) {
    super(message);
    this.name = 'RemoteError';
  }
}

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

/** The message of an error body: OpenAI's {error:{message}}, FastAPI's {detail}, or the text. */
function errorMessage(text: string): { message: string; code?: string } {
  try {
    const v = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } | string; message?: unknown; detail?: unknown };
    if (v && typeof v.error === 'object' && v.error !== null && typeof v.error.message === 'string') {
      return { message: v.error.message, code: typeof v.error.code === 'string' ? v.error.code : undefined };
    }
    if (typeof v?.error === 'string') return { message: v.error };
    if (typeof v?.message === 'string') return { message: v.message };
    if (typeof v?.detail === 'string') return { message: v.detail };
  } catch {
    // not JSON: the text itself
  }
  const t = text.trim();
  return { message: t.length > 300 ? `${t.slice(0, 300)}…` : t };
}

/** What an HTTP error status means for the user. */
export function statusError(status: number, body: string, what: string): RemoteError {
  const { message, code } = errorMessage(body);
  const said = message ? `: ${message}` : '';
  if (status === 401 || status === 403) return new RemoteError('unauthorized', `${what} was refused (HTTP ${status}): the API key is missing or wrong${said}`, status);
  if (status === 404) {
    const model = code === 'model_not_found' || /model/i.test(message);
    return model
      ? new RemoteError('model-missing', `${what}: the server does not serve that model (HTTP 404)${said}`, status)
      : new RemoteError('not-found', `${what}: no such route (HTTP 404); is the endpoint an OpenAI-compatible API?${said}`, status);
  }
  if (status === 429 || status === 503) return new RemoteError('busy', `${what}: the server is busy (HTTP ${status})${said}`, status);
  if (status === 400 && (code === 'context_length_exceeded' || /context length|maximum context|context window|too long/i.test(message))) {
    return new RemoteError('context', `${what}: the prompt is longer than the model's context (HTTP 400)${said}`, status);
  }
  if (status >= 400 && status < 500) return new RemoteError('bad-request', `${what} was rejected (HTTP ${status})${said}`, status);
  return new RemoteError('server', `${what} failed on the server (HTTP ${status})${said}`, status);
}

interface Exchange {
  /** Called with the response once its head arrived (status < 300); returns when the body ended. */
  onResponse(res: http.IncomingMessage, touch: () => void, fail: (e: RemoteError) => void): Promise<void>;
}

/** One HTTP exchange with the timeouts, abort and error classification shared by both calls. */
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
    const finish = (e?: RemoteError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (e) {
        req.destroy();
        reject(e);
      } else resolve();
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
      touch();
      const status = res.statusCode ?? 0;
      if (status >= 300) {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (text.length < 65536) text += d;
        });
        res.on('end', () => finish(statusError(status, text, what)));
        res.on('error', () => finish(statusError(status, text, what)));
        return;
      }
      res.on('aborted', () => finish(new RemoteError('protocol', `${what}: the server closed the connection before the answer ended`)));
      handler.onResponse(res, touch, (e) => finish(e)).then(
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

/** A request whose answer is one JSON value. */
export async function requestJson(url: URL, method: 'GET' | 'POST', body: unknown, opts: RequestOptions): Promise<unknown> {
  let value: unknown;
  await exchange(url, method, body, opts, 'application/json', {
    onResponse: (res, touch) =>
      new Promise<void>((resolve, reject) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          touch();
          text += d;
        });
        res.on('end', () => {
          try {
            value = JSON.parse(text);
            resolve();
          } catch {
            reject(new RemoteError('protocol', `${method} ${displayUrl(url)}: the answer is not JSON`));
          }
        });
      }),
  });
  return value;
}

/**
 * POSTs body and reads the answer as server-sent events: each `data:` payload is parsed as
 * JSON and given to onEvent, in order, until `data: [DONE]`. A payload holding `error` (how
 * OpenAI-compatible servers report a failure after the stream began) rejects with reason
 * `server`; a stream that ends without [DONE] rejects with reason `protocol`.
 */
export async function streamEvents(url: URL, body: unknown, opts: RequestOptions, onEvent: (data: unknown) => void): Promise<void> {
  const what = `POST ${displayUrl(url)}`;
  await exchange(url, 'POST', body, opts, 'text/event-stream', {
    onResponse: (res, touch) =>
      new Promise<void>((resolve, reject) => {
        let pending = '';
        let data: string[] = [];
        let done = false;
        const dispatch = (): void => {
          const payload = data.join('\n');
          data = [];
          if (payload === '' || done) return;
          if (payload === '[DONE]') {
            done = true;
            return;
          }
          let value: unknown;
          try {
            value = JSON.parse(payload);
          } catch {
            throw new RemoteError('protocol', `${what}: a streamed event is not JSON`);
          }
          const err = (value as { error?: unknown } | null)?.error;
          if (err !== undefined && err !== null) {
            const { message } = errorMessage(payload);
            throw new RemoteError('server', `${what}: the server failed while answering: ${message}`);
          }
          onEvent(value);
        };
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          touch();
          pending += chunk;
          try {
            for (let nl = pending.indexOf('\n'); nl >= 0 && !done; nl = pending.indexOf('\n')) {
              const line = pending.slice(0, nl).replace(/\r$/, '');
              pending = pending.slice(nl + 1);
              if (line === '') dispatch();
              else if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
              // other fields (event:, id:, retry:) and comments (':') carry nothing we use
            }
            if (done) resolve(); // the server ends the stream itself; anything after [DONE] is ignored
          } catch (e) {
            reject(e);
          }
        });
        res.on('end', () => {
          try {
            if (!done && data.length) dispatch();
          } catch (e) {
            reject(e);
            return;
          }
          if (done) resolve();
          else reject(new RemoteError('protocol', `${what}: the server closed the stream before the reply ended`));
        });
      }),
  });
}
