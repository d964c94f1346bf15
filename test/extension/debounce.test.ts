// debounce.test.ts - when ghost text is asked for: the adaptive debounce follows the typing
// rhythm within its bounds, waits end early on cancellation, a new request cancels the one
// before it, typing is told apart from cursor moves and undo, and the completion policy
// (extension/completions.ts) calls the server only after typing, after the debounce, once,
// and passes on what the server offers as it is.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompletionPolicy } from '../../extension/completions';
import {
  AdaptiveDebounce,
  DEFAULT_DEBOUNCE,
  LatestOnly,
  LinkedCancellation,
  TypingTracker,
  cancellableWait,
  endOfInsert,
} from '../../extension/debounce';
import type { CompletionSettings } from '../../extension/settings';

test('the adaptive debounce starts at its initial wait and follows the typing rhythm within its bounds', () => {
  const d = new AdaptiveDebounce();
  assert.equal(d.delay(), DEFAULT_DEBOUNCE.initial);
  for (let t = 0; t <= 400; t += 100) d.keystroke(t); // 100 ms between keys
  assert.equal(d.delay(), 250); // 2.5 x 100
  const slow = new AdaptiveDebounce();
  for (let t = 0; t <= 4 * 1500; t += 1500) slow.keystroke(t); // 1.5 s gaps: clamped to max
  assert.equal(slow.delay(), DEFAULT_DEBOUNCE.max);
  const fast = new AdaptiveDebounce();
  for (let t = 0; t <= 200; t += 20) fast.keystroke(t);
  assert.equal(fast.delay(), DEFAULT_DEBOUNCE.min);
});

test('pauses longer than the pause threshold do not count as rhythm, and a fixed setting wins', () => {
  const d = new AdaptiveDebounce();
  for (const t of [0, 200, 400, 600, 60_000, 60_200]) d.keystroke(t);
  assert.equal(d.delay(), 500); // gaps 200 x4 -> 2.5 x 200; the minute-long pause ignored
  assert.equal(d.delay(1234), 1234);
  assert.equal(d.delay(0), 0);
});

test('a cancellable wait resolves true after the time and false at once when cancelled', async () => {
  const timers: { fn: () => void; ms: number; cleared: boolean }[] = [];
  const fakeTimers = {
    set: (fn: () => void, ms: number) => {
      const t = { fn, ms, cleared: false };
      timers.push(t);
      return t;
    },
    clear: (h: unknown) => {
      (h as { cleared: boolean }).cleared = true;
    },
  };
  const done = new LinkedCancellation();
  const full = cancellableWait(300, done.token, fakeTimers);
  assert.equal(timers[0].ms, 300);
  timers[0].fn();
  assert.equal(await full, true);

  const c = new LinkedCancellation();
  const early = cancellableWait(300, c.token, fakeTimers);
  c.cancel();
  assert.equal(await early, false);
  assert.equal(timers[1].cleared, true, 'the timer is cleared');

  const already = new LinkedCancellation();
  already.cancel();
  assert.equal(await cancellableWait(300, already.token, fakeTimers), false);
  assert.equal(timers.length, 2, 'no timer for an already-cancelled token');
});

test('a linked token is cancelled by its parent, and begin() cancels the previous request', () => {
  const parent = new LinkedCancellation();
  const child = new LinkedCancellation([parent.token]);
  let fired = 0;
  child.token.onCancellationRequested(() => fired++);
  parent.cancel();
  assert.equal(child.token.isCancellationRequested, true);
  assert.equal(fired, 1);

  const latest = new LatestOnly();
  const outer = new LinkedCancellation();
  const first = latest.begin(outer.token);
  const second = latest.begin(outer.token);
  assert.equal(first.token.isCancellationRequested, true, 'the first request is cancelled');
  assert.equal(second.token.isCancellationRequested, false);
  latest.end(second);
  latest.cancelAll();
  assert.equal(second.token.isCancellationRequested, false, 'an ended request is not cancelled later');
});

