// llama-infill.test.ts - ghost text through llama-server's /infill (server/remote/infill.ts)
// against the llama-server fake, whose /infill replays llama.cpp's source (fakes/
// llama-server.ts): which route serves completions (auto picks /infill for a FIM model
// when prompts go as text; a model without FIM tokens, or the setting, keeps
// /v1/completions, and the status and log say why; a refusal after the check falls back
// within the same request); the request body (context chunks as input_extra, the file as
// input_prefix, the cursor's line as prompt, the text after the cursor as input_suffix,
// n_predict, cache_prompt); the streamed text through post-processing with the server's
// counts in the status; and a cancelled completion closing the stream. Tests await events
// (status notifications, recorded requests, log lines), never time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CancellationTokenSource, DidChangeConfigurationNotification, LSPErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import { type InitializationOptions, type RemoteRoute, StatusRequest } from '../../protocol/lsp';
import { TEST_TIMEOUT_MS } from '../support/lsp';
import { startLlamaServer } from './fakes/llama-server';
import { remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };

function init(base: string, route: RemoteRoute = 'auto'): InitializationOptions {
  return { ...remoteInit(base), settings: { completions: { maxTokens: 16, remoteRoute: route } } };
}

const HELPER = 'def scale(value, factor):\n    return value * factor\n';
const MAIN = 'from helper import scale\n\ndef area(width, height):\n    return \n\nprint(area(2, 3))\n';

test('auto: a FIM model on llama-server serves ghost text through /infill, laid out as input_extra, input_prefix, prompt and input_suffix, the reply post-processed', T, async () => {
  const fake = await startLlamaServer({ fim: true });
  await withLanguageServer(
    init(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.completionRoute !== undefined);
      assert.equal(s.remote?.completionRoute, 'infill');
      assert.match(s.remote?.completionRouteReason ?? '', /^auto: llama-server answers \/infill with the model's own FIM tokens, and prompts would go as text \(no K3 tokenizer/);
      assert.ok(ls.logs.some((l) => l.startsWith('remote backend: completions go to /infill: auto:')), 'the log says which route and why');
      const probe = fake.requests.find((r) => r.path === '/infill');
      assert.equal(probe?.status, 400, 'the probe is refused after the FIM check: nothing was generated');
      await ls.open('file:///w/helper.py', 'python', HELPER);
      await ls.open('file:///w/main.py', 'python', MAIN);
      // The model writes the line, then a second function the block rule cuts.
      fake.scripts.push({ pieces: [{ content: 'width' }, { content: ' * height' }, { content: '\n\n\ndef other():\n' }], end: { done: true } });
      const got = await ls.complete('file:///w/main.py', 3, 11);
      const sent = await fake.waitForRequest((r) => r.path === '/infill' && r.body?.stream === true);
      const body = sent.body ?? {};
      assert.equal(body.prompt, '    return ', 'the cursor\'s line goes as prompt');
      assert.equal(body.input_prefix, '# main.py\nfrom helper import scale\n\ndef area(width, height):\n', 'the file above the cursor\'s line, under its header');
      assert.equal(body.input_suffix, '\n\nprint(area(2, 3))\n', 'the rest of the line and the lines below');
      assert.equal(body.n_predict, 16);
      assert.equal(body.cache_prompt, true);
      assert.equal(body.temperature, 0);
      const extra = body.input_extra as Array<{ filename: string; text: string }>;
      assert.ok(Array.isArray(extra) && extra.some((c) => c.filename === 'helper.py' && c.text.includes('def scale(value, factor):')), `the other file goes as an input_extra chunk: ${JSON.stringify(extra)}`);
      assert.equal(sent.status, 200);
      assert.equal(got?.items.length, 1);
      assert.equal(got?.items[0].insertText, 'width * height', 'post-processing keeps the line and drops what follows the block');
      const c = (await ls.connection.sendRequest(StatusRequest.type)).lastCompletion;
      assert.ok(c && c.promptTokens > 0 && c.prefilledTokens > 0, `the server's counts reach the status: ${JSON.stringify(c)}`);
      assert.equal(fake.requests.filter((r) => r.path === '/v1/completions').length, 0, 'nothing went to /v1/completions');
      // A keystroke on the cursor's line that the suggestion does not cover: the prefix and
      // the extra chunks are unchanged, so the server's cache holds them.
      await ls.type('file:///w/main.py', 2, 3, 11, 'h');
      fake.scripts.push({ pieces: [{ content: 'eight * width' }], end: { done: true } });
      await ls.complete('file:///w/main.py', 3, 12);
      const [first, second] = fake.requests.filter((r) => r.path === '/infill' && r.body?.stream === true);
      assert.equal(second.body?.input_prefix, first.body?.input_prefix);
      assert.deepEqual(second.body?.input_extra, first.body?.input_extra);
      assert.equal(second.body?.prompt, '    return h');
      const typed = (await ls.connection.sendRequest(StatusRequest.type)).lastCompletion;
      assert.ok(typed && typed.reusedTokens > 0, `the server reused the prompt's prefix: ${JSON.stringify(typed)}`);
    },
    fake,
  );
});

