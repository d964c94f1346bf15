// remote-hostile.test.ts - a broken or hostile remote endpoint cannot crash or wedge the
// language server (issue 18, item 6): an endless or oversized GET /v1/models body, an
// endless HTTP error body, a server-sent-event stream without line ends, and one event of
// endless data lines each end in a clear error naming the route and the byte counts, and
// the server lives on with bounded memory (issue 31, item 4): a server that ignores
// max_tokens and streams forever has its chat reply cut at the budget plus a margin
// (server/remote/budget.ts), in pieces and in bytes, and one that streams empty events
// forever meets the deadline of the turn (10 x k3.remote.timeoutMs) or of the completion
// (2 x). Driven as the editor drives it; each test
// awaits the outcome, never time.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import type * as http from 'node:http';
import { test } from 'node:test';
import { ChatSendRequest, K3ErrorCodes, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, TEST_TIMEOUT_MS } from '../support/lsp';
import { event, type FakeServer, json, type Recorded, startEvents, startFake } from './fakes/core';
import { failure, remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };
const MODELS = { object: 'list', data: [{ id: 'kimi-k3', object: 'model', owned_by: 'vllm', max_model_len: 8192 }] };

/** Writes `piece` until the client goes, as fast as the socket takes it. */
function endless(res: http.ServerResponse, piece: Buffer): void {
  const more = (): void => {
    while (!res.destroyed && res.write(piece));
    if (!res.destroyed) res.once('drain', more);
  };
  res.on('close', () => res.removeAllListeners('drain'));
  more();
}

/** A server that lists a model and answers generations with `generation`. */
function withGeneration(generation: (r: Recorded, res: http.ServerResponse) => void): (r: Recorded, res: http.ServerResponse, fake: FakeServer) => void {
  return (r, res) => (r.path === '/v1/models' ? json(res, 200, MODELS) : generation(r, res));
}

