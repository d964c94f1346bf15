// shard-changed.test.ts - `k3 serve` (weights mapped, the default) when a model shard is
// truncated under it: the request running then, and every request after it, queued or
// not, gets 500 with the `io` error naming the file; /health answers 503 with that problem
// instead of "ok"; the process keeps serving and exits 0 on SIGTERM. Before the engine
// caught this, the server died of SIGBUS (exit 135) and lost every queued request.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { after, test } from 'node:test';
import { independentCopy, largestShard } from '../support/checkpoint-edit';
import { ensureFixture } from '../support/fixtures';
import { requestJson, requestStream, startServe } from './support';

const TIMEOUT = 120_000;
const copies: string[] = [];
after(() => {
  for (const d of copies) fs.rmSync(d, { recursive: true, force: true });
});

interface ErrorBody {
  error: { message: string; code: string };
}

test('a shard truncated while k3 serve generates fails that request and every later one with io; /health says so', { timeout: TIMEOUT }, async () => {
  const dir = independentCopy(ensureFixture());
  copies.push(dir);
  const serve = await startServe(dir);
  try {
    const fine = await requestJson(serve.port, 'POST', '/v1/completions', { prompt: 'def fib(n):', max_tokens: 4 });
    assert.equal(fine.status, 200, fine.text);
    const shard = largestShard(dir);
    const loaded = fs.statSync(shard).size;

    // Truncated on the first streamed token: generation is running on the engine then.
    const running = requestStream(serve.port, '/v1/completions', { prompt: 'def fib(n):', max_tokens: 4000, stream: true });
    assert.equal(await running.status, 200);
    await running.waitForEvent((d) => d.includes('"text"'));
    fs.truncateSync(shard, 4096);
    const failed = await running.waitForEvent((d) => d.includes('"error"'));
    await running.ended;
    const streamed = JSON.parse(failed) as ErrorBody;
    assert.equal(streamed.error.code, 'io');
    assert.ok(streamed.error.message.includes(shard), streamed.error.message);
    assert.match(streamed.error.message, new RegExp(`${loaded} bytes, modified at [0-9.]+ when loaded, 4096 bytes`));

    // Several at once: one runs, the rest queue; each is answered with the error.
    const answers = await Promise.all(
      [1, 2, 3, 4].map(() => requestJson(serve.port, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })),
    );
    for (const a of answers) {
      assert.equal(a.status, 500, a.text);
      const body = a.body as ErrorBody;
      assert.equal(body.error.code, 'io');
      assert.ok(body.error.message.includes(shard), body.error.message);
    }

    const health = await requestJson(serve.port, 'GET', '/health');
    assert.equal(health.status, 503);
    const h = health.body as { status: string; error: { type: string; message: string } };
    assert.equal(h.status, 'error');
    assert.equal(h.error.type, 'io');
    assert.ok(h.error.message.includes(shard), h.error.message);
    assert.equal(serve.proc.exitCode, null, 'still running');
    assert.equal(serve.proc.signalCode, null);
  } finally {
    assert.equal(await serve.stop(), 0, `k3 serve exits 0 on SIGTERM:\n${serve.log.slice(-20).join('\n')}`);
  }
});
