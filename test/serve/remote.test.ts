// remote.test.ts - the language server's remote backend against `k3 serve` on the tiny
// fixture over real HTTP on 127.0.0.1, driven like the extension drives it (the bundled
// dist/server.js and a real LSP client): completions and chat replies equal the local
// backend's for the same input (greedy both ways); a newer completion supersedes the one in
// flight; a keystroke after a completion prefills one token on the server; a reply streams piece by piece; stopping a reply stops the
// generation on the server; a server killed mid-reply gives a clear error and the next
// request, once it is back, succeeds; a wrong key (401), a wrong model (404), a closed
// port and a server that never answers are told apart in the status, with the local
// engine's error codes; the API key is never logged; presets say they apply to the local
// engine only.
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { after, before, test } from 'node:test';
import { LSPErrorCodes } from 'vscode-languageserver-protocol/node';
import {
  ChatSendRequest,
  ChatStopRequest,
  K3ErrorCodes,
  type K3Problem,
  ModelLoadRequest,
  PresetsListRequest,
  RemoteApiKeyRequest,
  StatusRequest,
  type InitializationOptions,
} from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';
import { closedPort, failure } from './remote-client';
import { type Serve, startServe } from './support';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });
// k3 serve heals the prompt end as the local engine does (k3_heal); the fixture's random
// weights write junk, so no junk filter, to compare like with like.
const settings = { engine: { threads: 1, speculation: 4 }, completions: { maxTokens: 48, filter: false } };
const SERVE_ARGS = ['--ctx', '4096', '--spec', '4'];

let serve: Serve;
let local: ServerHandle;
let remote: ServerHandle;

function remoteOptions(endpoint: string, extra: Partial<NonNullable<InitializationOptions['remote']>> = {}): InitializationOptions {
  return { modelPath: dir, settings, backend: 'remote', remote: { endpoint, timeoutMs: 30_000, ...extra } };
}

before(
  async () => {
    serve = await startServe(dir, { args: SERVE_ARGS });
    local = await startServer({ modelPath: dir, settings });
    remote = await startServer(remoteOptions(serve.base));
    await waitReady(local);
    await waitReady(remote);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await local.shutdown();
  await remote.shutdown();
  await serve.stop();
});

test("completions through k3 serve equal the local engine's, for the same documents and positions", { timeout: TEST_TIMEOUT_MS }, async () => {
  const docs: Array<[string, string, string, number, number]> = [
    ['file:///w/add.py', 'python', 'def add(a, b):\n    return a + b\n\nresult = add(\nprint(result)\n', 3, 'result = add('.length],
    ['file:///w/sort.ts', 'typescript', 'export function sorted(xs: number[]) {\n  return ', 1, '  return '.length],
    ['file:///w/empty.go', 'go', 'package main\n\nfunc main() {\n', 3, 0],
  ];
  for (const [uri, lang, text, line, character] of docs) {
    await local.open(uri, lang, text);
    await remote.open(uri, lang, text);
    const want = await local.complete(uri, line, character);
    const got = await remote.complete(uri, line, character);
    assert.deepEqual(got?.items.map((i) => i.insertText), want?.items.map((i) => i.insertText), uri);
    const [l, r] = await Promise.all([local.connection.sendRequest(StatusRequest.type), remote.connection.sendRequest(StatusRequest.type)]);
    assert.equal(r.lastCompletion?.source, 'engine');
    assert.equal(r.lastCompletion?.promptTokens, l.lastCompletion?.promptTokens, 'the same prompt ids went to the server');
  }
});

test('a newer remote completion supersedes the one in flight, which closes its stream', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/super.ts';
  const text = 'export function twice(x: number) {\n  return ';
  await local.open(uri, 'typescript', text);
  await remote.open(uri, 'typescript', text);
  const older = remote.complete(uri, 1, 'return '.length - 2);
  const newer = remote.complete(uri, 1, 'return '.length);
  const e = await failure(older);
  assert.equal(e.code, LSPErrorCodes.ServerCancelled);
  assert.deepEqual((await newer)?.items.map((i) => i.insertText), (await local.complete(uri, 1, 'return '.length))?.items.map((i) => i.insertText));
  const s = (await remote.connection.sendRequest(StatusRequest.type)).lastCompletion;
  assert.equal(s?.outcome, 'done');
});

test('a keystroke after a remote completion prefills only the finished piece on k3 serve, which heals the rest', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/keys.py';
  await remote.open(uri, 'python', 'def mul(a, b):\n    return a * b\n\n');
  const first = await remote.complete(uri, 3, 0);
  const typed = first?.items[0]?.insertText.toString().startsWith('x') ? 'y' : 'x';
  // Inside the line's last piece: the same prompt, k3 serve spells the typed letter again.
  await remote.type(uri, 2, 3, 0, typed);
  await remote.complete(uri, 3, 1);
  const s1 = (await remote.connection.sendRequest(StatusRequest.type)).lastCompletion;
  assert.equal(s1?.source, 'engine');
  assert.equal(s1?.healedText, typed);
  assert.equal(s1?.prefilledTokens, 0);
  // A space finishes the piece: one token read.
  await remote.type(uri, 3, 3, 1, ' ');
  await remote.complete(uri, 3, 2);
  const s2 = (await remote.connection.sendRequest(StatusRequest.type)).lastCompletion;
  assert.equal(s2?.source, 'engine');
  assert.equal(s2?.prefilledTokens, 1);
  assert.equal(s2?.reusedTokens, (s2?.promptTokens ?? 0) - 1);
});

