// shard-changed.test.ts - a model shard that changes on disk under a running engine (weights
// mapped, the default) fails the pass with an `io` error naming the file and its size when
// loaded and now, and the process lives on: a shard truncated between passes, one truncated
// while generation runs on a worker thread (a read past the new end faults with SIGBUS,
// which the engine turns into the same failure), and one overwritten in place with other
// bytes of the same size. Every later pass refuses with the same error, and a new open of
// the folder reads what is there now. With the check at the start of each pass skipped
// (K3_TEST_SKIP_FILE_CHECK, tests only), a pass meets the truncated shard in its reads: the
// SIGBUS is caught on one thread and on several, and with an owned trunk and an expert
// cache (lm_head still mapped, read under the model's stream lock), and the pass fails the
// same way.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, test } from 'node:test';
import type { NativeModel } from '../../server/engine/addon';
import { independentCopy, largestShard, shardOf } from '../support/checkpoint-edit';
import { engine } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const copies: string[] = [];
after(() => {
  for (const d of copies) fs.rmSync(d, { recursive: true, force: true });
});

/** A copy of the tiny fixture whose shards are its own files (the fixture is never touched). */
function ownCopy(): string {
  const dir = independentCopy(ensureFixture());
  copies.push(dir);
  return dir;
}

interface NativeFailure {
  code?: string;
  message: string;
}

/** Asserts an `io` failure naming the shard and its sizes when loaded and now. */
function assertChanged(e: unknown, shard: string, loaded: number, now: number): string {
  const f = e as NativeFailure;
  assert.equal(f.code, 'io', f.message);
  assert.ok(f.message.includes(shard), `names ${shard}: ${f.message}`);
  assert.match(f.message, new RegExp(`${loaded} bytes, modified at [0-9.]+ when loaded, ${now} bytes`));
  assert.match(f.message, /no longer the one loaded; load it again/);
  return f.message;
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  assert.fail('expected the call to throw');
}

test('a shard truncated between passes fails the next pass with io naming the file, and every pass after it', () => {
  const dir = ownCopy();
  const model: NativeModel = new engine.Model(dir);
  const ctx = new engine.Context(model, { maxContext: 64 });
  ctx.decode(Int32Array.of(1, 2, 3), 1);
  assert.equal(model.check(), undefined);
  const shard = largestShard(dir);
  const loaded = fs.statSync(shard).size;
  fs.truncateSync(shard, 4096);

  const first = assertChanged(thrown(() => ctx.decode(Int32Array.of(4), 1)), shard, loaded, 4096);
  assert.equal(ctx.length, 0, 'the failed pass left nothing half decoded');
  const again = thrown(() => ctx.decode(Int32Array.of(1, 2, 3), 1)) as NativeFailure;
  assert.equal(again.message, first, 'a later pass repeats the first failure');
  const other = new engine.Context(model, { maxContext: 16 });
  assert.equal((thrown(() => other.decode(Int32Array.of(1), 1)) as NativeFailure).message, first, 'so does another context');
  assert.equal(model.check()?.message, first);
  other.close();
  ctx.close();
  model.close();
  const reopened = thrown(() => new engine.Model(dir)) as NativeFailure; // what is there now, refused
  assert.equal(reopened.code, 'format', reopened.message);
  assert.match(reopened.message, /run past the data region \(3944 bytes\)/);
});

test('a shard overwritten in place with other bytes of the same size fails the next pass', () => {
  const dir = ownCopy();
  const model: NativeModel = new engine.Model(dir);
  const ctx = new engine.Context(model, { maxContext: 64 });
  ctx.decode(Int32Array.of(1, 2, 3), 1);
  const shard = largestShard(dir);
  const size = fs.statSync(shard).size;
  const fd = fs.openSync(shard, 'r+');
  fs.writeSync(fd, Buffer.alloc(64, 0x5a), 0, 64, size - 64);
  fs.closeSync(fd);
  const later = new Date(Date.now() + 5000); // a modification time that cannot equal the load's
  fs.utimesSync(shard, later, later);
  assertChanged(thrown(() => ctx.decode(Int32Array.of(4), 1)), shard, size, size);
  ctx.close();
  model.close();
  const reopened = new engine.Model(dir); // the same sizes, so the new bytes load as they are
  assert.equal(reopened.check(), undefined);
  reopened.close();
});

