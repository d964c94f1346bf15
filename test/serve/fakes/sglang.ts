// sglang.ts - a fake of SGLang's HTTP server, answering as docs/REMOTE.md's table says it
// does: nothing listens until the model is loaded; `--api-key` asked everywhere except
// /health*, /ready* and /metrics*, /v1/models included, answered 401 {"error":
// "Unauthorized"}; `/v1/models` with `owned_by: sglang` and `max_model_len`; the request's
// `model` ignored (it only picks a LoRA adapter as `base:adapter`) and unknown fields
// ignored; a prompt at or past the context refused with 400 {"object":"error","message":
// "The input (N tokens) is longer than the model's context length (M tokens).",
// "type":"BadRequestError",…} (top-level message), one that fits but whose max_tokens does
// not with "Requested token count exceeds the model's maximum context length of M tokens…";
// `reasoning_content` deltas; usage at the end without cached tokens (they need
// --enable-cache-report); a mid-stream failure as a `data: {"error":{…}}` event, then [DONE];
// `POST /v1/tokenize {model, prompt}` answering `{tokens, count, max_model_len}` with the
// test's tokenizer (serving_tokenize.py; 404 without one).
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

export interface SglangOptions {
  apiKey?: string;
  servedName?: string;
  contextLength?: number;
  port?: number;
  /** What `POST /v1/tokenize` tokenizes with; no such route without it. */
  tokenize?: ServerTokenizer;
}

function badRequest(res: http.ServerResponse, message: string): void {
  json(res, 400, { object: 'error', message, type: 'BadRequestError', param: null, code: 400 });
}

export async function startSglang(options: SglangOptions = {}): Promise<FakeServer> {
  const name = options.servedName ?? 'kimi-k3';
  const contextLen = options.contextLength ?? 8192;
  const handler = (r: Recorded, res: http.ServerResponse, fake: FakeServer): void => {
    const open = r.path.startsWith('/health') || r.path.startsWith('/ready') || r.path.startsWith('/metrics');
    if (options.apiKey && !open && r.key !== options.apiKey) return json(res, 401, { error: 'Unauthorized' });
    const route = `${r.method} ${r.path}`;
    if (route === 'GET /health') return json(res, 200, {});
    if (route === 'GET /v1/models') {
      return json(res, 200, { object: 'list', data: [{ id: name, object: 'model', created: 1, owned_by: 'sglang', root: name, max_model_len: contextLen }] });
    }
    if (route === 'POST /v1/tokenize' && options.tokenize) {
      const prompt = (r.body ?? {}).prompt;
      const tokens = typeof prompt === 'string' ? options.tokenize(prompt) : [];
      return json(res, 200, { tokens, count: tokens.length, max_model_len: contextLen });
    }
    const chat = route === 'POST /v1/chat/completions';
    if (!chat && route !== 'POST /v1/completions') return json(res, 404, { detail: 'Not Found' });
    const body = r.body ?? {};
    const n = promptTokens(body);
    const want = typeof body.max_tokens === 'number' ? body.max_tokens : 128;
    if (n >= contextLen) return badRequest(res, `The input (${n} tokens) is longer than the model's context length (${contextLen} tokens).`);
    if (n + want > contextLen) {
      return badRequest(
        res,
        `Requested token count exceeds the model's maximum context length of ${contextLen} tokens. You requested a total of ${n + want} tokens: ` +
          `${n} tokens from the input messages and ${want} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
      );
    }
    const script = nextScript(fake);
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const chunk = (choice: Record<string, unknown>) => event(res, { id: 'x', object, created: 1, model: name, choices: [choice], usage: null });
    startEvents(res);
    for (const p of script.pieces) {
      if (chat) {
        if (p.reasoning) chunk({ index: 0, delta: { role: 'assistant', content: null, reasoning_content: p.reasoning }, finish_reason: null });
        if (p.content) chunk({ index: 0, delta: { role: 'assistant', content: p.content, reasoning_content: null }, finish_reason: null });
      } else chunk({ index: 0, text: p.content ?? '', logprobs: null, finish_reason: null });
    }
    if ('stall' in script.end) return stallWithPings(res);
    if ('error' in script.end) event(res, { error: { message: script.end.error, type: 'InternalServerError', param: null, code: 500 } });
    else {
      chunk(chat ? { index: 0, delta: {}, finish_reason: 'stop' } : { index: 0, text: '', logprobs: null, finish_reason: 'stop' });
      if ((body.stream_options as { include_usage?: unknown } | undefined)?.include_usage) {
        const k = script.pieces.length;
        event(res, { id: 'x', object, created: 1, model: name, choices: [], usage: { prompt_tokens: n, completion_tokens: k, total_tokens: n + k } });
      }
    }
    event(res, '[DONE]');
    res.end();
  };
  return startFake(handler, options.port);
}
