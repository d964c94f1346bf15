// completion.test.ts - textDocument/inlineCompletion against the bundled server on the tiny
// fixture, driven by a real LSP client over stdio: the answer is the engine's greedy
// continuation (computed here with k3_decode, one token at a time) of the prompt laid out
// as docs/PROMPTS.md says, post-processed as it says; a keystroke after a completion
// prefills only its new token; typing into a completion is served from the cache; a newer
// request supersedes an older one; and a cancelled request stops the engine.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CancellationTokenSource, LSPErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import { Model } from '../../server/engine/engine';
import { COMPLETION_MARGIN } from '../../server/completion/service';
import { COMPLETION_CHECKPOINTS } from '../../server/engine/host';
import { Tokenizer } from '../../server/engine/tokenizer';
import { type StatusResult, StatusRequest } from '../../protocol/lsp';
import { engine, greedyIncremental, healedGreedy, ordinaryTokenBytes } from '../support/engine';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
const MAX_TOKENS = 48;
const STOP_IDS = new Set([163585, 163586]);

let server: ServerHandle;
let tok: Tokenizer;

before(
  async () => {
    tok = Tokenizer.open(dir);
    // The fixture's random weights write junk; this file checks the pipeline's exactness,
    // so the junk filter is off (test/server/completion-quality.test.ts tests it on k3-mini).
    server = await startServer({ modelPath: dir, settings: { engine: { threads: 1 }, completions: { multiline: 'never', maxTokens: MAX_TOKENS, filter: false } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await server.shutdown();
  tok.close();
});

/** The single-line rule of docs/PROMPTS.md: the rest of the line, or the next line when
 * the model ends the line at once; trailing space dropped. */
function singleLine(text: string): string {
  const lines = text.split('\n');
  const line = lines[0].trim() !== '' || lines.length === 1 ? lines[0] : `\n${lines[1]}`;
  return line.replace(/\s+$/, '');
}

/** Greedy continuation of the prompt segments, by one-token decode steps, cut at a stop
 * id; with `heal`, the first tokens spell it (healedGreedy) and it is cut off the text. */
function greedyText(segments: string[], heal = ''): string {
  const prompt = segments.flatMap((s) => Array.from(tok.encode(s, false)));
  const model = new engine.Model(dir);
  const ctx = new engine.Context(model, { maxContext: 4096 });
  try {
    const ids = heal
      ? healedGreedy(ctx, prompt, Buffer.from(heal, 'utf8'), ordinaryTokenBytes(tok), MAX_TOKENS)
      : greedyIncremental(ctx, prompt, MAX_TOKENS).ids;
    const stop = ids.findIndex((id) => STOP_IDS.has(id));
    const text = tok.decode(stop < 0 ? ids : ids.slice(0, stop));
    assert.ok(text.startsWith(heal), `the healed run spells ${JSON.stringify(heal)} first: ${JSON.stringify(text)}`);
    return text.slice(heal.length);
  } finally {
    ctx.close();
    model.close();
  }
}

async function status(): Promise<StatusResult> {
  return server.connection.sendRequest(StatusRequest.type);
}

test("a completion is the engine's greedy continuation of the laid-out prompt, cut to one line", { timeout: TEST_TIMEOUT_MS }, async () => {
  const text = 'def add(a, b):\n    return a + b\n\nresult = add(\nprint(result)\n';
  await server.open('file:///w/add.py', 'python', text);
  const got = await server.complete('file:///w/add.py', 3, 'result = add('.length);
  // No other document is open, so no extra context: the file header and the lines above,
  // then the cursor's line up to its last piece, each encoded on its own; the engine
  // spells the piece "(" again (token healing) and the answer leaves it out.
  assert.equal(tok.lastPiece('result = add('), 'result = add'.length);
  const expected = singleLine(greedyText(['# add.py\ndef add(a, b):\n    return a + b\n\n', 'result = add'], '('));
  assert.notEqual(expected, '', 'the fixture continues this prompt with text');
  assert.deepEqual(got?.items.map((i) => i.insertText), [expected]);
  const s = await status();
  assert.equal(s.lastCompletion?.source, 'engine');
  assert.equal(s.lastCompletion?.promptTokens, tok.encode('# add.py\ndef add(a, b):\n    return a + b\n\n', false).length + tok.encode('result = add', false).length);
  assert.equal(s.lastCompletion?.healedText, '(');
  assert.ok((s.lastCompletion?.healedTokens ?? 0) >= 1);
});

test('a keystroke inside the last piece prefills nothing; one that starts a new piece prefills the finished one', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const uri = 'file:///w/keys.py';
  await server.open(uri, 'python', 'def mul(a, b):\n    return a * b\n\n');
  const first = await server.complete(uri, 3, 0);
  const s1 = (await status()).lastCompletion;
  assert.equal((s1?.prefilledTokens ?? 0) + (s1?.reusedTokens ?? 0), s1?.promptTokens);
  // A character the completion does not start with, so the cache cannot answer. The line
  // "x" is one piece: the prompt still ends where it starts, which the engine holds, and
  // the engine spells "x" again (token healing).
  const typed = first?.items[0]?.insertText.toString().startsWith('x') ? 'y' : 'x';
  await server.type(uri, 2, 3, 0, typed);
  await server.complete(uri, 3, 1);
  const s2 = (await status()).lastCompletion;
  t.diagnostic(`keystroke: prompt ${s2?.promptTokens} tokens, reused ${s2?.reusedTokens}, prefilled ${s2?.prefilledTokens}, ${s2?.prefillMs} ms`);
  assert.equal(s2?.source, 'engine');
  assert.equal(s2?.promptTokens, s1?.promptTokens);
  assert.equal(s2?.prefilledTokens, 0);
  assert.equal(s2?.healedText, typed);
  // A space starts a new piece: the finished piece joins the prompt, one token.
  await server.type(uri, 3, 3, 1, ' ');
  await server.complete(uri, 3, 2);
  const s3 = (await status()).lastCompletion;
  assert.equal(s3?.source, 'engine');
  assert.equal(s3?.promptTokens, (s1?.promptTokens ?? 0) + tok.encode(typed, false).length);
  assert.equal(s3?.prefilledTokens, tok.encode(typed, false).length);
  assert.equal(s3?.reusedTokens, s1?.promptTokens);
  assert.equal(s3?.healedText, ' ');
  assert.ok(server.logs.some((l) => /completion \(engine, done\): prompt \d+ tokens, reused \d+, prefilled 1, generated \d+, healed 1 bytes/.test(l)));
});

test('typing the start of a completion is answered from the cache with the rest of it, without the engine', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/cache.py';
  await server.open(uri, 'python', 'import math\n\nvalue = math.');
  const first = await server.complete(uri, 2, 'value = math.'.length);
  const completion = String(first?.items[0]?.insertText ?? '');
  const head = Array.from(completion)[0] ?? '';
  assert.ok(completion.length > head.length && head !== '\n', `a completion to type into: ${JSON.stringify(completion)}`);
  await server.type(uri, 2, 2, 'value = math.'.length, head);
  const second = await server.complete(uri, 2, 'value = math.'.length + head.length);
  assert.deepEqual(second?.items.map((i) => i.insertText), [completion.slice(head.length).replace(/\s+$/, '')]);
  const s = (await status()).lastCompletion;
  assert.equal(s?.source, 'cache');
  assert.equal(s?.prefilledTokens, 0);
});

test('a newer completion request supersedes the one in flight', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/super.ts';
  await server.open(uri, 'typescript', 'export function twice(x: number) {\n  return ');
  const older = server.complete(uri, 1, 'return '.length - 2);
  const newer = server.complete(uri, 1, 'return '.length);
  await assert.rejects(older, (e: unknown) => e instanceof ResponseError && e.code === LSPErrorCodes.ServerCancelled);
  const got = await newer;
  assert.ok(Array.isArray(got?.items));
});

