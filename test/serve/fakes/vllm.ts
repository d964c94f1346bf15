// vllm.ts - a fake of vLLM's OpenAI-compatible server, answering as docs/REMOTE.md's table
// says it does: nothing listens until the model is loaded (start it late); `--api-key`
// asked on every /v1 route, /v1/models included, answered 401 {"error":"Unauthorized"};
// `/v1/models` with `owned_by: vllm` and `max_model_len`; a `model` it does not serve
// refused with 404 NotFoundError; unknown fields accepted and named in a warning (kept in
// `ignored`); a prompt longer than max_model_len minus max_tokens refused with 400
// BadRequestError "...the model's context length is only N tokens..."; `reasoning`
// deltas (the name since vLLM dropped `reasoning_content`); usage in every chunk with
// `continuous_usage_stats`, no cached tokens (they need --enable-prompt-tokens-details);
// a mid-stream failure as a `data: {"error":{…}}` event followed by [DONE]; `POST /tokenize
// {model, prompt}` answering `{count, max_model_len, tokens}` with the test's tokenizer
// (404 without one), held back while the test says so.
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
} from './core';

export interface VllmOptions {
  apiKey?: string;
  /** --served-model-name */
  servedName?: string;
  maxModelLen?: number;
  port?: number;
  /** What `POST /tokenize` tokenizes with; no such route without it. */
  tokenize?: ServerTokenizer;
  /** Awaited before the tokenize route answers (a test holding the check back). */
  beforeTokenize?: () => Promise<void>;
}

export interface FakeVllm extends FakeServer {
  /** Request fields vLLM would warn it ignored, per request. */
  ignored: string[][];
}

const KNOWN = new Set([
  'model',
  'prompt',
  'messages',
  'max_tokens',
  'temperature',
  'stream',
  'stream_options',
  'chat_template_kwargs',
  'stop',
  'n',
  'top_p',
  'reasoning_effort',
]);

function error(res: http.ServerResponse, status: number, type: string, message: string, param: string | null = null): void {
  json(res, status, { error: { message, type, param, code: status } });
}

export async function startVllm(options: VllmOptions = {}): Promise<FakeVllm> {
  const name = options.servedName ?? 'kimi-k3';
  const maxModelLen = options.maxModelLen ?? 8192;
  const ignored: string[][] = [];
  const handler = (r: Recorded, res: http.ServerResponse, fake: FakeServer): void => {
    if (options.apiKey && r.path.startsWith('/v1') && r.key !== options.apiKey) return json(res, 401, { error: 'Unauthorized' });
    const route = `${r.method} ${r.path}`;
    if (route === 'GET /health') return json(res, 200, {});
    if (route === 'GET /v1/models') {
      return json(res, 200, {
        object: 'list',
        data: [{ id: name, object: 'model', created: 1, owned_by: 'vllm', root: '/models/kimi-k3', parent: null, max_model_len: maxModelLen, permission: [{}] }],
      });
    }
    if (route === 'POST /tokenize' && options.tokenize) {
      const tokenize = options.tokenize;
      const prompt = (r.body ?? {}).prompt;
      const tokens = typeof prompt === 'string' ? tokenize(prompt) : [];
      void (options.beforeTokenize?.() ?? Promise.resolve()).then(() => json(res, 200, { count: tokens.length, max_model_len: maxModelLen, tokens, token_strs: null }));
      return;
    }
    const chat = route === 'POST /v1/chat/completions';
    if (!chat && route !== 'POST /v1/completions') return json(res, 404, { detail: 'Not Found' });
    const body = r.body ?? {};
    ignored.push(Object.keys(body).filter((k) => !KNOWN.has(k)));
    if (typeof body.model === 'string' && body.model !== name) return error(res, 404, 'NotFoundError', `The model \`${body.model}\` does not exist.`, 'model');
    const n = promptTokens(body);
    const want = typeof body.max_tokens === 'number' ? body.max_tokens : 16;
    if (n > maxModelLen - want) {
      return error(
        res,
        400,
        'BadRequestError',
        `You passed ${n} input tokens and requested ${want} output tokens. However, the model's context length is only ${maxModelLen} tokens, ` +
          `resulting in a maximum input length of ${maxModelLen - want} tokens. Please reduce the length of the input prompt.`,
        'input_tokens',
      );
    }
    const script = nextScript(fake);
    const streamOptions = (body.stream_options ?? {}) as { include_usage?: unknown; continuous_usage_stats?: unknown };
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    let generated = 0;
    const usage = () => ({ prompt_tokens: n, total_tokens: n + generated, completion_tokens: generated });
    const chunk = (choice: Record<string, unknown>) =>
      event(res, { id: 'cmpl-1', object, created: 1, model: name, choices: [choice], ...(streamOptions.continuous_usage_stats ? { usage: usage() } : {}) });
    startEvents(res);
    if (chat) chunk({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
    for (const p of script.pieces) {
      generated++;
      if (chat) {
        if (p.reasoning) chunk({ index: 0, delta: { reasoning: p.reasoning }, logprobs: null, finish_reason: null });
        if (p.content) chunk({ index: 0, delta: { content: p.content }, logprobs: null, finish_reason: null });
      } else chunk({ index: 0, text: p.content ?? '', logprobs: null, finish_reason: null, stop_reason: null });
    }
    if ('stall' in script.end) return stallWithPings(res);
    if ('error' in script.end) event(res, { error: { message: script.end.error, type: 'InternalServerError', param: null, code: 500 } });
    else {
      chunk(chat ? { index: 0, delta: { content: '' }, logprobs: null, finish_reason: 'stop' } : { index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: null });
      if (streamOptions.include_usage) event(res, { id: 'cmpl-1', object, created: 1, model: name, choices: [], usage: usage() });
    }
    event(res, '[DONE]');
    res.end();
  };
  const fake = (await startFake(handler, options.port)) as FakeVllm;
  fake.ignored = ignored;
  return fake;
}