test('a shard truncated while generation runs fails it with io naming the file, and the process lives', async () => {
  const dir = ownCopy();
  const model: NativeModel = new engine.Model(dir);
  const session = new engine.Session(model, { maxContext: 4096 });
  await session.sync(Int32Array.of(1, 2, 3));
  const shard = largestShard(dir);
  const loaded = fs.statSync(shard).size;
  let tokens = 0;
  // Truncated on the first tokens streamed back: the worker thread is then generating,
  // inside a pass (the read faults) or between two (the next pass's check fails).
  const failure = await session
    .generate({ maxTokens: 4000, specMax: 0, stopIds: [], contextIds: [] }, (ids) => {
      if (tokens === 0) fs.truncateSync(shard, 4096);
      tokens += ids.length;
    })
    .then(
      () => assert.fail(`generation of ${tokens} tokens ended without noticing the truncated shard`),
      (e: unknown) => e,
    );
  const message = assertChanged(failure, shard, loaded, 4096);
  assert.ok(tokens < 4000, `generation stopped at the failure (${tokens} tokens)`);
  await assert.rejects(session.sync(Int32Array.of(1, 2)), (e: NativeFailure) => e.message.includes(shard));
  assert.ok(model.check()?.message.includes(shard));
  process.stdout.write(`# the failure: ${message}\n`);
  session.close();
  model.close();
});

const Q_PROJ = 'language_model.model.layers.1.self_attn.q_proj.weight';

for (const threads of [1, 3]) {
  test(`a pass that reads a truncated shard (SIGBUS) fails with io naming the file, on ${threads} thread(s)`, () => {
    const dir = ownCopy();
    process.env.K3_TEST_SKIP_FILE_CHECK = '1';
    let model: NativeModel;
    try {
      model = new engine.Model(dir);
    } finally {
      delete process.env.K3_TEST_SKIP_FILE_CHECK;
    }
    const ctx = new engine.Context(model, { maxContext: 64, threads });
    ctx.decode(Int32Array.of(1, 2, 3), 1);
    const shard = shardOf(dir, Q_PROJ);
    const loaded = fs.statSync(shard).size;
    fs.truncateSync(shard, 4096);
    const first = assertChanged(thrown(() => ctx.decode(Int32Array.of(4, 5, 6, 7), 1)), shard, loaded, 4096);
    assert.match(first, new RegExp(`^reading the mapped weights of ${path.basename(shard)} at offset \\d+ failed \\(SIGBUS\\)`));
    assert.equal(ctx.length, 0);
    assert.equal((thrown(() => ctx.decode(Int32Array.of(1), 1)) as NativeFailure).message, first);
    ctx.close();
    model.close();
  });
}

test('with an owned trunk and an expert cache (preset laptop), a read of a truncated lm_head fails the pass with io, and again after', async () => {
  const dir = ownCopy();
  process.env.K3_TEST_SKIP_FILE_CHECK = '1';
  let model: NativeModel;
  try {
    model = await engine.openModel(dir, { preset: 'laptop' }).promise;
  } finally {
    delete process.env.K3_TEST_SKIP_FILE_CHECK;
  }
  const session = new engine.Session(model, { maxContext: 64, threads: 2 });
  await session.sync(Int32Array.of(1, 2, 3));
  // The trunk and the experts were read into memory the engine owns; lm_head stays mapped,
  // and is read at the end of every pass, with the model's stream lock held.
  const shard = shardOf(dir, 'language_model.lm_head.weight');
  const loaded = fs.statSync(shard).size;
  fs.truncateSync(shard, 4096);
  const first = await session.sync(Int32Array.of(1, 2, 3, 4)).then(
    () => assert.fail('the pass read a truncated lm_head without failing'),
    (e: unknown) => assertChanged(e, shard, loaded, 4096),
  );
  assert.match(first, /failed \(SIGBUS\)/);
  await assert.rejects(session.sync(Int32Array.of(5)), (e: NativeFailure) => e.message === first);
  session.close();
  model.close();
});
