// llama-server.ts - a fake of llama.cpp's llama-server (tools/server at the Kimi-K3 commit
// 34af94cd9), answering as docs/REMOTE.md's table says it does: every route 503 "Loading
// model" while it loads (before the key check); `--api-key` not asked on /health,
// /v1/health, /models, /v1/models, asked on /props and the generation routes (401
// "Invalid API Key", authentication_error); `/v1/models` with `owned_by: llamacpp`,
// `aliases` and the slot context in `meta.n_ctx`; the request's `model` and unknown fields
// ignored (one model); a prompt over the slot context refused with 400
// exceed_context_size_error; `reasoning_content` deltas; usage with
// `prompt_tokens_details.cached_tokens` (the prefix shared with the previous prompt) at the
// end; a mid-stream failure as one `data: {"error":{code,message,type}}` event and no
// [DONE]; keep-alive comments while stalled; `meta.n_vocab` in the listing and `POST
// /tokenize {content}` answering `{tokens}` with the test's tokenizer (404 without one);
// `POST /infill` as server-context.cpp post_infill and server-common.cpp
// format_prompt_infill have it: 501 not_supported_error naming each missing FIM token for
// a model without them (the default: K3's GGUF has none), else the request checked
// (`prompt` a string, `input_prefix`/`input_suffix` present, `input_extra` an array of
// {text, filename?}), the prompt laid out as `<extra> <|fim_prefix|>prefix prompt
// <|fim_suffix|>suffix <|fim_middle|>` (PSM; --spm-infill puts the suffix first) with the
// extra chunks after "--- snippet ---" separators (no FIM_SEP token), and the reply as the
// native (not OpenAI) stream: `{content, stop: false, tokens_predicted,
// tokens_evaluated}` events, then one `stop: true` event with `tokens_cached` and
// `timings` {cache_n, prompt_n, predicted_n}, and no [DONE]; `stream: false` answers that
// last object alone.
import type * as http from 'node:http';
import {
  event,
  type FakeServer,
  json,
  nextScript,
  promptTokens,
  type Recorded,
  type ServerTokenizer,
  stallWithPings,
  startEvents,
  startFake,
  tokensOf,
} from './core';

export interface LlamaServerOptions {
  apiKey?: string;
  /** --alias: the model id; the GGUF's name is listed as an alias too. */
  alias?: string;
  /** The slot context (-c divided by --parallel). */
  nCtx?: number;
  /** Loading until set to false. */
  loading?: boolean;
  port?: number;
  /** The vocabulary size the listing publishes (`meta.n_vocab`); 1000 by default. */
  nVocab?: number;
  /** What `POST /tokenize` tokenizes with; no such route without it. */
  tokenize?: ServerTokenizer;
  /** The model has FIM tokens: /infill answers (else 501, as for K3's GGUF). */
  fim?: boolean;
}

export interface FakeLlamaServer extends FakeServer {
  options: LlamaServerOptions;
}

const PUBLIC = new Set(['/health', '/v1/health', '/models', '/v1/models']);

function error(res: http.ServerResponse, status: number, type: string, message: string): void {
  json(res, status, { error: { code: status, message, type } });
}

/** The text a request's prompt stands for, to find the prefix shared with the previous one. */
function promptText(body: Record<string, unknown>): string {
  if (typeof body.prompt === 'string') return body.prompt;
  if (Array.isArray(body.prompt)) return body.prompt.join(',');
  return JSON.stringify(body.messages ?? []);
}

/** The remote backend's /infill probe (server/remote/infill.ts): refused before anything
 * runs, so it is no generation. */
export function isInfillProbe(r: Recorded): boolean {
  return r.path === '/infill' && r.body !== undefined && !Array.isArray(r.body.input_extra);
}

/** The text a laid-out /infill prompt stands for (format_prompt_infill, a vocabulary
 * without FIM_REP and FIM_SEP), or the refusal of a malformed request. */
function infillPrompt(body: Record<string, unknown>): string | { invalid: string } {
  if (body.prompt !== undefined && typeof body.prompt !== 'string') return { invalid: '"prompt" must be a string' };
  if (!('input_prefix' in body)) return { invalid: '"input_prefix" is required' };
  if (!('input_suffix' in body)) return { invalid: '"input_suffix" is required' };
  const extra = body.input_extra ?? [];
  if (!Array.isArray(extra)) return { invalid: '"input_extra" must be an array of {"filename": string, "text": string}' };
  let text = '';
  for (const chunk of extra as Array<Record<string, unknown> | null>) {
    if (typeof chunk?.text !== 'string') return { invalid: 'extra_context chunk must contain a "text" field with a string value' };
    if (chunk.filename !== undefined && typeof chunk.filename !== 'string') return { invalid: 'extra_context chunk\'s "filename" field must be a string' };
    text += `\n\n--- snippet ---\n\n${chunk.text}`;
  }
  const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
  return `${text}<|fim_prefix|>${str(body.input_prefix)}${str(body.prompt ?? '')}<|fim_suffix|>${str(body.input_suffix)}<|fim_middle|>`;
}

