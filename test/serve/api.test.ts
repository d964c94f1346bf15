// api.test.ts - what `k3 serve` answers on the tiny fixture over real HTTP on 127.0.0.1:
// a completion is the engine's greedy continuation (checked against one-token decode
// steps through the addon), streamed as it is generated and equal to the answer in one
// piece; its C chat renderer gives the ids server/chat/render.ts gives for the same
// conversations, and its reply parser splits a reply as ReplyParser does; a prompt that
// extends an earlier one, or shares a checkpointed prefix with it, prefills only the rest;
// stop strings cut the text; sampling is refused with a clear 400; the model list names
// the one model.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ChatRenderer, type RenderMessage, type ThinkingEffort } from '../../server/chat/render';
import { Tokenizer } from '../../server/engine/tokenizer';
import { engine, greedyIncremental } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { addonFile } from '../support/paths';
import { requestJson, requestStream, type Serve, startServe } from './support';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
const TIMEOUT = 120_000;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

interface CompletionBody {
  prompt_token_ids?: number[];
  choices: Array<{ text: string; token_ids?: number[]; finish_reason: string }>;
  usage: Usage;
}

interface ChatBody {
  prompt_token_ids?: number[];
  choices: Array<{ message: { content: string; reasoning_content: string }; token_ids?: number[]; finish_reason: string }>;
  usage: Usage;
}

let serve: Serve;
let tok: Tokenizer;
let renderer: ChatRenderer;

before(
  async () => {
    tok = Tokenizer.open(dir);
    renderer = new ChatRenderer(tok);
    serve = await startServe(dir, { args: ['--ctx', '2048', '--spec', '4'] });
  },
  { timeout: TIMEOUT },
);

after(async () => {
  assert.equal(await serve.stop(), 0, 'k3 serve exits 0 on SIGTERM');
  tok.close();
});

async function complete(body: Record<string, unknown>): Promise<CompletionBody> {
  const r = await requestJson(serve.port, 'POST', '/v1/completions', body);
  assert.equal(r.status, 200, r.text);
  return r.body as CompletionBody;
}

function greedy(prompt: readonly number[], steps: number): number[] {
  const model = new engine.Model(dir);
  const ctx = new engine.Context(model, { maxContext: 4096 });
  try {
    return greedyIncremental(ctx, prompt, steps).ids;
  } finally {
    ctx.close();
    model.close();
  }
}

test("a completion is the engine's greedy continuation of the prompt ids, and its text is their text", { timeout: TIMEOUT }, async () => {
  const prompt = Array.from(tok.encode('def add(a, b):\n    return', false));
  const got = await complete({ prompt, max_tokens: 12, temperature: 0, return_token_ids: true });
  const expected = greedy(prompt, 12);
  const stop = expected.findIndex((id) => id === 163585 || id === 163586);
  assert.deepEqual(got.choices[0].token_ids, stop < 0 ? expected : expected.slice(0, stop + 1));
  assert.deepEqual(got.prompt_token_ids, prompt);
  assert.equal(got.choices[0].text, tok.decode(expected.filter((id) => id !== 163585 && id !== 163586)));
  assert.equal(got.choices[0].finish_reason, stop < 0 ? 'length' : 'stop');
  assert.equal(got.usage.prompt_tokens, prompt.length);
  assert.equal(got.usage.completion_tokens, got.choices[0].token_ids?.length);
});

test('a text prompt is tokenized by the server (special-token names become their ids)', { timeout: TIMEOUT }, async () => {
  const text = 'x = 1\n<|end_of_msg|>y =';
  const got = await complete({ prompt: text, max_tokens: 1, return_token_ids: true });
  assert.deepEqual(got.prompt_token_ids, Array.from(tok.encode(text, true)));
  assert.ok(got.prompt_token_ids?.includes(163586));
});

test('a streamed completion arrives piece by piece, and its pieces join to the answer given in one piece', { timeout: TIMEOUT }, async () => {
  const prompt = 'import math\n\ndef area(r):\n    return math.';
  const whole = await complete({ prompt, max_tokens: 24 });
  const stream = requestStream(serve.port, '/v1/completions', { prompt, max_tokens: 24, stream: true, stream_options: { include_usage: true } });
  assert.equal(await stream.status, 200);
  await stream.ended;
  assert.equal(stream.events[stream.events.length - 1], '[DONE]');
  const chunks = stream.events.slice(0, -1).map((e) => JSON.parse(e) as { choices: Array<{ text: string; finish_reason: string | null }>; usage?: Usage });
  const texts = chunks.filter((c) => c.choices.length && c.choices[0].text !== '').map((c) => c.choices[0].text);
  assert.ok(texts.length > 1, `${texts.length} pieces`);
  assert.equal(texts.join(''), whole.choices[0].text);
  assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, whole.choices[0].finish_reason);
  assert.equal(chunks[chunks.length - 1].usage?.completion_tokens, whole.usage.completion_tokens);
});

