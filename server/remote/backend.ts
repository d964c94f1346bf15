// backend.ts - the remote backend's state in the server: which OpenAI-compatible server and
// model (k3.remote.*), whether it answers (a check at start, after a new API key, and again
// while it does not: `GET /v1/models`, then the API key on a route that server protects,
// profile.ts), the phase and problem the status reports in the local engine's terms, and
// the one way a job talks to it: a streamed request that job.stop() and job.cancel() end by
// closing the connection; and whether completion prompts may go as token ids, which only a
// check against the server decides (tokenizer-check.ts); and, for the server of the
// completions role, which route serves ghost text (`/v1/completions`, or llama-server's
// `/infill`, probed once per check: infill.ts). Failures become K3Failures with
// the same codes the local engine uses, and every one is logged with the server's own
// message. The API key is kept here
// and sent in a header; it is never logged or put in a message. It does not lay out
// prompts or parse replies (completion.ts, chat.ts do).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CompletionBackend } from '../completion/backend';
import { Tokenizer } from '../engine/tokenizer';
import { action, Cancelled, K3Failure } from '../errors';
import type {
  EnginePhase,
  JobStatus,
  K3Problem,
  RemoteOptions,
  RemoteRoute,
  RemoteServerKind,
  RemoteStatus,
} from '../../protocol/lsp';
import type { Job } from '../scheduler';
import { remoteCompletionBackend } from './completion';
import { contextFromMessage, displayUrl, RemoteError, requestJson, streamEvents } from './http';
import { chooseRoute, type InfillSupport, probeInfill, remoteInfillBackend, type RouteChoice } from './infill';
import { findModel, PROFILES, propsContext, readModelListing } from './profile';
import { checkTokenizer, type PromptVerdict } from './tokenizer-check';

export const DEFAULT_TIMEOUT_MS = 60_000;
/** While the server does not answer, it is checked again after this long, doubling up to the max. */
const RECHECK_MS = 2_000;
const RECHECK_MAX_MS = 30_000;
/** While the server loads its model it is asked this often: loading ends on its own, and
 * the user waits for it. */
const LOADING_POLL_MS = 1_000;
/** Reasons that make the server unusable until it answers a check again. */
const UNUSABLE = new Set<RemoteError['reason']>(['unreachable', 'timeout', 'protocol', 'too-large', 'unauthorized', 'model-missing', 'loading']);

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

