// roles.test.ts - ghost text and chat each on their own backend, one language server driven
// as the editor drives it (the bundled dist/server.js, roles in initializationOptions):
// completions on the embedded k3-mini and chat on `k3 serve` on the tiny fixture over real
// HTTP. Each request goes to its role's backend (k3 serve's request log holds the chat and
// no completion; the engine's status holds the completion), the status names both roles,
// and a chat from k3-mini's window is a real chat reply, not k3-mini's continuation. Two
// different local models both load when memory holds both plans (K3_MEM_AVAILABLE stands in
// for a smaller machine), else chat is refused naming both, while ghost text goes on; both
// roles on one folder load it once. A key goes to the role that names a server.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { ChatSendRequest, ChatStopRequest, K3ErrorCodes, RemoteApiKeyRequest, StatusRequest, type InitializationOptions } from '../../protocol/lsp';
import { ErrorCodes } from 'vscode-languageserver-protocol/node';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile, repoRoot } from '../support/paths';
import { memoryText } from '../../server/ctx';
import { failure } from './remote-client';
import { type Serve, startServe } from './support';

process.env.K3_ADDON ??= addonFile;
const fixture = ensureFixture({ gate: 'lowerbound' });
const k3mini = path.join(repoRoot, 'media/models/k3-mini');
const settings = { engine: { threads: 1, speculation: 4 }, completions: { maxTokens: 16 } };

let serve: Serve;
let ls: ServerHandle;

function rolesInit(endpoint: string): InitializationOptions {
  return {
    modelPath: k3mini,
    settings,
    roles: {
      completions: { backend: 'embedded', modelPath: k3mini },
      chat: { backend: 'remote', remote: { endpoint, timeoutMs: 30_000 } },
    },
  };
}

before(
  async () => {
    serve = await startServe(fixture, { args: ['--ctx', '4096'] });
    ls = await startServer(rolesInit(serve.base));
    await waitReady(ls);
    await ls.waitForStatus((s) => s.roles.chat.phase === 'ready');
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await ls.shutdown();
  await serve.stop();
});

test('the status names both roles: k3-mini embedded for ghost text, the fixture on k3 serve for chat', { timeout: TEST_TIMEOUT_MS }, async () => {
  const s = await ls.connection.sendRequest(StatusRequest.type);
  assert.equal(s.roles.completions.backend, 'embedded');
  assert.equal(s.roles.completions.model, 'k3-mini');
  assert.equal(s.roles.completions.where, k3mini);
  assert.equal(s.roles.completions.chats, false);
  assert.equal(s.roles.completions.phase, 'ready');
  assert.equal(s.roles.chat.backend, 'remote');
  assert.equal(s.roles.chat.model, path.basename(fixture), 'k3 serve lists the folder name');
  assert.equal(s.roles.chat.where, `${serve.base}/v1`);
  assert.equal(s.roles.chat.remote?.server, 'k3-serve');
  assert.equal(s.roles.chat.phase, 'ready');
  // The top level still describes the local engine (k3-mini), and `remote` the chat's server.
  assert.equal(s.model?.name, 'k3-mini');
  assert.equal(s.remote?.endpoint, `${serve.base}/v1`);
});

test('a completion runs on k3-mini in the language server and never reaches k3 serve', { timeout: TEST_TIMEOUT_MS }, async () => {
  const from = serve.log.length;
  const uri = 'file:///w/add.ts';
  await ls.open(uri, 'typescript', 'export function add(a: number, b: number): number {\n  return ');
  await ls.complete(uri, 1, '  return '.length);
  const s = await ls.connection.sendRequest(StatusRequest.type);
  assert.equal(s.lastCompletion?.source, 'engine');
  assert.ok((s.lastCompletion?.generatedTokens ?? 0) > 0, 'k3-mini generated it');
  assert.ok((s.lastCompletion?.promptTokens ?? 0) > 0);
  assert.deepEqual(
    serve.log.slice(from).filter((l) => /\/v1\/completions/.test(l)),
    [],
    'no completion request reached the chat role\'s server',
  );
});

test("a chat message goes to k3 serve and streams its reply there, not as k3-mini's continuation", { timeout: TEST_TIMEOUT_MS }, async () => {
  const from = serve.log.length;
  const streamedBefore = ls.streams.length;
  const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'What is a monad?', maxTokens: 24, thinking: false });
  assert.equal(r.message.completionModel, undefined, 'not labelled as a completion model\'s continuation');
  assert.ok(r.stats.generatedTokens > 0);
  const chatLine = await serve.waitForLog((l) => serve.log.indexOf(l) >= from && /chat\/completions 200/.test(l));
  assert.match(chatLine, /generated \d+/);
  const pieces = ls.streams.slice(streamedBefore).filter((p) => p.messageId === r.message.id);
  assert.ok(pieces.length > 1, `streamed in ${pieces.length} pieces`);
  assert.equal(pieces.map((p) => p.text).join(''), r.message.reasoning + r.message.content);
  const s = await ls.connection.sendRequest(StatusRequest.type);
  assert.equal(s.lastChat?.conversationId, r.conversationId);
  assert.equal(s.roles.completions.phase, 'ready', 'ghost text was never held up by the chat');
  assert.equal(await ls.connection.sendRequest(ChatStopRequest.type, { conversationId: r.conversationId }).then((x) => x.stopped), false);
});

