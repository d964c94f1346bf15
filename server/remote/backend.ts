// backend.ts - the remote backend's state in the server: which OpenAI-compatible server and
// model (k3.remote.*), whether it answers (a health check, `GET /v1/models`, at start,
// after a new API key, and again every few seconds while it does not), the phase and
// problem the status reports in the local engine's terms, and the one way a job talks to
// it: a streamed request that job.stop() and job.cancel() end by closing the connection.
// Failures become K3Failures with the same codes the local engine uses. The API key is
// kept here and sent in a header; it is never logged or put in a message. It does not lay
// out prompts or parse replies (completion.ts, chat.ts do).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CompletionBackend } from '../completion/backend';
import { Tokenizer } from '../engine/tokenizer';
import { action, Cancelled, K3Failure } from '../errors';
import type { EnginePhase, JobStatus, K3Problem, RemoteOptions, RemoteStatus } from '../protocol';
import type { Job } from '../scheduler';
import { remoteCompletionBackend } from './completion';
import { displayUrl, RemoteError, requestJson, streamEvents } from './http';

export const DEFAULT_TIMEOUT_MS = 60_000;
/** While the server does not answer, it is checked again after this long, doubling up to the max. */
const RECHECK_MS = 2_000;
const RECHECK_MAX_MS = 30_000;

export interface RemoteEvents {
  /** The phase, the problem or the running jobs changed. */
  changed(): void;
  log(message: string): void;
  /** A problem that fails nothing but that the user should know (k3/didReportProblem). */
  warn(problem: K3Problem): void;
}

