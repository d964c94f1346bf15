// scheduler.test.ts - one engine, one queue (server/scheduler.ts), with stand-in sessions:
// slices of different lanes alternate, a job cancelled while it waits leaves the queue at
// once, a running slice is cancelled in its session, jobs of one lane run one after
// another, an exclusive section waits for the running slice and goes before the queue, and a
// background job runs only in idle time and yields to any user job.
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

test('a background job waits until no user job is in the scheduler, even one of another lane', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const order: string[] = [];
  const g = gate();
  const user = new Job('chat');
  const warm = new Job('completion', 'background');
  const userRun = s.run(user, () => s.slice(user, session, () => g.promise.then(() => void order.push('user'))));
  const warmRun = s.run(warm, async () => void order.push('background'));
  await Promise.resolve();
  assert.deepEqual(order, [], 'the background body has not started while the user job runs');
  g.open();
  await Promise.all([userRun, warmRun]);
  assert.deepEqual(order, ['user', 'background']);
});

test('a user job that arrives cancels a running background job in its session, then runs', async () => {
  const s = new Scheduler();
  const session = fakeSession();
  const started = gate();
  const never = gate();
  const warm = new Job('completion', 'background');
  const warmRun = s.run(warm, () =>
    s.slice(warm, session, () => {
      started.open();
      return never.promise;
    }),
  );
  await started.promise;
  const user = new Job('completion');
  const userRun = s.run(user, async () => 'user ran');
  assert.equal(session.cancels, 1, 'the background slice was cancelled in the engine');
  assert.equal(warm.cancelReason, 'superseded');
  never.open(); // the stand-in session ends its call as the engine would after a cancel
  await warmRun.catch(() => undefined);
  assert.equal(await userRun, 'user ran');
});

test('a background job waiting for idle time leaves the queue when a user job cancels it', async () => {
  const s = new Scheduler();
  const g = gate();
  const chat = new Job('chat');
  const chatRun = s.run(chat, () => g.promise);
  const warm = new Job('completion', 'background');
  const warmRun = s.run(warm, async () => assert.fail('the background job never runs'));
  const user = new Job('completion');
  const userRun = s.run(user, async () => 'user ran');
  await assert.rejects(warmRun, (e: unknown) => e instanceof Cancelled && e.reason === 'superseded');
  assert.equal(await userRun, 'user ran', 'the user job did not wait for the chat nor the background job');
  g.open();
  await chatRun;
});

test('a promoted background job stops waiting for idle time and user jobs no longer cancel it', async () => {
  const s = new Scheduler();
  const g = gate();
  const chat = new Job('chat');
  const chatRun = s.run(chat, () => g.promise);
  const ahead = new Job('completion', 'background');
  const ran = gate();
  const aheadRun = s.run(ahead, async () => {
    ran.open();
    return 'ahead ran';
  });
  s.promote(ahead);
  await ran.promise; // while the chat job still runs
  const other = new Job('chat');
  const otherRun = s.run(other, async () => undefined);
  assert.equal(ahead.cancelled, false);
  assert.equal(await aheadRun, 'ahead ran');
  g.open();
  await Promise.all([chatRun, otherRun]);
});