test('auto: a model without FIM tokens (K3) keeps /v1/completions, and the status and log carry the server\'s refusal', T, async () => {
  const fake = await startLlamaServer();
  await withLanguageServer(
    init(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.completionRoute !== undefined);
      assert.equal(s.remote?.completionRoute, 'completions');
      assert.equal(
        s.remote?.completionRouteReason,
        'the server refused /infill: HTTP 501: Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing.',
      );
      assert.ok(ls.logs.some((l) => l.startsWith('remote backend: completions go to /v1/completions: the server refused /infill: HTTP 501')));
      await ls.open('file:///w/main.py', 'python', MAIN);
      await ls.complete('file:///w/main.py', 3, 11);
      const sent = await fake.waitForRequest((r) => r.path === '/v1/completions');
      assert.equal(typeof sent.body?.prompt, 'string');
      assert.equal(fake.requests.filter((r) => r.path === '/infill').length, 1, 'only the probe went to /infill');
    },
    fake,
  );
});

test('the setting: completions keeps /v1/completions for a FIM model; a change to auto moves ghost text to /infill without a restart', T, async () => {
  const fake = await startLlamaServer({ fim: true });
  await withLanguageServer(
    init(fake.base, 'completions'),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.completionRoute !== undefined);
      assert.equal(s.remote?.completionRoute, 'completions');
      assert.equal(s.remote?.completionRouteReason, 'k3.completions.remote.route is completions');
      await ls.open('file:///w/main.py', 'python', MAIN);
      await ls.complete('file:///w/main.py', 3, 11);
      await fake.waitForRequest((r) => r.path === '/v1/completions');
      await ls.connection.sendNotification(DidChangeConfigurationNotification.type, { settings: { k3: { completions: { remoteRoute: 'auto' } } } });
      await ls.waitForStatus((x) => x.remote?.completionRoute === 'infill');
      await ls.complete('file:///w/main.py', 3, 11);
      await fake.waitForRequest((r) => r.path === '/infill' && r.body?.stream === true);
    },
    fake,
  );
});

test('infill forced, refused after the check (the model was swapped): the same request falls back to /v1/completions and answers; the status says why', T, async () => {
  const fake = await startLlamaServer({ fim: true });
  await withLanguageServer(
    init(fake.base, 'infill'),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.completionRoute !== undefined);
      assert.equal(s.remote?.completionRoute, 'infill');
      assert.equal(s.remote?.completionRouteReason, 'k3.completions.remote.route is infill');
      fake.options.fim = false;
      await ls.open('file:///w/main.py', 'python', MAIN);
      fake.scripts.push({ pieces: [{ content: 'width * height' }], end: { done: true } });
      const got = await ls.complete('file:///w/main.py', 3, 11);
      assert.equal(got?.items[0]?.insertText, 'width * height', 'answered through /v1/completions');
      const refused = fake.requests.find((r) => r.path === '/infill' && r.body?.stream === true);
      assert.equal(refused?.status, 501);
      await fake.waitForRequest((r) => r.path === '/v1/completions');
      const after = await ls.waitForStatus((x) => x.remote?.completionRoute === 'completions');
      assert.match(after.remote?.completionRouteReason ?? '', /^k3\.completions\.remote\.route is infill, but the server refused \/infill: HTTP 501: Infill is not supported/);
    },
    fake,
  );
});

test('a cancelled /infill completion closes the stream, so the server stops generating', T, async () => {
  const fake = await startLlamaServer({ fim: true });
  await withLanguageServer(
    init(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.remote?.completionRoute === 'infill');
      await ls.open('file:///w/main.py', 'python', MAIN);
      fake.scripts.push({ pieces: [{ content: 'width' }], end: { stall: true } });
      const token = new CancellationTokenSource();
      const reply = ls.complete('file:///w/main.py', 3, 11, token);
      const sent = await fake.waitForRequest((r) => r.path === '/infill' && r.body?.stream === true);
      token.cancel();
      await assert.rejects(reply, (e: unknown) => e instanceof ResponseError && e.code === LSPErrorCodes.RequestCancelled);
      await sent.closed;
      await ls.waitFor(ls.logs, (l) => l.startsWith('completion (engine, cancelled)'));
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).lastCompletion?.outcome, 'cancelled');
    },
    fake,
  );
});
