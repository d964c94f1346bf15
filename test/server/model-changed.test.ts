// model-changed.test.ts - the language server hosts the engine in its own process, so a
// model shard truncated under it (weights mapped, the default) used to kill it (SIGBUS) and
// take ghost text and chat with it. Now the completion fails with the engine's `io` error
// naming the file, the status turns to phase `error` with that problem and the reload
// action, the process lives on, and loading the model again (what "Restart Engine" does)
// brings it back.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { after, test } from 'node:test';
import { ModelLoadRequest, type K3ErrorData } from '../../protocol/lsp';
import { independentCopy, largestShard } from '../support/checkpoint-edit';
import { ensureFixture } from '../support/fixtures';
import { startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';

const copies: string[] = [];
after(() => {
  for (const d of copies) fs.rmSync(d, { recursive: true, force: true });
});

test('a shard truncated under the server fails the completion with io, reports it in the status, and a reload recovers', { timeout: TEST_TIMEOUT_MS }, async () => {
  const dir = independentCopy(ensureFixture());
  copies.push(dir);
  const server = await startServer({ modelPath: dir, settings: { engine: { threads: 1 }, completions: { maxTokens: 8, filter: false } } });
  try {
    await waitReady(server);
    const uri = 'file:///w/fib.py';
    await server.open(uri, 'python', 'def fib(n):\n    ');
    assert.notEqual(await server.complete(uri, 1, 4), null, 'a completion before the change');

    const shard = largestShard(dir);
    const bytes = fs.readFileSync(shard);
    fs.truncateSync(shard, 4096);
    await server.type(uri, 2, 1, 4, 'r');
    const failure = await server.complete(uri, 1, 5).then(
      () => assert.fail('the completion after the truncation succeeded'),
      (e: { message: string; data?: K3ErrorData }) => e,
    );
    assert.ok(failure.message.includes(shard), failure.message);
    assert.equal(failure.data?.status, 'io');

    const status = await server.waitForStatus((s) => s.phase === 'error');
    assert.ok(status.error?.message.includes(shard), status.error?.message);
    assert.match(status.error?.message ?? '', /changed on disk while the engine ran/);
    assert.equal(status.error?.action.kind, 'load-model');
    assert.equal(server.proc.exitCode, null, 'the server process lives');
    assert.equal(server.proc.signalCode, null);

    // The files are put back and the model loaded again: completions work.
    fs.writeFileSync(shard, bytes);
    await server.connection.sendRequest(ModelLoadRequest.type, { modelPath: dir });
    assert.equal((await waitReady(server)).error, undefined);
    await server.type(uri, 3, 1, 5, 'e');
    assert.notEqual(await server.complete(uri, 1, 6), null, 'a completion after the reload');
  } finally {
    await server.shutdown();
  }
});