test("chat replies through k3 serve equal the local engine's, and stream piece by piece", { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const thinking of [true, false]) {
    const message = thinking ? 'What is a monad?' : 'Write a haiku about rust.';
    const want = await local.connection.sendRequest(ChatSendRequest.type, { message, maxTokens: 32, thinking });
    const got = await remote.connection.sendRequest(ChatSendRequest.type, { message, maxTokens: 32, thinking });
    assert.equal(got.message.reasoning, want.message.reasoning, 'reasoning');
    assert.equal(got.message.content, want.message.content, 'content');
    assert.equal(got.message.stopReason, want.message.stopReason);
    assert.equal(got.stats.promptTokens, want.stats.promptTokens, 'k3 serve rendered as many prompt tokens');
    assert.equal(got.stats.generatedTokens, want.stats.generatedTokens);
    const pieces = remote.streams.filter((s) => s.messageId === got.message.id);
    assert.ok(pieces.length > 1, `${pieces.length} pieces`);
    const text = (channel: string): string => pieces.filter((p) => p.channel === channel).map((p) => p.text).join('');
    // Reasoning that never ended (32 tokens) is recorded as the answer; it streamed as reasoning.
    assert.equal(text('reasoning') + text('content'), got.message.reasoning + got.message.content);
    if (got.message.reasoning !== '') assert.equal(text('reasoning'), got.message.reasoning);
  }
});

test('stopping a remote reply closes the stream and stops the generation on the server', { timeout: TEST_TIMEOUT_MS }, async () => {
  const MAX = 3000;
  const before = remote.streams.length;
  const reply = remote.connection.sendRequest(ChatSendRequest.type, { message: 'Tell me everything.', maxTokens: MAX });
  const piece = await remote.waitFor(remote.streams, (s) => remote.streams.indexOf(s) >= before);
  const from = serve.log.length;
  assert.deepEqual(await remote.connection.sendRequest(ChatStopRequest.type, { conversationId: piece.conversationId }), { stopped: true });
  const r = await reply;
  assert.equal(r.message.stopReason, 'stopped');
  const line = await serve.waitForLog((l) => serve.log.indexOf(l) >= from && /chat\/completions 499 in .*generated \d+/.test(l));
  const generated = Number(/generated (\d+)/.exec(line)?.[1]);
  assert.ok(generated < MAX, `the server stopped after ${generated} of ${MAX} tokens`);
});

test('k3 serve killed mid-reply: the reply so far is kept with a clear warning, the status says so, and the next request succeeds once it is back', { timeout: TEST_TIMEOUT_MS }, async () => {
  const port = serve.port;
  const reply = remote.connection.sendRequest(ChatSendRequest.type, { message: 'A very long answer, please.', maxTokens: 3000 });
  const before = remote.streams.length;
  await remote.waitFor(remote.streams, (s) => remote.streams.indexOf(s) >= before);
  await serve.kill();
  const r = await reply;
  assert.equal(r.message.stopReason, 'stopped');
  const arrived = remote.streams.filter((s) => s.messageId === r.message.id);
  assert.equal(r.message.reasoning + r.message.content, arrived.map((s) => s.text).join(''), 'what arrived is the reply');
  assert.equal(r.warnings[0]?.kind, 'remote-failed');
  assert.match(r.warnings[0]?.message ?? '', /stopped answering in the middle of a reply\. The reply so far is kept\./);
  assert.ok(remote.problems.some((p) => p.kind === 'remote-failed'), 'the user is told, with Show Logs');
  const down = await remote.waitForStatus((s) => s.phase === 'error');
  assert.ok(down.error?.kind === 'remote-failed' || down.error?.kind === 'remote-unreachable', down.error?.kind);

  serve = await startServe(dir, { args: [...SERVE_ARGS, '--port', String(port)] });
  await remote.waitForStatus((s) => s.phase === 'ready');
  const again = await remote.connection.sendRequest(ChatSendRequest.type, { message: 'Are you back?', maxTokens: 8 });
  assert.equal(again.stats.generatedTokens, 8);
  await remote.open('file:///w/back.py', 'python', 'x = 1\ny = ');
  const completion = await remote.complete('file:///w/back.py', 1, 4);
  assert.ok(completion, 'a completion answers again');
});

