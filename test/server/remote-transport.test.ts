// remote-transport.test.ts - the remote backend's reading of untrusted answers, in process:
// the event-stream parser gives the same events however the bytes are cut (down to one
// byte a chunk), takes LF, CRLF and CR line ends, skips comments and other fields, and
// refuses a line or an event past its bound with the byte counts; each server's error
// bodies (docs/REMOTE.md's table) are classified as the user needs: key, loading, context
// (with the context size read back), model, server failure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contextFromMessage, statusError } from '../../server/remote/http';
import { SseLimitError, SseParser } from '../../server/remote/sse';

function parse(chunks: Buffer[], limits = { lineBytes: 1 << 20, eventBytes: 1 << 20 }): string[] {
  const events: string[] = [];
  const p = new SseParser(limits, (d) => events.push(d));
  for (const c of chunks) p.push(c);
  p.end();
  return events;
}

const STREAM = Buffer.from(
  ': ping\r\n\r\ndata: {"a":1}\n\nevent: message\nid: 7\ndata: two\ndata: lines\r\n\r\ndata:nospace\r\rdata: é ü 中\n\ndata: [DONE]\n\n',
);
const WANT = ['{"a":1}', 'two\nlines', 'nospace', 'é ü 中', '[DONE]'];

test('the event stream gives the same events however its bytes are cut, with LF, CRLF and CR line ends', () => {
  assert.deepEqual(parse([STREAM]), WANT);
  assert.deepEqual(
    parse(Array.from(STREAM, (b) => Buffer.from([b]))),
    WANT,
    'one byte a chunk (multi-byte characters and CRLF split)',
  );
  for (let cut = 1; cut < STREAM.length; cut++) assert.deepEqual(parse([STREAM.subarray(0, cut), STREAM.subarray(cut)]), WANT, `cut at ${cut}`);
});

test('a last event without its blank line still counts when the stream ends', () => {
  assert.deepEqual(parse([Buffer.from('data: a\n\ndata: b')]), ['a', 'b']);
});

test('a line past its bound is refused with the byte count, even when it arrives one byte at a time', () => {
  const p = new SseParser({ lineBytes: 1000, eventBytes: 1 << 20 }, () => assert.fail('no event'));
  let thrown: unknown;
  try {
    for (let i = 0; i < 5000; i++) p.push(Buffer.from('x'));
  } catch (e) {
    thrown = e;
  }
  assert.ok(thrown instanceof SseLimitError);
  assert.equal(thrown.message, 'a line of the event stream is over 1000 bytes (1001 bytes without a line end)');
});

test('an event whose data lines together pass the bound is refused with the byte count', () => {
  assert.throws(
    () => parse([Buffer.from('data: 0123456789\n'.repeat(20))], { lineBytes: 100, eventBytes: 100 }),
    (e: unknown) => e instanceof SseLimitError && e.message === 'an event of the event stream is over 100 bytes (109 bytes of data lines)',
  );
});

test('a megabyte line cut into 7-byte chunks is read in one pass', () => {
  const line = Buffer.concat([Buffer.from('data: '), Buffer.alloc(1 << 20, 'y'), Buffer.from('\n\n')]);
  const events = parse(Array.from({ length: Math.ceil(line.length / 7) }, (_, i) => line.subarray(i * 7, i * 7 + 7)), { lineBytes: 2 << 20, eventBytes: 2 << 20 });
  assert.equal(events.length, 1);
  assert.equal(events[0].length, 1 << 20);
});

test("each server's error bodies are classified: key, loading, context, model, failure", () => {
  const what = 'POST http://h/v1/chat/completions';
  const cases: Array<[string, number, string, string]> = [
    ['llama-server key', 401, '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}', 'unauthorized'],
    ['vLLM and SGLang key', 401, '{"error":"Unauthorized"}', 'unauthorized'],
    ['llama-server loading', 503, '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}', 'loading'],
    ['k3 serve queue full', 503, '{"error":{"message":"the server is shutting down","type":"server_error","code":503}}', 'busy'],
    [
      'llama-server overflow',
      400,
      '{"error":{"code":400,"message":"request (1293 tokens) exceeds the available context size (512 tokens), try increasing it","type":"exceed_context_size_error"}}',
      'context',
    ],
    [
      'vLLM overflow',
      400,
      '{"error":{"message":"You passed 5000 input tokens and requested 8 output tokens. However, the model\'s context length is only 4096 tokens, resulting in a maximum input length of 4088 tokens. Please reduce the length of the input prompt.","type":"BadRequestError","param":"input_tokens","code":400}}',
      'context',
    ],
    ['vLLM token-id overflow', 400, '{"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096.","type":"BadRequestError","code":400}}', 'context'],
    ['SGLang overflow', 400, '{"object":"error","message":"The input (5000 tokens) is longer than the model\'s context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}', 'context'],
    ['k3 serve overflow', 400, '{"error":{"message":"This model\'s maximum context length is 4096 tokens, but the prompt has 5000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}', 'context'],
    ['vLLM model', 404, '{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}', 'model-missing'],
    ['another route', 404, '{"detail":"Not Found"}', 'not-found'],
    ['llama-server failure', 500, '{"error":{"code":500,"message":"boom","type":"server_error"}}', 'server'],
  ];
  for (const [name, status, body, reason] of cases) {
    const e = statusError(status, body, what);
    assert.equal(e.reason, reason, name);
    assert.ok(e.message.startsWith(`${what}`), name);
    assert.ok(e.serverMessage && e.message.endsWith(e.serverMessage), `${name}: the server's words are kept`);
  }
});

test("the context size is read back from each server's overflow words", () => {
  assert.equal(contextFromMessage('request (1293 tokens) exceeds the available context size (512 tokens), try increasing it'), 512);
  assert.equal(contextFromMessage("However, the model's context length is only 4096 tokens, resulting in"), 4096);
  assert.equal(contextFromMessage('The decoder prompt (length 5000) is longer than the maximum model length of 4096.'), 4096);
  assert.equal(contextFromMessage("The input (5000 tokens) is longer than the model's context length (2048 tokens)."), 2048);
  assert.equal(contextFromMessage("Requested token count exceeds the model's maximum context length of 1000 tokens."), 1000);
  assert.equal(contextFromMessage("This model's maximum context length is 8192 tokens, but"), 8192);
  assert.equal(contextFromMessage('the conversation is too long'), undefined);
});
