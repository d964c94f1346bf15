// remote-hostile.test.ts - a broken or hostile remote endpoint cannot crash or wedge the
// language server (issue 18, item 6): an endless or oversized GET /v1/models body, an
// endless HTTP error body, a server-sent-event stream without line ends, and one event of
// endless data lines each end in a clear error naming the route and the byte counts, and
// the server lives on with bounded memory. Driven as the editor drives it; each test
// awaits the outcome, never time.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import type * as http from 'node:http';
import { test } from 'node:test';
import { ChatSendRequest, K3ErrorCodes, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, TEST_TIMEOUT_MS } from '../support/lsp';
import { type FakeServer, json, type Recorded, startFake } from './fakes/core';
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