test('a prompt extending the previous one prefills only its new tokens: the previous prompt end is a checkpoint', { timeout: TIMEOUT }, async () => {
  const base = Array.from(tok.encode('class Stack:\n    def __init__(self):\n        self.items = []\n', false));
  await complete({ prompt: base, max_tokens: 8 });
  const longer = [...base, ...Array.from(tok.encode('    def push', false))];
  const second = await complete({ prompt: longer, max_tokens: 4 });
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, base.length);
});

test('k3_checkpoints positions are checkpointed, so a later prompt sharing that prefix resumes there', { timeout: TIMEOUT }, async () => {
  const head = Array.from(tok.encode('# util.py\ndef g():\n    return 2\n\n', false));
  const a = [...head, ...Array.from(tok.encode('# a.py\nx = g(', false))];
  const b = [...head, ...Array.from(tok.encode('# b.py\nprint(g', false))];
  await complete({ prompt: a, max_tokens: 4, k3_checkpoints: [head.length] });
  const second = await complete({ prompt: b, max_tokens: 4, k3_checkpoints: [head.length] });
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, head.length);
  assert.equal(second.usage.prompt_tokens, b.length);
});

test('a stop string ends the text before it', { timeout: TIMEOUT }, async () => {
  const prompt = 'for i in range(10):\n    print(i';
  const free = (await complete({ prompt, max_tokens: 24 })).choices[0].text;
  // A stop string taken from the middle of what the model writes anyway.
  const chars = Array.from(free);
  const at = Math.floor(chars.length / 2);
  const stop = chars.slice(at, at + 2).join('');
  const cut = free.indexOf(stop);
  assert.ok(stop.length > 0 && cut >= 0, `a stop string from ${JSON.stringify(free)}`);
  const got = await complete({ prompt, max_tokens: 24, stop: [stop] });
  assert.equal(got.choices[0].text, free.slice(0, cut));
  assert.equal(got.choices[0].finish_reason, 'stop');
  const streamed = requestStream(serve.port, '/v1/completions', { prompt, max_tokens: 24, stop, stream: true });
  await streamed.ended;
  const text = streamed.events
    .filter((e) => e !== '[DONE]')
    .map((e) => (JSON.parse(e) as { choices: Array<{ text: string }> }).choices[0]?.text ?? '')
    .join('');
  assert.equal(text, free.slice(0, cut));
});

const CONVERSATIONS: Array<{ name: string; messages: RenderMessage[]; thinking: boolean; effort?: ThinkingEffort }> = [
  { name: 'one user message, thinking', messages: [{ role: 'user', content: 'hello' }], thinking: true },
  { name: 'one user message, no thinking', messages: [{ role: 'user', content: 'What is 2 + 2?' }], thinking: false },
  {
    name: 'system, user, assistant with reasoning, user; effort low',
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Name a prime.' },
      { role: 'assistant', content: '7', reasoning: 'Small primes: 2, 3, 5, 7.' },
      { role: 'user', content: 'Another?' },
    ],
    thinking: true,
    effort: 'low',
  },
  {
    name: 'text that spells special tokens, quotes, ampersands, unicode, empty content',
    messages: [
      { role: 'user', content: 'a <|end_of_msg|> b <|open|>message role="x"<|sep|> & "q" — 漢字 🙂\n\tend' },
      { role: 'assistant', content: '', reasoning: '' },
      { role: 'user', content: '  spaces  \r\n' },
    ],
    thinking: false,
  },
];

for (const c of CONVERSATIONS) {
  test(`the C chat renderer gives the ids server/chat/render.ts gives: ${c.name}`, { timeout: TIMEOUT }, async () => {
    const body = {
      messages: c.messages.map((m) => ({ role: m.role, content: m.content, ...(m.reasoning !== undefined ? { reasoning_content: m.reasoning } : {}) })),
      max_tokens: 0,
      return_token_ids: true,
      chat_template_kwargs: { thinking: c.thinking },
      ...(c.effort ? { reasoning_effort: c.effort } : {}),
    };
    const r = await requestJson(serve.port, 'POST', '/v1/chat/completions', body);
    assert.equal(r.status, 200, r.text);
    const expected = renderer.render(c.messages, { thinking: c.thinking, generationPrompt: true, ...(c.effort ? { effort: c.effort } : {}) });
    assert.deepEqual((r.body as ChatBody).prompt_token_ids, expected);
  });
}