test('a cancelled request stops the engine within a forward pass, mid-generation', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  await server.connection.sendNotification('workspace/didChangeConfiguration', {
    settings: { k3: { completions: { multiline: 'always', maxLines: 100000, maxTokens: 4000, filter: false } } },
  });
  const uri = 'file:///w/long.py';
  await server.open(uri, 'python', 'def long_function():\n');
  const source = new CancellationTokenSource();
  const request = server.complete(uri, 1, 0, source);
  const generating = await server.waitForStatus((s) => s.job?.kind === 'completion' && s.job.stage === 'generate' && s.job.tokens > 0);
  source.cancel();
  await assert.rejects(request, (e: unknown) => e instanceof ResponseError && e.code === LSPErrorCodes.RequestCancelled);
  const s = await status();
  t.diagnostic(
    `cancelled at ${s.lastCompletion?.generatedTokens! - s.lastCompletion?.tokensAfterCancel!} tokens; ` +
      `${s.lastCompletion?.tokensAfterCancel} more reached JS after the cancel`,
  );
  assert.equal(s.phase, 'ready', 'the engine is idle again');
  assert.equal(s.lastCompletion?.outcome, 'cancelled');
  assert.ok((s.lastCompletion?.generatedTokens ?? 0) >= generating.job!.tokens);
  // One forward pass verifies at most 1 + speculation (8) tokens. The count at the cancel is
  // the engine's, so however late the cancel arrives (a busy machine), this holds.
  assert.ok((s.lastCompletion?.tokensAfterCancel ?? 99) <= 9, `${s.lastCompletion?.tokensAfterCancel} tokens after the cancel`);
  await server.connection.sendNotification('workspace/didChangeConfiguration', {
    settings: { k3: { completions: { multiline: 'never', maxTokens: MAX_TOKENS, filter: false } } },
  });
});

test("the completion checkpoints' budget is sized from the model and the context, and holds what they keep", { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/budget.py';
  await server.open(uri, 'python', 'def area(r):\n    return ');
  await server.complete(uri, 1, 11);
  const s = await status();
  const c = s.completionCheckpoints;
  assert.ok(c, 'the status reports the completion checkpoints');
  // Four checkpoints of the recurrent state and the completion context's cache rows: a few
  // MB on this model, not the engine's 256 MB default that was once a floor.
  // The session was sized at load: the default prompt budget (2048) + maxTokens + the margin.
  const model = await Model.open(dir).promise;
  try {
    const plan = model.plan(2048 + MAX_TOKENS + COMPLETION_MARGIN);
    assert.equal(c.limit, COMPLETION_CHECKPOINTS * (plan.recurrentState + plan.kvCache));
  } finally {
    model.close();
  }
  assert.ok(c.limit < 64 * 2 ** 20, `limit ${c.limit} bytes`);
  assert.ok(c.count >= 1 && c.bytes <= c.limit, JSON.stringify(c));
});