/** " (the server says: …)" with the server's own words, clipped for a notification. */
function says(e: RemoteError): string {
  const m = e.serverMessage?.trim();
  if (!m) return '';
  return ` (the server says: ${m.length > 300 ? `${m.slice(0, 300)}…` : m})`;
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
    case 'loading':
      return new K3Failure('remote-loading', `The remote K3 server at ${where} is loading its model; it answers once that is done.`, 'loading', detail);
    case 'busy':
      return new K3Failure('busy', `The remote K3 server at ${where} is busy; try again.`, 'busy', detail);
    case 'context':
      return new K3Failure('context-full', `The text is longer than the remote model's context${says(e)}.`, 'context', detail);
    case 'bad-request':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} rejected the request${says(e)}.`, 'bad-request', detail);
    case 'protocol':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} stopped answering in the middle of a reply.`, 'protocol', detail);
    case 'too-large':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} sent more than an answer can hold; it was not read.`, 'too-large', detail);
    case 'server':
      return new K3Failure('remote-failed', `The remote K3 server at ${where} failed${says(e)}.`, 'server', detail);
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
  /** Closed because the request outlived its deadline. */
  expired = false;

  expire(): void {
    this.expired = true;
    this.abort.abort();
  }

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
  /** The model id in use: the configured one as the server lists it, or the first listed. */
  model: string | undefined;
  /** Tokens a prompt and its reply may take together: what the server lists (vLLM, SGLang,
   * k3 serve: `max_model_len`; llama-server: `meta.n_ctx`, or `/props`), or what its last
   * context-overflow error named; unbounded while unknown. */
  maxContext = Number.MAX_SAFE_INTEGER;
  /** The tokenizer modelPath holds, if any: prompts go as its ids only once the check
   * proved it is the server's (tokenizer-check.ts). */
  private localTokenizer: Tokenizer | undefined;
  /** Whether completion prompts go as ids or text, and why: text until a check proves
   * otherwise, so a request made before the check finished goes as text. */
  private verdict: PromptVerdict = { prompts: 'text', reason: 'the server has not been checked yet' };
  /** The verdict last written to the log. */
  private loggedVerdict = '';
  /** `k3.completions.remote.route` while this server serves the completions role
   * (ctx.ts sets it); undefined for a chat-only server. */
  routeSetting: RemoteRoute | undefined;
  /** Whether the server answers /infill: probed at each check of a llama-server that
   * serves completions, `no` after a refusal. */
  private infill: InfillSupport = { state: 'unknown', reason: 'the server has not been checked yet' };
  /** The route choice last written to the log. */
  private loggedRoute = '';
  readonly timeoutMs: number;
  private readonly base: URL | undefined;
  private apiKey: string | undefined;
  /** Which server answers, from its listing. */
  private server: RemoteServerKind | undefined;

  /** True when the server spells a healed prompt end itself (`k3 serve`'s `k3_heal`): token
   * healing needs the model's tokenizer here too, to find where to back the prompt off. */
  /** Which server answers, as its listing told (undefined: not known yet, or another). */
  get serverKind(): RemoteServerKind | undefined {
    return this.server;
  }

  get heals(): boolean {
    return this.server === 'k3-serve' && this.tokenizer !== undefined;
  }

  /** The tokenizer prompts are laid out and sent with: the local one, once proven to be
   * the server's; otherwise none (prompts go as text). */
  get tokenizer(): Tokenizer | undefined {
    return this.verdict.prompts === 'ids' ? this.localTokenizer : undefined;
  }
  /** Set while the server does not list k3.remote.model (or refused it with a 404):
   * requests fail with it without being sent, so status and requests say the same. */
  private modelProblem: RemoteError | undefined;
  private readonly jobs = new Set<Job>();
  private recheckTimer: NodeJS.Timeout | undefined;
  private recheckMs = RECHECK_MS;
  private checking: Promise<void> | undefined;
  /** The problem last written to the log, so a poll that fails the same way logs once. */
  private loggedProblem: string | undefined;
  /** Lines that say something once per server (how the key is checked). */
  private readonly notes = new Set<string>();
  /** The context the server's last overflow error named. */
  private learnedContext: number | undefined;
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
    const s: RemoteStatus = { endpoint: this.where, prompts: this.verdict.prompts };
    if (this.verdict.prompts === 'text') s.promptsReason = this.verdict.reason;
    if (this.model) s.model = this.model;
    if (this.server) s.server = this.server;
    if (this.maxContext < Number.MAX_SAFE_INTEGER) s.contextTokens = this.maxContext;
    if (this.phase === 'loading') s.loading = this.problem?.kind === 'remote-loading' ? 'model' : 'connecting';
    const choice = this.completionRoute();
    if (choice) {
      s.completionRoute = choice.route;
      s.completionRouteReason = choice.reason;
    }
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
    this.localTokenizer = await openTokenizer(this.tokenizerDir, this.events.log);
    this.events.log(
      `remote backend: ${this.where}, model ${this.options.model || '(the first the server lists)'}, ` +
        `${this.localTokenizer ? `a local tokenizer of ${this.localTokenizer.vocabSize} tokens, checked against the server before prompts go as its ids` : 'no local tokenizer'}`,
    );
    this.warnIfKeyInClear();
    await this.check();
  }

  /** Replaces the API key and checks the server again. */
  async setApiKey(key: string): Promise<EnginePhase> {
    this.apiKey = key || undefined;
    this.warnIfKeyInClear();
    // A check in flight was made with the old key: wait for it, then check with the new one.
    await this.checking;
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

  /** Reachable, key accepted, model served (see runCheck). Sets the phase; never throws. */
  check(): Promise<void> {
    this.checking ??= this.runCheck().finally(() => (this.checking = undefined));
    return this.checking;
  }

  /** `GET /v1/models` (the server, its models and their context), then the API key on a
   * route this server protects (profile.ts). */
  private async runCheck(): Promise<void> {
    clearTimeout(this.recheckTimer);
    this.recheckTimer = undefined;
    if (!this.base) return;
    try {
      const listing = readModelListing(await requestJson(new URL('models', this.base), 'GET', undefined, this.requestOptions()));
      this.server = listing.server;
      const wanted = this.options.model || undefined;
      const found = findModel(listing, wanted);
      if (!found) {
        const names = listing.models.map((m) => m.id).join(', ') || 'none';
        this.modelProblem = new RemoteError(
          'model-missing',
          wanted ? `the server lists ${names}, not ${wanted} (k3.remote.model)` : 'the server lists no model',
        );
        throw this.modelProblem;
      }
      this.modelProblem = undefined;
      const propsTokens = await this.checkKey(listing.server, found.id);
      await this.checkPrompts(listing.server, found.id, found.vocabSize);
      await this.checkInfill(listing.server);
      this.model = found.id;
      this.maxContext = found.contextTokens ?? propsTokens ?? this.learnedContext ?? Number.MAX_SAFE_INTEGER;
      this.healthy();
    } catch (e) {
      this.setProblem(e instanceof RemoteError ? e : new RemoteError('protocol', (e as Error).message));
    }
  }

  /**
   * Checks the API key where GET /v1/models did not (profile.ts); throws an `unauthorized`
   * RemoteError when it is refused. Resolves with the context llama-server's `/props` names.
   */
  private async checkKey(server: RemoteServerKind | undefined, model: string): Promise<number | undefined> {
    const check = PROFILES[server ?? 'unknown'].keyCheck;
    const base = this.base as URL;
    if (check.how === 'models') return undefined;
    if (check.how === 'root-get') {
      const url = new URL(`../${check.path}`, base);
      try {
        return propsContext(await requestJson(url, 'GET', undefined, this.requestOptions()));
      } catch (e) {
        if (!(e instanceof RemoteError) || (e.reason !== 'not-found' && e.reason !== 'bad-request' && e.reason !== 'server')) throw e;
        this.note(`remote backend: the API key cannot be checked without a generation here (${e.message}); the first request checks it`);
        return undefined;
      }
    }
    if (!this.apiKey) return undefined;
    // An unknown server: is its listing protected? Then the keyed listing checked the key.
    try {
      await requestJson(new URL('models', base), 'GET', undefined, { timeoutMs: this.timeoutMs });
    } catch (e) {
      if (e instanceof RemoteError && e.reason === 'unauthorized') return undefined;
      throw e;
    }
    // It lists without a key: only a generation tells whether the key is accepted. One token.
    try {
      const body = { model, prompt: '\n', max_tokens: 1, temperature: 0, stream: false };
      await requestJson(new URL('completions', base), 'POST', body, this.requestOptions());
    } catch (e) {
      if (e instanceof RemoteError && e.reason === 'unauthorized') throw e;
      // Anything else got past the key: the key is not what failed.
    }
    this.note(`remote backend: ${this.where} lists its models without the API key; the key was checked with a one-token completion`);
    return undefined;
  }

  /** Decides whether prompts go as ids or text (tokenizer-check.ts), and logs the verdict
   * when it changed. */
  private async checkPrompts(server: RemoteServerKind | undefined, model: string, listedVocab: number | undefined): Promise<void> {
    const base = this.base as URL;
    const ask = (p: string, method: 'GET' | 'POST', body?: unknown) => requestJson(new URL(p, base), method, body, this.requestOptions());
    this.verdict = await checkTokenizer(this.localTokenizer, server, model, listedVocab, ask);
    const line =
      this.verdict.prompts === 'ids'
        ? `remote backend: prompts go as token ids: the server's tokenizer is the local one (${this.verdict.evidence})`
        : `remote backend: prompts go as text: ${this.verdict.reason}`;
    if (line !== this.loggedVerdict) this.events.log(line);
    this.loggedVerdict = line;
  }

  /** Probes /infill on a llama-server that serves completions (infill.ts); other servers
   * have none (a forced route finds out from the first refusal). */
  private async checkInfill(server: RemoteServerKind | undefined): Promise<void> {
    if (this.routeSetting === undefined) return;
    if (server !== 'llama-server') {
      this.infill = { state: 'unknown', reason: `${PROFILES[server ?? 'unknown'].name} is not llama-server` };
    } else {
      const base = this.base as URL;
      this.infill = await probeInfill((p, body) => requestJson(new URL(p, base), 'POST', body, this.requestOptions()));
    }
    this.logRoute();
  }

  /** /infill refused a request for good (infill.ts): completions go to /v1/completions. */
  refuseInfill(reason: string): void {
    this.infill = { state: 'no', reason };
    this.logRoute();
    this.events.changed();
  }

  /** The route that serves completions now and why; undefined for a chat-only server. */
  completionRoute(): RouteChoice | undefined {
    if (this.routeSetting === undefined) return undefined;
    return chooseRoute(this.routeSetting, this.server, this.verdict, this.infill);
  }

  /** Writes the route choice to the log when it changed (a setting, a check, a refusal). */
  logRoute(): void {
    const choice = this.completionRoute();
    if (!choice) return;
    const line = `remote backend: completions go to ${choice.route === 'infill' ? '/infill' : '/v1/completions'}: ${choice.reason}`;
    if (line !== this.loggedRoute) this.events.log(line);
    this.loggedRoute = line;
  }

  /** The server answered as it should: ready again. */
  private healthy(): void {
    this.recheckMs = RECHECK_MS;
    if (this.phase === 'ready' && !this.problem) return;
    if (this.loggedProblem !== undefined) this.events.log(`remote backend: ${this.where} answers again`);
    this.loggedProblem = undefined;
    this.phase = 'ready';
    this.problem = undefined;
    this.events.changed();
  }

  private note(line: string): void {
    if (this.notes.has(line)) return;
    this.notes.add(line);
    this.events.log(line);
  }

  /**
   * Records why the server cannot be used, and checks again later: promptly while it loads
   * its model, else after RECHECK_MS doubling to RECHECK_MAX_MS. `logged`: the caller wrote
   * the failure to the log already.
   */
  private setProblem(e: RemoteError, logged = false): void {
    const f = remoteFailure(e, this.where);
    if (!(f instanceof K3Failure)) return;
    // One line per problem: a poll that fails the same way again adds none.
    if (!logged && this.loggedProblem !== f.message) this.events.log(`remote backend: ${f.message} [${e.message}]`);
    this.loggedProblem = f.message;
    this.phase = e.reason === 'loading' ? 'loading' : 'error';
    this.problem = f.problem();
    this.events.changed();
    if (this.base && !this.disposed) {
      clearTimeout(this.recheckTimer);
      const wait = e.reason === 'loading' ? LOADING_POLL_MS : this.recheckMs;
      this.recheckTimer = setTimeout(() => void this.check(), wait);
      this.recheckTimer.unref();
      if (e.reason !== 'loading') this.recheckMs = Math.min(RECHECK_MAX_MS, this.recheckMs * 2);
    }
  }

  private requestOptions(signal?: AbortSignal): { apiKey?: string; timeoutMs: number; signal?: AbortSignal } {
    return { ...(this.apiKey ? { apiKey: this.apiKey } : {}), timeoutMs: this.timeoutMs, ...(signal ? { signal } : {}) };
  }

  /** The model id to send: the one found by the check, else the configured one. */
  private modelId(): string | undefined {
    return this.model ?? (this.options.model || undefined);
  }

  /**
   * POSTs body (with the model id added) to `route` ("completions", "chat/completions") for
   * `job`, streaming, and gives every event to onEvent (which returns 'close' when it takes
   * no more: a reply past its budget, budget.ts). Resolves `done` when the server ended the
   * reply or onEvent closed it, `stopped` after job.stop(); rejects with Cancelled after
   * job.cancel(), with a `remote-timeout` K3Failure when the whole request takes longer than
   * `deadlineTimeouts` times the timeout, and with a K3Failure when the server fails, after
   * logging it with the server's message (the status says so until it answers again where
   * the failure makes it unusable; a deadline does not: the server answers, too long).
   */
  async stream(
    job: Job,
    route: string,
    body: Record<string, unknown>,
    deadlineTimeouts: number,
    onEvent: (data: unknown) => void | 'close',
    /** Turns a failure the caller handles itself (an /infill refusal) into the error to
     * throw, after it is logged; undefined: the usual failure. */
    intercept?: (e: RemoteError) => Error | undefined,
  ): Promise<'done' | 'stopped'> {
    if (!this.base) throw new K3Failure(this.problem?.kind ?? 'remote-unreachable', this.problem?.message ?? 'No remote endpoint is set.');
    if (this.modelProblem) throw remoteFailure(this.modelProblem, this.where);
    const request = new RemoteRequest();
    job.active = request;
    this.jobs.add(job);
    this.events.changed();
    const deadlineMs = deadlineTimeouts * this.timeoutMs;
    const deadline = setTimeout(() => request.expire(), deadlineMs);
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
        if (request.expired) {
          const detail = `POST ${displayUrl(new URL(route, this.base))}: the reply took longer than ${deadlineMs} ms in all (${deadlineTimeouts} x k3.remote.timeoutMs); the connection was closed`;
          this.events.log(`remote backend: ${detail}`);
          throw new K3Failure(
            'remote-timeout',
            `The remote K3 server at ${this.where} did not finish the reply within ${Math.round(deadlineMs / 1000)} s (${deadlineTimeouts} x k3.remote.timeoutMs).`,
            'deadline',
            detail,
          );
        }
      }
      if (e instanceof Cancelled) throw e;
      const err = e instanceof RemoteError ? e : new RemoteError('protocol', (e as Error).message);
      const f = remoteFailure(err, this.where);
      if (!(f instanceof K3Failure)) throw f;
      this.events.log(`remote backend: ${f.message} [${err.message}]`);
      const own = intercept?.(err);
      if (own) throw own;
      if (err.reason === 'context') this.learnContext(err);
      if (err.reason === 'model-missing') this.modelProblem = err;
      if (UNUSABLE.has(err.reason)) this.setProblem(err, true);
      throw f;
    } finally {
      clearTimeout(deadline);
      if (job.active === request) job.active = undefined;
      this.jobs.delete(job);
      this.events.changed();
    }
  }

  /** A context-overflow error that names the context (llama-server, vLLM, SGLang do)
   * narrows maxContext, so the next completion is laid out to fit. */
  private learnContext(e: RemoteError): void {
    const n = contextFromMessage(e.serverMessage ?? e.message);
    if (n === undefined || n >= this.maxContext) return;
    this.maxContext = n;
    this.learnedContext = n;
    this.events.log(`remote backend: the server's context is ${n} tokens (its overflow error says so); completions are laid out to fit`);
    this.events.changed();
  }

  /** A line in the server's log, as the backend writes its own. */
  log(line: string): void {
    this.events.log(line);
  }

  /** What runs completions: this server's /infill or /v1/completions (completionRoute),
   * with the tokenizer or an estimate of it. */
  completionBackend(): CompletionBackend {
    return this.completionRoute()?.route === 'infill' ? remoteInfillBackend(this) : remoteCompletionBackend(this);
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.recheckTimer);
    this.verdict = { prompts: 'text', reason: 'the remote backend was closed' };
    this.localTokenizer?.close();
    this.localTokenizer = undefined;
  }
}