/** Whether a URL's host is this machine: localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(url: URL): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** The API's base URL: `endpoint` with `/v1` appended unless its path ends with it. */
export function apiBase(endpoint: string): URL {
  let url: URL;
  try {
    url = new URL(endpoint.trim());
  } catch {
    throw new RemoteError('unreachable', `k3.remote.endpoint ${JSON.stringify(endpoint)} is not a URL (e.g. http://127.0.0.1:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new RemoteError('unreachable', `k3.remote.endpoint must be an http:// or https:// URL, not ${url.protocol}`);
  }
  url.search = '';
  url.hash = '';
  const p = url.pathname.replace(/\/+$/, '');
  url.pathname = p.endsWith('/v1') ? `${p}/` : `${p}/v1/`;
  return url;
}

/** The user-facing failure for a remote error (Cancelled for an abort). */
export function remoteFailure(e: RemoteError, where: string): K3Failure | Cancelled {
  const detail = e.message;
  switch (e.reason) {
    case 'aborted':
      return new Cancelled();
    case 'unreachable':
      return new K3Failure('remote-unreachable', `The remote K3 server at ${where} cannot be reached.`, 'unreachable', detail);
    case 'unauthorized':
      return new K3Failure('remote-unauthorized', `The remote K3 server at ${where} refused the API key (K3: Set Remote API Key).`, 'unauthorized', detail);
    case 'model-missing':
      return new K3Failure('remote-model-missing', `The remote K3 server at ${where} does not serve that model (k3.remote.model).`, 'model-missing', detail);
    case 'not-found':
      return new K3Failure('remote-failed', `${where} does not answer like an OpenAI-compatible API (is the endpoint right?).`, 'not-found', detail);
    case 'timeout':
      return new K3Failure('remote-timeout', `The remote K3 server at ${where} did not answer in time (k3.remote.timeoutMs).`, 'timeout', detail);
    case 'busy':
      return new K3Failure('busy', `The remote K3 server at ${where} is busy; try again.`, 'busy', detail);
    case 'context':
      return new K3Failure('context-full', `The text is longer than the remote model's context.`, 'context', detail);
    case 'bad-request':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} rejected the request.`, 'bad-request', detail);
    case 'protocol':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} stopped answering in the middle of a reply.`, 'protocol', detail);
    case 'server':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} failed.`, 'server', detail);
  }
}

/** The tokenizer in dir, if the folder has one (tiktoken.model and tokenizer_config.json). */
async function openTokenizer(dir: string | undefined, log: (m: string) => void): Promise<Tokenizer | undefined> {
  if (!dir || !fs.existsSync(path.join(dir, 'tiktoken.model')) || !fs.existsSync(path.join(dir, 'tokenizer_config.json'))) return undefined;
  try {
    return await Tokenizer.openAsync(dir);
  } catch (e) {
    log(`remote backend: the tokenizer in ${dir} cannot be used (${(e as Error).message}); prompts go as text`);
    return undefined;
  }
}

/** A job's request in flight: stop() and cancel() close its connection. */
class RemoteRequest {
  readonly abort = new AbortController();
  stopped = false;

  stop(): void {
    this.stopped = true;
    this.abort.abort();
  }

  cancel(): void {
    this.abort.abort();
  }
}

export class RemoteBackend {
  phase: EnginePhase = 'loading';
  problem: K3Problem | undefined;
  /** The model id in use: the configured one, or the first the server listed. */
  model: string | undefined;
  /** The model's context, when the server says (vLLM and k3 serve list max_model_len). */
  maxContext = Number.MAX_SAFE_INTEGER;
  /** The model's tokenizer, when modelPath holds one: prompts then go as token ids. */
  tokenizer: Tokenizer | undefined;
  readonly timeoutMs: number;
  private readonly base: URL | undefined;
  private apiKey: string | undefined;
  private readonly jobs = new Set<Job>();
  private recheckTimer: NodeJS.Timeout | undefined;
  private recheckMs = RECHECK_MS;
  private checking: Promise<void> | undefined;
  private disposed = false;

  constructor(
    private readonly options: RemoteOptions,
    private readonly tokenizerDir: string | undefined,
    private readonly events: RemoteEvents,
  ) {
    this.timeoutMs = options.timeoutMs && options.timeoutMs > 0 ? options.timeoutMs : DEFAULT_TIMEOUT_MS;
    this.apiKey = options.apiKey || undefined;
    try {
      this.base = apiBase(options.endpoint ?? '');
    } catch (e) {
      this.base = undefined;
      this.setProblem(e as RemoteError);
    }
  }

  /** The endpoint as shown to the user (no credentials). */
  get where(): string {
    return this.base ? displayUrl(this.base) : String(this.options.endpoint);
  }

  status(): RemoteStatus {
    const s: RemoteStatus = { endpoint: this.where, prompts: this.tokenizer ? 'ids' : 'text' };
    if (this.model) s.model = this.model;
    return s;
  }

  /** A job running a request now, for the status. */
  running(now = Date.now()): JobStatus | undefined {
    for (const j of this.jobs) return j.status(now);
    return undefined;
  }

  isRunning(job: Job): boolean {
    return this.jobs.has(job);
  }

  /** Opens the tokenizer (if any) and checks the server. */
  async start(): Promise<void> {
    this.tokenizer = await openTokenizer(this.tokenizerDir, this.events.log);
    this.events.log(
      `remote backend: ${this.where}, model ${this.options.model || '(the first the server lists)'}, prompts as ${this.tokenizer ? 'token ids' : 'text'}`,
    );
    this.warnIfKeyInClear();
    await this.check();
  }

  /** Replaces the API key and checks the server again. */
  async setApiKey(key: string): Promise<EnginePhase> {
    this.apiKey = key || undefined;
    this.warnIfKeyInClear();
    await this.check();
    return this.phase;
  }

  /** Says so when the API key is about to go unencrypted (http://) to another machine: it
   * is still sent (the user chose the endpoint), but anyone on the way can read it. */
  private warnIfKeyInClear(): void {
    if (!this.apiKey || !this.base || this.base.protocol !== 'http:' || isLoopbackHost(this.base)) return;
    this.events.warn({
      kind: 'remote-insecure',
      action: action('open-remote-settings'),
      message:
        `The remote API key is sent unencrypted to ${this.base.host}: k3.remote.endpoint is http://, and that host is ` +
        'not this machine, so anyone on the network path can read the key. Use an https:// endpoint, or an SSH tunnel to 127.0.0.1.',
      detail: this.where,
    });
  }

  /** GET /v1/models: reachable, key accepted, model served. Sets the phase; never throws. */
  check(): Promise<void> {
    this.checking ??= this.runCheck().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async runCheck(): Promise<void> {
    clearTimeout(this.recheckTimer);
    this.recheckTimer = undefined;
    if (!this.base) return;
    try {
      const listed = (await requestJson(new URL('models', this.base), 'GET', undefined, this.requestOptions())) as {
        data?: Array<{ id?: unknown; max_model_len?: unknown }>;
      };
      const models = Array.isArray(listed?.data) ? listed.data.filter((m) => typeof m?.id === 'string') : [];
      const wanted = this.options.model || undefined;
      const found = wanted ? models.find((m) => m.id === wanted) : models[0];
      if (!found) {
        const names = models.map((m) => m.id).join(', ') || 'none';
        throw new RemoteError('model-missing', wanted ? `the server lists ${names}, not ${wanted}` : 'the server lists no model');
      }
      this.model = found.id as string;
      if (typeof found.max_model_len === 'number' && found.max_model_len > 0) this.maxContext = found.max_model_len;
      this.healthy();
    } catch (e) {
      this.setProblem(e instanceof RemoteError ? e : new RemoteError('protocol', (e as Error).message));
    }
  }

  /** The server answered as it should: ready again. */
  private healthy(): void {
    this.recheckMs = RECHECK_MS;
    if (this.phase === 'ready' && !this.problem) return;
    if (this.phase !== 'loading') this.events.log(`remote backend: ${this.where} answers again`);
    this.phase = 'ready';
    this.problem = undefined;
    this.events.changed();
  }

  /** Records why the server cannot be used, and checks again later. */
  private setProblem(e: RemoteError): void {
    const f = remoteFailure(e, this.where);
    if (!(f instanceof K3Failure)) return;
    this.phase = 'error';
    this.problem = f.problem();
    this.events.log(`remote backend: ${f.message} [${e.message}]`);
    this.events.changed();
    if (this.base && !this.disposed) {
      clearTimeout(this.recheckTimer);
      this.recheckTimer = setTimeout(() => void this.check(), this.recheckMs);
      this.recheckTimer.unref();
      this.recheckMs = Math.min(RECHECK_MAX_MS, this.recheckMs * 2);
    }
  }

  private requestOptions(signal?: AbortSignal): { apiKey?: string; timeoutMs: number; signal?: AbortSignal } {
    return { ...(this.apiKey ? { apiKey: this.apiKey } : {}), timeoutMs: this.timeoutMs, ...(signal ? { signal } : {}) };
  }

  /** The model id to send: the one found by the health check, else the configured one. */
  private modelId(): string | undefined {
    return this.model ?? (this.options.model || undefined);
  }

  /**
   * POSTs body (with the model id added) to `route` ("completions", "chat/completions") for
   * `job`, streaming, and gives every event to onEvent. Resolves `done` when the server
   * ended the reply, `stopped` after job.stop(); rejects with Cancelled after job.cancel()
   * and with a K3Failure when the server fails (the status says so until it answers again).
   */
  async stream(job: Job, route: string, body: Record<string, unknown>, onEvent: (data: unknown) => void): Promise<'done' | 'stopped'> {
    if (!this.base) throw new K3Failure(this.problem?.kind ?? 'remote-unreachable', this.problem?.message ?? 'No remote endpoint is set.');
    const request = new RemoteRequest();
    job.active = request;
    this.jobs.add(job);
    this.events.changed();
    try {
      job.throwIfCancelled();
      const model = this.modelId();
      await streamEvents(new URL(route, this.base), { ...(model ? { model } : {}), ...body }, this.requestOptions(request.abort.signal), onEvent);
      this.healthy();
      return 'done';
    } catch (e) {
      if (e instanceof RemoteError && e.reason === 'aborted') {
        if (job.cancelled) throw new Cancelled(job.cancelReason);
        if (request.stopped) return 'stopped';
      }
      if (e instanceof Cancelled) throw e;
      const err = e instanceof RemoteError ? e : new RemoteError('protocol', (e as Error).message);
      const f = remoteFailure(err, this.where);
      // A server that cannot be reached, or that fails mid-reply, is unavailable until it answers again.
      if (f instanceof K3Failure && (err.reason === 'unreachable' || err.reason === 'timeout' || err.reason === 'protocol' || err.reason === 'unauthorized' || err.reason === 'model-missing')) {
        this.setProblem(err);
      }
      throw f;
    } finally {
      if (job.active === request) job.active = undefined;
      this.jobs.delete(job);
      this.events.changed();
    }
  }

  /** What runs completions: this server, with the tokenizer or an estimate of it. */
  completionBackend(): CompletionBackend {
    return remoteCompletionBackend(this);
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.recheckTimer);
    this.tokenizer?.close();
    this.tokenizer = undefined;
  }
}
