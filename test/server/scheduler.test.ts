// scheduler.test.ts - one engine, one queue (server/scheduler.ts), with stand-in sessions:
// slices of different lanes alternate, a job cancelled while it waits leaves the queue at
// once, a running slice is cancelled in its session, jobs of one lane run one after
// another, and an exclusive section waits for the running slice and goes before the queue.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Session } from '../../server/engine/engine';
import { Cancelled } from '../../server/errors';
import { Job, Scheduler } from '../../server/scheduler';

/** A session stand-in that records cancel() calls. */
function fakeSession(): Session & { cancels: number } {
  const s = { cancels: 0, cancel: () => void s.cancels++, stop: () => undefined };
  return s as unknown as Session & { cancels: number };
}

/** A call the test finishes by hand. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

test('while slices wait, the lanes take turns', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const order: string[] = [];
  const first = gate();
  const chat = new Job('chat');
  const completion = new Job('completion');
  const chatRun = s.run(chat, async () => {
    await s.slice(chat, session, () => first.promise.then(() => void order.push('chat 1')));
    for (let i = 2; i <= 3; i++) await s.slice(chat, session, async () => void order.push(`chat ${i}`));
  });
  const completionRun = s.run(completion, async () => {
    for (let i = 1; i <= 2; i++) await s.slice(completion, session, async () => void order.push(`completion ${i}`));
  });
  first.open();
  await Promise.all([chatRun, completionRun]);
  assert.deepEqual(order, ['chat 1', 'completion 1', 'chat 2', 'completion 2', 'chat 3']);
});

test('a job cancelled while it waits for its turn rejects at once; a running slice is cancelled in its session', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const running = gate();
  const a = new Job('chat');
  const b = new Job('completion');
  const aRun = s.run(a, () => s.slice(a, session, () => running.promise));
  const bRun = s.run(b, () => s.slice(b, session, async () => assert.fail('b never runs')));
  b.cancel('superseded');
  await assert.rejects(bRun, (e: unknown) => e instanceof Cancelled && e.reason === 'superseded');
  assert.deepEqual(s.queued(), { completion: 0, chat: 0 });
  a.cancel();
  assert.equal(session.cancels, 1, 'the running slice was cancelled in the engine');
  running.open();
  await aRun;
});

test('jobs of one lane run one after another', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const order: string[] = [];
  const g = gate();
  const a = new Job('chat');
  const b = new Job('chat');
  const aRun = s.run(a, async () => {
    await s.slice(a, session, () => g.promise);
    order.push('a slice 1 done');
    await s.slice(a, session, async () => void order.push('a slice 2'));
  });
  const bRun = s.run(b, async () => s.slice(b, session, async () => void order.push('b')));
  g.open();
  await Promise.all([aRun, bRun]);
  assert.deepEqual(order, ['a slice 1 done', 'a slice 2', 'b']);
});

test('an exclusive section waits for the running slice and goes before the queue', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const order: string[] = [];
  const g = gate();
  const started = gate();
  const a = new Job('chat');
  const b = new Job('completion');
  const aRun = s.run(a, () =>
    s.slice(a, session, () => {
      started.open();
      return g.promise.then(() => void order.push('a'));
    }),
  );
  await started.promise;
  const bRun = s.run(b, () => s.slice(b, session, async () => void order.push('b')));
  const ex = s.exclusive(async () => void order.push('exclusive'));
  g.open();
  await Promise.all([aRun, bRun, ex]);
  assert.deepEqual(order, ['a', 'exclusive', 'b']);
});