test('a wrong API key (401) is told apart, and k3/remote/setApiKey recovers without a restart; the key is never logged', { timeout: TEST_TIMEOUT_MS }, async () => {
  const locked = await startServe(dir, { args: SERVE_ARGS, env: { K3_API_KEY: 'open-sesame-42' } });
  const server = await startServer(remoteOptions(locked.base, { apiKey: 'wrong-key-17' }));
  try {
    const s = await server.waitForStatus((x) => x.phase === 'error');
    assert.equal(s.error?.kind, 'remote-unauthorized');
    assert.equal(s.error?.action.kind, 'set-api-key');
    const e = await failure(server.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
    assert.equal(e.code, K3ErrorCodes.NoModel);
    assert.equal(e.data?.kind, 'remote-unauthorized');
    assert.deepEqual(await server.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'open-sesame-42' }), { phase: 'ready' });
    const ok = await server.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 });
    assert.equal(ok.stats.generatedTokens, 2);
    const everything = [...server.logs, ...server.problems.map((p) => JSON.stringify(p)), JSON.stringify(server.statuses), ...locked.log].join('\n');
    assert.ok(!everything.includes('open-sesame-42') && !everything.includes('wrong-key-17'), 'no key in logs, problems or status');
  } finally {
    await server.shutdown();
    await locked.stop();
  }
});

test('a model the server does not serve (404), a closed port and a server that never answers are told apart', { timeout: TEST_TIMEOUT_MS }, async () => {
  const wrongModel = await startServer(remoteOptions(serve.base, { model: 'kimi-k3-nope' }));
  const closed = await startServer(remoteOptions(`http://127.0.0.1:${await closedPort()}`));
  const silent = net.createServer(() => undefined); // accepts, never answers
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const mute = await startServer(remoteOptions(`http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/v1`, { timeoutMs: 1000 }));
  try {
    const m = await wrongModel.waitForStatus((s) => s.phase === 'error');
    assert.equal(m.error?.kind, 'remote-model-missing');
    assert.match(m.error?.detail ?? '', /the server lists tiny-lowerbound-s1, not kimi-k3-nope/);
    const c = await closed.waitForStatus((s) => s.phase === 'error');
    assert.equal(c.error?.kind, 'remote-unreachable');
    assert.equal(c.error?.action.kind, 'open-remote-settings');
    const e = await failure(closed.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 2 }));
    assert.equal(e.code, K3ErrorCodes.NoModel);
    assert.match(e.message, /cannot be reached/);
    const t = await mute.waitForStatus((s) => s.phase === 'error');
    assert.equal(t.error?.kind, 'remote-timeout');
    assert.match(t.error?.detail ?? '', /no answer within 1000 ms/);
  } finally {
    await Promise.all([wrongModel.shutdown(), closed.shutdown(), mute.shutdown()]);
    silent.close();
  }
});

test('with the remote backend, presets and model loads say they apply to the local engine only', { timeout: TEST_TIMEOUT_MS }, async () => {
  const list = await remote.connection.sendRequest(PresetsListRequest.type);
  assert.match(list.note ?? '', /apply to the local engine only/);
  const status = await remote.connection.sendRequest(StatusRequest.type);
  assert.deepEqual(status.remote, {
    endpoint: `${serve.base}/v1`,
    model: 'tiny-lowerbound-s1',
    prompts: 'ids',
    server: 'k3-serve',
    contextTokens: 4096,
    completionRoute: 'completions',
    completionRouteReason: "auto: /infill is llama-server's, and this server is k3-serve",
  });
  const e = await failure(remote.connection.sendRequest(ModelLoadRequest.type, { modelPath: dir }));
  assert.equal(e.data?.kind, 'invalid-request');
  assert.match(e.message, /local engine only/);
});

test('an API key bound for another machine over http:// is warned about; https, loopback and no key are not', { timeout: TEST_TIMEOUT_MS }, async () => {
  const insecure = (s: ServerHandle): K3Problem[] => s.problems.filter((p) => p.kind === 'remote-insecure');
  // TEST-NET-1: a non-loopback address that answers nothing; the check fails within the timeout.
  const far = await startServer(remoteOptions('http://192.0.2.1:9', { timeoutMs: 1000 }));
  const farTls = await startServer(remoteOptions('https://192.0.2.1:9', { apiKey: 'tls-key-31', timeoutMs: 1000 }));
  const near = await startServer(remoteOptions(serve.base.replace('127.0.0.1', 'localhost'), { apiKey: 'near-key-55' }));
  try {
    await far.waitForStatus((x) => x.phase === 'error');
    assert.deepEqual(insecure(far), [], 'no key, no warning');
    await far.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'far-key-88' });
    const warning = await far.waitFor(far.problems, (p) => p.kind === 'remote-insecure');
    assert.match(warning.message, /sent unencrypted to 192\.0\.2\.1:9/);
    assert.equal(warning.action.kind, 'open-remote-settings');
    assert.ok(!JSON.stringify(far.problems).includes('far-key-88'), 'the key itself is not in the warning');
    await farTls.waitForStatus((x) => x.phase === 'error');
    assert.deepEqual(insecure(farTls), [], 'https: no warning');
    await waitReady(near);
    assert.deepEqual(insecure(near), [], 'loopback: no warning');
  } finally {
    await far.shutdown();
    await farTls.shutdown();
    await near.shutdown();
  }
});