/** POST /infill (see the file's comment). */
function infill(body: Record<string, unknown>, res: http.ServerResponse, fake: FakeServer, o: LlamaServerOptions): void {
  if (!o.fim) {
    const missing = 'prefix token is missing. suffix token is missing. middle token is missing. ';
    return error(res, 501, 'not_supported_error', `Infill is not supported by this model: ${missing}`);
  }
  const prompt = infillPrompt(body);
  if (typeof prompt !== 'string') return error(res, 400, 'invalid_request_error', prompt.invalid);
  const n = tokensOf(prompt);
  const cached = sharedPrefix(fake, prompt);
  const script = nextScript(fake);
  const contents = script.pieces.map((p) => p.content ?? '').filter((c) => c !== '');
  const last = {
    index: 0,
    content: '',
    tokens: [],
    id_slot: 0,
    stop: true,
    model: 'k3-mini-bf16.gguf',
    tokens_predicted: contents.length,
    tokens_evaluated: n,
    has_new_line: contents.some((c) => c.includes('\n')),
    truncated: false,
    stop_type: 'eos',
    stopping_word: '',
    tokens_cached: n + contents.length - 1,
    timings: { cache_n: tokensOf(prompt.slice(0, cached)), prompt_n: n - tokensOf(prompt.slice(0, cached)), prompt_ms: 1, predicted_n: contents.length, predicted_ms: 1 },
  };
  if (body.stream !== true) return json(res, 200, { ...last, content: contents.join('') });
  startEvents(res);
  contents.forEach((content, i) => event(res, { index: 0, content, tokens: [i], stop: false, id_slot: -1, tokens_predicted: i + 1, tokens_evaluated: n }));
  if ('error' in script.end) {
    event(res, { error: { code: 500, message: script.end.error, type: 'server_error' } });
    res.end();
    return;
  }
  if ('stall' in script.end) return stallWithPings(res);
  event(res, last);
  res.end();
}

/** Characters the prompt shares with the previous one (the slot's cache). */
const previousPrompt = new WeakMap<FakeServer, string>();
function sharedPrefix(fake: FakeServer, text: string): number {
  const previous = previousPrompt.get(fake) ?? '';
  let n = 0;
  while (n < Math.min(text.length, previous.length) && text[n] === previous[n]) n++;
  previousPrompt.set(fake, text);
  return n;
}

export async function startLlamaServer(options: LlamaServerOptions = {}): Promise<FakeLlamaServer> {
  const alias = options.alias ?? 'kimi-k3';
  let previous = '';
  const handler = (r: Recorded, res: http.ServerResponse, fake: FakeServer): void => {
    const o = (fake as FakeLlamaServer).options;
    const nCtx = o.nCtx ?? 4096;
    if (o.loading) return error(res, 503, 'unavailable_error', 'Loading model');
    if (o.apiKey && !PUBLIC.has(r.path) && r.key !== o.apiKey) return error(res, 401, 'authentication_error', 'Invalid API Key');
    const route = `${r.method} ${r.path}`;
    if (route === 'GET /health' || route === 'GET /v1/health') return json(res, 200, { status: 'ok' });
    if (route === 'GET /v1/models' || route === 'GET /models') {
      return json(res, 200, {
        models: [{ name: alias, model: alias, type: 'model' }],
        object: 'list',
        data: [
          {
            id: alias,
            aliases: [alias, 'small-bf16.gguf'],
            tags: [],
            object: 'model',
            created: 1,
            owned_by: 'llamacpp',
            meta: { vocab_type: 2, n_vocab: o.nVocab ?? 1000, n_ctx: nCtx, n_ctx_train: 131072, n_embd: 512, n_params: 1, size: 1 },
          },
        ],
      });
    }
    if (route === 'POST /tokenize' && o.tokenize) {
      const content = (r.body ?? {}).content;
      return json(res, 200, { tokens: typeof content === 'string' ? o.tokenize(content) : [] });
    }
    if (route === 'GET /props') return json(res, 200, { default_generation_settings: { params: {}, n_ctx: nCtx }, total_slots: 1, model_alias: alias });
    if (route === 'POST /infill') return infill(r.body ?? {}, res, fake, o);
    const chat = route === 'POST /v1/chat/completions';
    if (!chat && route !== 'POST /v1/completions') return error(res, 404, 'not_found_error', 'File Not Found');
    const body = r.body ?? {};
    const n = promptTokens(body);
    if (n > nCtx) return error(res, 400, 'exceed_context_size_error', `request (${n} tokens) exceeds the available context size (${nCtx} tokens), try increasing it`);
    const text = promptText(body);
    let cached = 0;
    while (cached < Math.min(text.length, previous.length) && text[cached] === previous[cached]) cached++;
    previous = text;
    const script = nextScript(fake);
    startEvents(res);
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      event(res, { choices: [choice], created: 1, id: 'chatcmpl-1', model: alias, system_fingerprint: 'b1-34af94c', object, ...extra });
    if (chat) chunk({ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } });
    for (const p of script.pieces) {
      if (chat) {
        if (p.reasoning) chunk({ finish_reason: null, index: 0, delta: { reasoning_content: p.reasoning } });
        if (p.content) chunk({ finish_reason: null, index: 0, delta: { content: p.content } });
      } else chunk({ text: p.content ?? '', index: 0, logprobs: null, finish_reason: null });
    }
    if ('error' in script.end) {
      event(res, { error: { code: 500, message: script.end.error, type: 'server_error' } });
      res.end();
      return;
    }
    if ('stall' in script.end) return stallWithPings(res);
    const usage = { completion_tokens: script.pieces.length, prompt_tokens: n, total_tokens: n + script.pieces.length, prompt_tokens_details: { cached_tokens: tokensOf(text.slice(0, cached)) } };
    if (chat) {
      chunk({ finish_reason: 'stop', index: 0, delta: {} });
      const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
      if (includeUsage) event(res, { choices: [], created: 1, id: 'chatcmpl-1', model: alias, object, usage });
    } else chunk({ text: '', index: 0, logprobs: null, finish_reason: 'stop' }, { usage });
    event(res, '[DONE]');
    res.end();
  };
  const fake = (await startFake(handler, options.port)) as FakeLlamaServer;
  fake.options = options;
  return fake;
}