test('the typing tracker accepts only the spot just typed at, in the version typing produced', () => {
  const t = new TypingTracker();
  t.change('u', 2, [{ start: { line: 3, character: 4 }, text: 'ab' }], true);
  assert.equal(t.isTypingAt('u', 2, { line: 3, character: 6 }), true);
  assert.equal(t.isTypingAt('u', 2, { line: 3, character: 5 }), true, 'inside the typed text (an auto-closed pair)');
  assert.equal(t.isTypingAt('u', 2, { line: 3, character: 3 }), false, 'the cursor moved before it');
  assert.equal(t.isTypingAt('u', 2, { line: 3, character: 7 }), false, 'the cursor moved past it');
  assert.equal(t.isTypingAt('u', 3, { line: 3, character: 6 }), false, 'another version');
  assert.equal(t.isTypingAt('v', 2, { line: 3, character: 6 }), false, 'another document');
  t.change('u', 3, [{ start: { line: 3, character: 6 }, text: 'x\n  ' }], true);
  assert.equal(t.isTypingAt('u', 3, { line: 4, character: 2 }), true, 'Enter with auto-indent');
  t.change('u', 4, [{ start: { line: 0, character: 0 }, text: 'a' }], false);
  assert.equal(t.isTypingAt('u', 4, { line: 0, character: 1 }), false, 'undo is not typing');
  t.change('u', 5, [{ start: { line: 0, character: 0 }, text: 'a' }, { start: { line: 1, character: 0 }, text: 'a' }], true);
  assert.equal(t.isTypingAt('u', 5, { line: 0, character: 1 }), false, 'multi-cursor edits are not typing');
  assert.deepEqual(endOfInsert({ line: 1, character: 2 }, ''), { line: 1, character: 2 });
});

// ---- the policy itself, with fake documents and a fake LSP request --------------------------

const settings = (over: Partial<CompletionSettings> = {}): CompletionSettings => ({
  enabled: true,
  disabledLanguages: ['markdown'],
  multiline: 'auto',
  maxLines: 8,
  debounceMs: 0,
  warmup: false,
  remoteRoute: 'auto',
  ...over,
});

function doc(version: number, languageId = 'typescript') {
  return { uri: { toString: () => 'file:///a.ts' }, version, languageId };
}

const AUTOMATIC = { triggerKind: 1, selectedCompletionInfo: undefined };
const INVOKE = { triggerKind: 0, selectedCompletionInfo: undefined };

function harness(over: Partial<CompletionSettings> = {}) {
  const events: string[] = [];
  const policy = new CompletionPolicy({
    settings: () => settings(over),
    thinking: (a) => events.push(a ? 'thinking' : 'idle'),
    now: () => 0,
  });
  const type = (version: number, line: number, character: number, text: string) =>
    policy.documentChanged({
      document: doc(version),
      contentChanges: [{ range: { start: { line, character } }, text }],
      reason: undefined,
    } as never);
  let calls = 0;
  const next = async () => {
    calls++;
    return [{ insertText: 'a + b;\n}' }];
  };
  const ask = (version: number, line: number, character: number, ctx = AUTOMATIC, token = new LinkedCancellation().token, language = 'typescript') =>
    policy.provide(doc(version, language) as never, { line, character } as never, ctx as never, token as never, next as never);
  return { policy, events, type, ask, calls: () => calls };
}

test('the policy asks the server after typing and passes its answer on, with a thinking state around the request', async () => {
  const h = harness();
  h.type(2, 1, 9, 'n');
  const result = await h.ask(2, 1, 10);
  assert.deepEqual(result, [{ insertText: 'a + b;\n}' }]);
  assert.equal(h.calls(), 1);
  assert.deepEqual(h.events, ['thinking', 'idle']);
});

test('the policy never asks after a cursor move, when off, or in a disabled language; Alt+\\ always asks', async () => {
  const h = harness();
  h.type(2, 1, 9, 'n');
  assert.equal(await h.ask(2, 5, 0), null, 'cursor moved elsewhere');
  assert.equal(await h.ask(2, 1, 10, AUTOMATIC, undefined, 'markdown'), null, 'disabled language');
  assert.equal(h.calls(), 0);
  assert.notEqual(await h.ask(2, 5, 0, INVOKE), null, 'the manual trigger asks anywhere');
  const off = harness({ enabled: false });
  off.type(2, 1, 9, 'n');
  assert.equal(await off.ask(2, 1, 10), null);
  assert.notEqual(await off.ask(2, 1, 10, INVOKE), null);
  assert.equal(off.calls(), 1);
});

test('a request cancelled during the debounce never reaches the server', async () => {
  const h = harness({ debounceMs: 50 });
  h.type(2, 1, 9, 'n');
  const c = new LinkedCancellation();
  const pending = h.ask(2, 1, 10, AUTOMATIC, c.token);
  c.cancel();
  assert.equal(await pending, null);
  assert.equal(h.calls(), 0);
  assert.deepEqual(h.events, [], 'no thinking state for a request that never ran');

  const first = h.ask(2, 1, 10);
  const second = h.ask(2, 1, 10);
  assert.equal(await first, null, 'superseded by the second');
  assert.notEqual(await second, null);
  assert.equal(h.calls(), 1);

});