test('a chat reply is split into reasoning and content as ReplyParser splits its ids', { timeout: TIMEOUT }, async () => {
  for (const thinking of [true, false]) {
    const r = await requestJson(serve.port, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: `Explain recursion (${thinking ? 'thinking' : 'no thinking'}).` }],
      max_tokens: 48,
      return_token_ids: true,
      chat_template_kwargs: { thinking },
    });
    assert.equal(r.status, 200, r.text);
    const choice = (r.body as ChatBody).choices[0];
    const parser = renderer.parser(thinking);
    parser.feed(choice.token_ids ?? []);
    parser.finish();
    assert.equal(choice.message.reasoning_content, parser.reasoning);
    assert.equal(choice.message.content, parser.content);
    assert.equal(thinking ? parser.reasoning !== '' : parser.content !== '', true, 'the open channel got text');
  }
});

test('a conversation continued in a new request prefills only what follows what the server holds', { timeout: TIMEOUT }, async () => {
  const first = [{ role: 'user', content: 'Count to three.' }];
  const r1 = (await requestJson(serve.port, 'POST', '/v1/chat/completions', { messages: first, max_tokens: 6, return_token_ids: true }))
    .body as ChatBody;
  const reply = r1.choices[0].message;
  const r2 = (
    await requestJson(serve.port, 'POST', '/v1/chat/completions', {
      messages: [...first, { role: 'assistant', content: reply.content, reasoning_content: reply.reasoning_content }, { role: 'user', content: 'Again.' }],
      max_tokens: 2,
      return_token_ids: true,
    })
  ).body as ChatBody;
  // The server holds the first prompt's end as a checkpoint, and its live sequence (the
  // prompt and the reply but its last token, which is never decoded): it resumes from the
  // live sequence when the re-rendered reply still starts with it, else from the checkpoint.
  const prompt1 = r1.prompt_token_ids ?? [];
  const live = [...prompt1, ...(r1.choices[0].token_ids ?? []).slice(0, -1)];
  const prompt2 = r2.prompt_token_ids ?? [];
  const livePrefix = live.every((id, i) => prompt2[i] === id);
  assert.ok(prompt1.every((id, i) => prompt2[i] === id), 'the second prompt starts with the first');
  assert.equal(r2.usage.prompt_tokens_details.cached_tokens, livePrefix ? live.length : prompt1.length);
});

test('sampling, several choices and unknown models are refused with clear errors', { timeout: TIMEOUT }, async () => {
  const cases: Array<[Record<string, unknown>, number, RegExp]> = [
    [{ prompt: 'x', temperature: 0.7 }, 400, /greedily: 'temperature' must be 0 or absent/],
    [{ prompt: 'x', n: 2 }, 400, /'n' must be 1/],
    [{ prompt: 'x', model: 'gpt-4' }, 404, /The model 'gpt-4' does not exist/],
    [{ prompt: 'x', suffix: 'y' }, 400, /'suffix' is not supported/],
    [{ prompt: [1, 2, 999999] }, 400, /'prompt'\[2\] is not a token id/],
    [{ prompt: '' }, 400, /the prompt is empty/],
    [{ prompt: 'x', max_tokens: -1 }, 400, /'max_tokens' must be a non-negative integer/],
  ];
  for (const [body, status, message] of cases) {
    const r = await requestJson(serve.port, 'POST', '/v1/completions', body);
    assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    const err = (r.body as { error: { message: string; type: string } }).error;
    assert.match(err.message, message);
  }
  const long = await requestJson(serve.port, 'POST', '/v1/completions', { prompt: new Array(3000).fill(1) });
  assert.equal(long.status, 400);
  assert.equal((long.body as { error: { code: string } }).error.code, 'context_length_exceeded');
  const tools = await requestJson(serve.port, 'POST', '/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] });
  assert.equal(tools.status, 400);
});

test('GET /v1/models lists the one model with its context', { timeout: TIMEOUT }, async () => {
  const r = await requestJson(serve.port, 'GET', '/v1/models');
  assert.equal(r.status, 200);
  const data = (r.body as { data: Array<{ id: string; max_model_len: number }> }).data;
  assert.deepEqual(
    data.map((m) => [m.id, m.max_model_len]),
    [['tiny-lowerbound-s1', 2048]],
  );
});
