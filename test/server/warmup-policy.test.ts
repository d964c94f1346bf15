// warmup-policy.test.ts - when server/completion/warmup.ts works ahead and when it stops, in
// process, with a stand-in completion service on the real scheduler: a context change
// prefills once (a newer one supersedes it); an accept computes the next suggestion when the
// document is at the accept's version (waiting for the accept's own edit when it comes
// later), a keystroke cancels it, a request for the same text joins it; with the setting off
// nothing is laid out nor run. Ordering by promises, never by time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Prepared } from '../../server/completion/service';
import { Warmup, type WarmupService } from '../../server/completion/warmup';
import { Cancelled } from '../../server/errors';
import { Job, Scheduler } from '../../server/scheduler';
import type { WarmupStats } from '../../protocol/lsp';

interface Call {
  kind: 'warm' | 'compute';
  uri: string;
  job: Job;
  finish(): void;
}

/** A completion service whose runs end when the test says, and the host Warmup reads. */
function setup(warmup = true) {
  const scheduler = new Scheduler();
  const versions = new Map<string, number>();
  const calls: Call[] = [];
  const prepared: string[] = [];
  const waiters: Array<() => void> = [];
  const record = (c: Call): void => {
    calls.push(c);
    for (const w of waiters.splice(0)) w();
  };
  /** Work that ends when finished or rejects when its job is cancelled. */
  const work = (kind: Call['kind'], uri: string, job: Job) =>
    new Promise<void>((resolve, reject) => {
      record({ kind, uri, job, finish: resolve });
      job.whenCancelled().catch(reject);
    });
  const service: WarmupService = {
    prepare(uri, pos) {
      prepared.push(`${uri}@${pos.line}:${pos.character}`);
      // As the real ones: warm() runs inside the caller's scheduler.run, compute() makes its own.
      const backend = { warm: (job: Job) => work('warm', uri, job).then(() => ({ reused: 0, prefilled: 3 })) };
      return { backend, layout: { ids: [1, 2, 3] }, base: uri, before: `${pos.line}:${pos.character}` } as unknown as Prepared;
    },
    compute: (p, job) => scheduler.run(job, () => work('compute', p.base, job)),
  };
  const status = { warmup: undefined as WarmupStats | undefined, changed: () => undefined };
  const w = new Warmup(service, {
    settings: { completions: { warmup } } as never,
    documents: { get: (uri: string) => (versions.has(uri) ? ({ version: versions.get(uri) } as never) : undefined), all: () => [] },
    scheduler,
    status,
    log: () => undefined,
  });
  async function nextCall(n: number): Promise<Call> {
    while (calls.length <= n) await new Promise<void>((r) => waiters.push(r));
    return calls[n];
  }
  return { w, scheduler, versions, calls, prepared, nextCall };
}

const at = (uri: string, version: number, line = 0, character = 0) => ({ uri, version, position: { line, character } });

test('a context change prefills the prompt at the cursor once; a newer one supersedes it', async () => {
  const { w, versions, nextCall, prepared } = setup();
  versions.set('a', 1).set('b', 1);
  const first = w.contextChanged(at('a', 1, 2, 3));
  const c0 = await nextCall(0);
  assert.deepEqual([c0.kind, c0.uri, c0.job.priority], ['warm', 'a', 'background']);
  const second = w.contextChanged(at('b', 1));
  await first;
  assert.equal(c0.job.cancelReason, 'superseded');
  (await nextCall(1)).finish();
  await second;
  assert.deepEqual(prepared, ['a@2:3', 'b@0:0']);
  assert.deepEqual({ ...w.stats }, { prefills: 2, prefillsCancelled: 1, ahead: 0, aheadCancelled: 0, aheadServed: 0, lastReusedTokens: 0, lastPrefilledTokens: 3 });
});

test('an accept computes the next suggestion ahead; a keystroke in that document cancels it', async () => {
  const { w, versions, nextCall } = setup();
  versions.set('a', 5);
  const ahead = w.accepted(at('a', 5, 1, 4));
  const c = await nextCall(0);
  assert.deepEqual([c.kind, c.uri, c.job.priority], ['compute', 'a', 'background']);
  versions.set('a', 6);
  w.edited('a');
  await ahead;
  assert.equal(c.job.cancelReason, 'superseded');
  assert.equal(w.stats.aheadCancelled, 1);
});

test('an accept that arrives before its own edit waits for that version, and one typed past is dropped', async () => {
  const { w, versions, nextCall, prepared, calls } = setup();
  versions.set('a', 4);
  await w.accepted(at('a', 5));
  assert.equal(calls.length, 0, 'nothing runs before the document has the accepted text');
  versions.set('a', 5);
  w.edited('a');
  const c = await nextCall(0);
  assert.equal(c.kind, 'compute');
  c.finish();
  versions.set('a', 9);
  await w.accepted(at('a', 7));
  assert.deepEqual(prepared, ['a@0:0'], 'an accept older than the document is not computed');
});

test('a request for the same text joins the suggestion computed ahead: promoted, not cancelled by user jobs', async () => {
  const { w, versions, nextCall, scheduler } = setup();
  versions.set('a', 1);
  const ahead = w.accepted(at('a', 1, 0, 2));
  const c = await nextCall(0);
  assert.equal(w.join('a', '0:1'), undefined, 'another text does not join');
  const joined = w.join('a', '0:2');
  assert.ok(joined);
  assert.equal(c.job.priority, 'user');
  // Another user job (say, a chat) no longer cancels it.
  const chat = new Job('chat');
  const chatRun = scheduler.run(chat, async () => undefined);
  assert.equal(c.job.cancelled, false);
  c.finish();
  await Promise.all([joined, ahead, chatRun]);
  w.answeredFromCache('a', '0:2', false);
  w.answeredFromCache('a', '0:2', false);
  assert.deepEqual([w.stats.ahead, w.stats.aheadCancelled, w.stats.aheadServed], [1, 0, 1], 'served once: the second answer is the cache alone');
});

test('with k3.completions.warmup off nothing is laid out nor run', async () => {
  const { w, versions, calls, prepared } = setup(false);
  versions.set('a', 1);
  await w.contextChanged(at('a', 1));
  await w.accepted(at('a', 1));
  w.edited('a');
  assert.deepEqual([calls.length, prepared.length], [0, 0]);
  assert.deepEqual({ ...w.stats }, { prefills: 0, prefillsCancelled: 0, ahead: 0, aheadCancelled: 0, aheadServed: 0 });
});

test('malformed warm-up params are refused without running anything', async () => {
  const { w, calls } = setup();
  await w.contextChanged({ uri: 'a', position: { line: 0 } });
  await w.accepted(null);
  assert.equal(calls.length, 0);
});

test('a request for other text supersedes the suggestion computed ahead, joined or not', async () => {
  const { w, versions, nextCall } = setup();
  versions.set('a', 1);
  const ahead = w.accepted(at('a', 1, 0, 2));
  const c = await nextCall(0);
  const joined = w.join('a', '0:2');
  w.supersede();
  await assert.rejects(joined!, (e: unknown) => e instanceof Cancelled && e.reason === 'superseded');
  await ahead;
  assert.equal(c.job.cancelReason, 'superseded');
  assert.equal(w.stats.aheadCancelled, 1);
});