/** The language server's resident memory, MiB. */
function rssMiB(ls: ServerHandle): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${ls.proc.pid}/status`, 'utf8'));
  return Number(m?.[1]) / 1024;
}

test('an endless GET /v1/models body is refused at 4 MiB, naming the route and the bytes; the language server lives on', T, async () => {
  const fake = await startFake((_r, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write('{"object":"list","data":[');
    endless(res, Buffer.from(`${'{"id":"m","object":"model"},'.repeat(2000)}`));
  });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.equal(s.error?.kind, 'remote-failed');
      assert.match(s.error?.detail ?? '', /^GET http:\/\/127\.0\.0\.1:\d+\/v1\/models: the answer is over 4194304 bytes \(read so far \d+\)/);
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).phase, 'error', 'the server still answers');
      assert.ok(rssMiB(ls) < 400, `resident memory ${rssMiB(ls).toFixed(0)} MiB`);
    },
    fake,
  );
});

test('a Content-Length over the bound is refused before the body is read', T, async () => {
  const fake = await startFake((_r, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(1 << 30) });
    res.write('{');
  });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'error');
      assert.match(s.error?.detail ?? '', /\/v1\/models: the answer is over 4194304 bytes \(Content-Length 1073741824\)/);
    },
    fake,
  );
});

test('an endless HTTP error body is cut at 64 KiB: the request fails at once with the status, not at the timeout', T, async () => {
  const fake = await startFake(
    withGeneration((_r, res) => {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      endless(res, Buffer.from('overloaded '.repeat(1000)));
    }),
  );
  await withLanguageServer(
    remoteInit(fake.base, { timeoutMs: 60_000 }),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 4 }));
      assert.equal(e.code, K3ErrorCodes.EngineFailed);
      assert.match(e.data?.detail ?? '', /chat\/completions failed on the server \(HTTP 500\): overloaded overloaded/);
      assert.ok((e.data?.detail ?? '').length < 1000, 'the text shown is clipped');
    },
    fake,
  );
});

test('an event stream without line ends ends the chat at 1 MiB with a clear error, instead of keeping it busy', T, async () => {
  const fake = await startFake(
    withGeneration((_r, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"content":"');
      endless(res, Buffer.alloc(64 << 10, 'x'));
    }),
  );
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 4 }));
      assert.equal(e.data?.kind, 'remote-failed');
      assert.match(
        e.data?.detail ?? '',
        /^POST http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: a line of the event stream is over 1048576 bytes \(\d+ bytes without a line end\), after \d+ bytes and 0 events$/,
      );
      assert.notEqual((await ls.connection.sendRequest(StatusRequest.type)).phase, 'busy', 'the chat is over');
      assert.ok(ls.logs.some((l) => l.includes('a line of the event stream is over 1048576 bytes')));
    },
    fake,
  );
});

test('one event of endless data lines is refused at 1 MiB', T, async () => {
  const fake = await startFake(
    withGeneration((_r, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      endless(res, Buffer.from(`data: ${'y'.repeat(1000)}\n`.repeat(50)));
    }),
  );
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const e = await failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 4 }));
      assert.match(e.data?.detail ?? '', /an event of the event stream is over 1048576 bytes \(\d+ bytes of data lines\)/);
    },
    fake,
  );
});

/** A generation answer that streams `piece` as one event after another, as fast as the
 * socket takes them, whatever max_tokens said; `closed` resolves when the client hangs up. */
function forever(piece: unknown): { handler: (r: Recorded, res: http.ServerResponse) => void; closed: Promise<void> } {
  let hungUp!: () => void;
  const closed = new Promise<void>((resolve) => (hungUp = resolve));
  return {
    closed,
    handler: (_r, res) => {
      res.on('close', hungUp);
      startEvents(res);
      endless(res, Buffer.from(`data: ${JSON.stringify(piece)}\n\n`.repeat(64)));
    },
  };
}

test('a chat server that ignores max_tokens and streams forever: the reply is cut at the budget, memory stays bounded, k3/status answers', T, async () => {
  const server = forever({ choices: [{ delta: { content: 'tok ' }, finish_reason: null }] });
  const fake = await startFake(withGeneration(server.handler));
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const before = rssMiB(ls);
      const reply = ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 8 });
      await ls.waitFor(ls.streams, () => true);
      await ls.connection.sendRequest(StatusRequest.type);
      const r = await reply;
      // max_tokens 8 plus the margin of 16 pieces; the rest of the stream was never read.
      assert.equal(r.message.content, 'tok '.repeat(24));
      assert.equal(r.message.stopReason, 'length');
      assert.equal(r.warnings.length, 1, JSON.stringify(r.warnings));
      assert.equal(r.warnings[0].kind, 'remote-failed');
      assert.match(r.warnings[0].message, /kept sending after the reply's 8 tokens, so the reply was cut there/);
      assert.match(r.warnings[0].detail ?? '', /more than 24 pieces for max_tokens 8; the stream was closed after 25 pieces/);
      await server.closed;
      const s = await ls.connection.sendRequest(StatusRequest.type);
      assert.equal(s.phase, 'ready', 'the turn is over and the server still usable');
      assert.ok(rssMiB(ls) - before < 100, `resident memory grew from ${before.toFixed(0)} to ${rssMiB(ls).toFixed(0)} MiB`);
    },
    fake,
  );
});

test('a chat server streaming endless pieces of 100 KB is cut at the budget in bytes', T, async () => {
  const server = forever({ choices: [{ delta: { reasoning_content: 'z'.repeat(100_000) } }] });
  const fake = await startFake(withGeneration(server.handler));
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const r = await ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 8 });
      assert.equal(r.message.reasoning.length + r.message.content.length, 24 * 256);
      assert.match(r.warnings[0]?.detail ?? '', /more than 6144 bytes of text for max_tokens 8/);
      await server.closed;
    },
    fake,
  );
});

test('a chat server that streams empty events forever meets the turn deadline (10 x k3.remote.timeoutMs), and k3/status answers meanwhile', T, async () => {
  const fake = await startFake(
    withGeneration((_r, res) => {
      startEvents(res);
      // Events, not keep-alive comments: each one restarts the inter-event timeout.
      const timer = setInterval(() => event(res, { choices: [{ delta: {}, finish_reason: null }] }), 20);
      res.on('close', () => clearInterval(timer));
    }),
  );
  await withLanguageServer(
    remoteInit(fake.base, { timeoutMs: 1000 }),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      const reply = failure(ls.connection.sendRequest(ChatSendRequest.type, { message: 'hi', maxTokens: 8 }));
      await fake.waitForRequest((r) => r.path === '/v1/chat/completions');
      // Only the deadline ends this turn, so it is still running when the status answers.
      const during = await ls.connection.sendRequest(StatusRequest.type);
      assert.equal(during.phase, 'busy');
      const e = await reply;
      assert.equal(e.data?.kind, 'remote-timeout');
      assert.equal(e.data?.status, 'deadline');
      assert.match(e.data?.detail ?? '', /chat\/completions: the reply took longer than 10000 ms in all \(10 x k3\.remote\.timeoutMs\)/);
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).phase, 'ready', 'a deadline does not make the server unusable');
    },
    fake,
  );
});

test('a completion server that streams empty events forever meets the request deadline (2 x k3.remote.timeoutMs)', T, async () => {
  const fake = await startFake(
    withGeneration((_r, res) => {
      startEvents(res);
      const timer = setInterval(() => event(res, { choices: [{ text: '', finish_reason: null }] }), 20);
      res.on('close', () => clearInterval(timer));
    }),
  );
  await withLanguageServer(
    remoteInit(fake.base, { timeoutMs: 1000 }),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready');
      await ls.open('file:///w/a.py', 'python', 'value = ');
      const done = failure(ls.complete('file:///w/a.py', 0, 8));
      await fake.waitForRequest((r) => r.path === '/v1/completions');
      assert.equal((await ls.connection.sendRequest(StatusRequest.type)).phase, 'busy', 'the completion still runs, and the status answers');
      const e = await done;
      assert.equal(e.data?.kind, 'remote-timeout');
      assert.match(e.data?.detail ?? '', /completions: the reply took longer than 2000 ms in all \(2 x k3\.remote\.timeoutMs\)/);
    },
    fake,
  );
});