/** Two local models; `mapped` so that each plan is the same whatever memory is available
 * (`auto` sizes its budgets from it). */
function twoLocal(): InitializationOptions {
  return {
    modelPath: k3mini,
    preset: 'mapped',
    settings,
    roles: { completions: { backend: 'embedded', modelPath: k3mini }, chat: { backend: 'local', modelPath: fixture } },
  };
}

/** A chat turn and a completion on a server holding two local models. */
async function chatAndComplete(server: ServerHandle): Promise<void> {
  const r = await server.connection.sendRequest(ChatSendRequest.type, { message: 'What is a monad?', maxTokens: 8, thinking: false });
  assert.ok(r.stats.generatedTokens > 0, 'chat answered on its own model');
  assert.equal(r.message.completionModel, undefined, "the fixture's reply, not k3-mini's continuation under the notice");
  const uri = 'file:///w/b.py';
  await server.open(uri, 'python', 'def mul(a, b):\n    return ');
  await server.complete(uri, 1, '    return '.length);
  const s = await server.connection.sendRequest(StatusRequest.type);
  assert.equal(s.lastCompletion?.source, 'engine');
  assert.ok((s.lastCompletion?.generatedTokens ?? 0) > 0, 'k3-mini answered the ghost text');
}

let twoModels: { completions: number; chat: number } | undefined;

test('two different local models that fit together: both load, ghost text on k3-mini and chat on the other', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer(twoLocal());
  try {
    await waitReady(server);
    const s = await server.waitForStatus((x) => x.roles.chat.phase === 'ready');
    assert.equal(s.roles.completions.model, 'k3-mini');
    assert.equal(s.roles.completions.where, k3mini);
    assert.equal(s.roles.chat.model, path.basename(fixture));
    assert.equal(s.roles.chat.where, fixture);
    assert.equal(s.roles.chat.chats, true);
    const completions = s.roles.completions.memoryBytes ?? 0;
    const chat = s.roles.chat.memoryBytes ?? 0;
    assert.ok(completions > 0 && chat > 0 && completions !== chat, `each role names its own model's memory (${completions}, ${chat} bytes)`);
    twoModels = { completions, chat };
    await chatAndComplete(server);
  } finally {
    await server.shutdown();
  }
});

test("two different local models that do not fit together: chat is refused naming both models' memory, ghost text still answers", { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (!twoModels) return t.skip('needs the fitting case first for the two plans');
  // Memory for either model alone, not for both.
  const available = twoModels.completions + twoModels.chat - 1;
  const server = await startServer(twoLocal(), { env: { K3_MEM_AVAILABLE: String(available) } });
  try {
    await waitReady(server);
    const s = await server.waitForStatus((x) => x.roles.chat.phase === 'error' || x.roles.chat.phase === 'ready');
    assert.equal(s.roles.chat.phase, 'error');
    assert.equal(s.roles.chat.error?.kind, 'out-of-memory');
    assert.equal(s.roles.chat.error?.action.kind, 'choose-chat-backend');
    const gb = (b: number): string => memoryText(b).replace('.', '\\.');
    const message = s.roles.chat.error?.message ?? '';
    assert.match(message, new RegExp(`local model at ${fixture}, which needs ${gb(twoModels.chat)}`));
    assert.match(message, new RegExp(`the one at ${k3mini}, which holds ${gb(twoModels.completions)}`));
    assert.match(message, new RegExp(`more than the ${gb(available)} this machine has available`));
    assert.equal(s.roles.completions.phase, 'ready');
    const e = await failure(server.connection.sendRequest(ChatSendRequest.type, { message: 'hello' }));
    assert.equal(e.code, K3ErrorCodes.NoModel);
    assert.match(e.message, /more than the .* this machine has available/);
    const uri = 'file:///w/b.py';
    await server.open(uri, 'python', 'def mul(a, b):\n    return ');
    await server.complete(uri, 1, '    return '.length);
    assert.equal((await server.connection.sendRequest(StatusRequest.type)).lastCompletion?.source, 'engine');
  } finally {
    await server.shutdown();
  }
});

test('a new API key goes to the remote role; naming a role on the local engine is refused', { timeout: TEST_TIMEOUT_MS }, async () => {
  assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: '', role: 'chat' }), { phase: 'ready' });
  const e = await failure(ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: 'k', role: 'completions' }));
  assert.equal(e.code, ErrorCodes.InvalidParams);
  assert.match(e.message, /the completions role uses the local engine/);
});

test('both roles on one local folder load it once and both answer from it', { timeout: TEST_TIMEOUT_MS }, async () => {
  const server = await startServer({
    modelPath: k3mini,
    settings,
    roles: { completions: { backend: 'embedded', modelPath: k3mini }, chat: { backend: 'local', modelPath: k3mini } },
  });
  try {
    await waitReady(server);
    const s = await server.connection.sendRequest(StatusRequest.type);
    assert.equal(s.roles.completions.model, 'k3-mini');
    assert.equal(s.roles.chat.model, 'k3-mini');
    assert.equal(s.roles.chat.phase, 'ready');
    const r = await server.connection.sendRequest(ChatSendRequest.type, { message: 'def add(a, b):' });
    assert.equal(r.message.completionModel, 'k3-mini', 'chat ran on the one loaded k3-mini');
    assert.equal(server.logs.filter((l) => /^model loaded from /.test(l)).length, 1, server.logs.join('\n'));
  } finally {
    await server.shutdown();
  }
});
