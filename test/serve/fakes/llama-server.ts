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
// /tokenize {content}` answering `{tokens}` with the test's tokenizer (404 without one).
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
