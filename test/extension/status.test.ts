// status.test.ts - what the status bar says (extension/status.ts) for each engine state,
// how a k3/status answer becomes that state, when a crashed server is restarted
// (extension/restart.ts), and the preset picker's items (extension/presets.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusResult } from '../../protocol/lsp';
import { presetItems, wholeModelNote } from '../../extension/presets';
import { RestartPolicy } from '../../extension/restart';
import { describeEngineForChat } from '../../extension/engineText';
import { describeRemote, describeRole, describeStatus, engineFromStatus, formatDuration, lastSpeed, type StatusInput } from '../../extension/status';

const base: StatusInput = { engine: { kind: 'ready' }, thinking: false, preset: 'laptop', completionsEnabled: true, now: 100_000 };

test('each engine state has its own status text, and the tooltip carries the preset and the last speed', () => {
  assert.equal(describeStatus(base).text, '$(sparkle) K3');
  assert.equal(describeStatus({ ...base, thinking: true }).text, '$(loading~spin) K3 thinking');
  assert.equal(describeStatus({ ...base, completionsEnabled: false }).text, '$(circle-slash) K3');
  const loading = describeStatus({ ...base, engine: { kind: 'loading', startedAt: 40_000, percent: 42.7, etaMs: 95_000 } });
  assert.equal(loading.text, '$(loading~spin) K3 42% · 1m 35s left');
  assert.match(loading.ariaLabel, /Loading the model \(1m 00s so far, about 1m 35s left\)/);
  const missing = describeStatus({ ...base, engine: { kind: 'no-model', reason: 'The model folder /x does not exist' } });
  assert.equal(missing.text, '$(warning) K3: no model');
  assert.equal(missing.severity, 'warning');
  assert.equal(describeStatus({ ...base, engine: { kind: 'error', message: 'boom' } }).severity, 'error');
  const ready = describeStatus({ ...base, lastTokensPerSecond: 2.345, engineVersion: '0.1.0' });
  assert.match(ready.ariaLabel, /Preset: laptop\. Last speed: 2\.3 tokens\/s\. Completions: on\. Engine 0\.1\.0\./);
  assert.match(ready.tooltip, /Preset: laptop/);
  assert.equal(formatDuration(3_700_000), '1h 01m');
});

test('with the remote backend the tooltip names the server and says presets apply to the local engine only', () => {
  const remote = describeStatus({ ...base, remote: 'http://gpu:8000/v1 (kimi-k3)' });
  assert.match(remote.ariaLabel, /Remote: http:\/\/gpu:8000\/v1 \(kimi-k3\) \(presets apply to the local engine only\)\./);
  assert.doesNotMatch(remote.ariaLabel, /Preset: laptop/);
});

const localRole = { backend: 'embedded', where: '/ext/media/models/k3-mini', phase: 'ready', model: 'k3-mini' } as const;
const status = (over: Partial<StatusResult>): StatusResult => ({
  engineVersion: '0.1.0',
  phase: 'ready',
  preset: 'auto',
  queued: { completion: 0, chat: 0 },
  storage: {},
  roles: { completions: localRole, chat: localRole },
  ...over,
});

test('a remote server loading its model is shown as such, in the status bar and the chat, and the tooltip names server and context', () => {
  const view = engineFromStatus(
    status({ phase: 'loading', remote: { endpoint: 'http://gpu:8080/v1', prompts: 'text', loading: 'model' } }),
    { kind: 'starting' },
    50_000,
  );
  assert.deepEqual(view, { kind: 'loading', startedAt: 50_000, remote: 'model' });
  const s = describeStatus({ ...base, engine: view, now: 62_000, remote: 'http://gpu:8080/v1' });
  assert.equal(s.text, '$(loading~spin) K3 remote loading');
  assert.match(s.ariaLabel, /^K3: The remote server is loading its model \(12s so far\)\./);
  assert.equal(describeEngineForChat(view), 'The remote server is loading its model; chat opens when it is ready.');
  const connecting = engineFromStatus(status({ phase: 'loading', remote: { endpoint: 'http://gpu:8080/v1', prompts: 'text' } }), view, 0);
  assert.equal(describeStatus({ ...base, engine: connecting }).text, '$(loading~spin) K3 connecting');
  assert.equal(
    describeRemote({ endpoint: 'http://gpu:8080/v1', model: 'kimi-k3', prompts: 'ids', server: 'llama-server', contextTokens: 512 }),
    'http://gpu:8080/v1 (kimi-k3, llama-server, context 512 tokens)',
  );
  assert.equal(describeRemote({ endpoint: 'http://gpu:8080/v1', prompts: 'text' }), 'http://gpu:8080/v1');
});

test('a k3/status answer becomes the engine state, with load progress and the problem action', () => {
  const loading = engineFromStatus(
    status({ phase: 'loading', load: { modelPath: '/m', phase: 'opening', bytesLoaded: 25, bytesTotal: 100, elapsedMs: 4000, estimateMs: 10_000 } }),
    { kind: 'starting' },
    50_000,
  );
  assert.deepEqual(loading, { kind: 'loading', startedAt: 46_000, percent: 25, etaMs: 6000 });
  const action = { kind: 'choose-smaller-preset' as const, title: 'Choose a smaller preset' };
  const oom = engineFromStatus(status({ phase: 'error', error: { kind: 'out-of-memory', action, message: 'Out of memory' } }), loading, 0);
  assert.deepEqual(oom, { kind: 'error', message: 'Out of memory', action });
  assert.deepEqual(engineFromStatus(status({ phase: 'no-model' }), oom, 0), { kind: 'no-model', reason: 'No model is loaded' });
  assert.equal(lastSpeed(status({ lastCompletion: { source: 'engine', outcome: 'done', promptTokens: 9, reusedTokens: 0, prefilledTokens: 9, generatedTokens: 10, draftedTokens: 0, acceptedTokens: 0, prefillMs: 1, generateMs: 2000, totalMs: 2001 } })), 5);
});

test('a crashed server is restarted, but not after an out-of-memory, a missing model or a crash loop', () => {
  const p = new RestartPolicy(3, 60_000);
  assert.deepEqual(p.onCrash(0, undefined), { restart: true });
  assert.deepEqual(p.onCrash(1000, 'out-of-memory'), { restart: false, reason: 'out-of-memory' });
  assert.deepEqual(p.onCrash(2000, 'model-missing'), { restart: false, reason: 'model-missing' });
  assert.deepEqual(p.onCrash(3000, undefined), { restart: true });
  assert.deepEqual(p.onCrash(4000, undefined), { restart: true });
  assert.deepEqual(p.onCrash(5000, undefined), { restart: false, reason: 'crash-loop' });
  assert.deepEqual(p.onCrash(200_000, undefined), { restart: true }, 'old crashes leave the window');
  p.reset();
});

test('the preset picker lists every preset, marks the recommended and current ones, and says whether each fits', () => {
  const GiB = 2 ** 30;
  const items = presetItems(
    [{ id: 'auto' }, { id: 'laptop', description: 'Small' }, { id: 'server' }],
    'laptop',
    16 * GiB,
    new Map([
      ['laptop', { trunkBytes: 4 * GiB, expertCacheBytes: 6 * GiB, peakBytes: 12 * GiB }],
      ['server', { trunkBytes: 64 * GiB, expertCacheBytes: 128 * GiB, peakBytes: 200 * GiB }],
    ]),
  );
  assert.deepEqual(items.map((i) => i.preset), ['auto', 'laptop', 'server']);
  assert.equal(items[0].description, 'recommended');
  assert.equal(items[1].label, '$(check) laptop');
  assert.equal(items[1].description, 'current · peak 12 GiB');
  assert.match(items[1].detail, /^Small\. Trunk 4\.0 GiB \+ expert cache 6\.0 GiB; full K3 peaks at 12 GiB: fits in the 16 GiB available$/);
  assert.match(items[2].detail, /does not fit in the 16 GiB available/);
  assert.match(presetItems([{ id: 'max' }], 'auto', GiB)[0].detail, /not reported by the server/);
});

test('the preset picker shows the engine\'s forecast of seconds per token where the machine was measured', () => {
  const GiB = 2 ** 30;
  const facts = new Map([
    ['laptop', { trunkBytes: 3 * GiB, expertCacheBytes: GiB, peakBytes: 8 * GiB, secondsPerToken: 412.3 }],
    ['server', { trunkBytes: 100 * GiB, expertCacheBytes: 12 * GiB, peakBytes: 120 * GiB, secondsPerToken: 7.456 }],
    ['desktop', { trunkBytes: 15 * GiB, expertCacheBytes: 9 * GiB, peakBytes: 30 * GiB }],
  ]);
  const items = presetItems([{ id: 'laptop' }, { id: 'server' }, { id: 'desktop' }], 'auto', 16 * GiB, facts);
  assert.equal(items[0].description, 'peak 8.0 GiB · ~6.9 min/token here');
  assert.equal(items[1].description, 'peak 120 GiB · ~7.46 s/token here');
  assert.equal(items[2].description, 'peak 30 GiB', 'no forecast without a measured profile');
  const mini = presetItems([{ id: 'laptop' }], 'auto', 16 * GiB, facts, 'auto', { name: 'k3-mini', bytes: 9 * 2 ** 20 });
  assert.equal(mini[0].description, 'full K3 ~6.9 min/token here', 'with a small model loaded the forecast is named as the full K3\'s');
  const big = presetItems([{ id: 'server' }], 'auto', 16 * GiB, facts, 'auto', { name: 'Kimi-K3', bytes: 1400 * GiB });
  assert.equal(big[0].description, 'holds 112 GiB of Kimi-K3 · full K3 ~7.46 s/token here');
});

test('the preset picker shows the forecast time to first token of a 2,048-token prompt beside seconds per token', () => {
  const GiB = 2 ** 30;
  const firstTokenSeconds = [{ tokens: 512, seconds: 1143 }, { tokens: 2048, seconds: 2192 }];
  const facts = new Map([
    ['laptop', { trunkBytes: 3 * GiB, expertCacheBytes: GiB, peakBytes: 8 * GiB, secondsPerToken: 85.6, firstTokenSeconds }],
    ['desktop', { trunkBytes: 15 * GiB, expertCacheBytes: 9 * GiB, peakBytes: 30 * GiB, firstTokenSeconds }],
  ]);
  const items = presetItems([{ id: 'laptop' }, { id: 'desktop' }], 'auto', 16 * GiB, facts);
  assert.equal(items[0].description, 'peak 8.0 GiB · ~86 s/token, first token ~36.5 min (2,048-token prompt) here');
  assert.equal(items[1].description, 'peak 30 GiB', 'no first-token forecast without the per-token one');
});

test('beside the forecast the picker says how far it missed where this machine was checked', () => {
  const GiB = 2 ** 30;
  const forecastCheck = { configurations: 5, within: 3, worst: 0.785 };
  const facts = new Map([
    ['laptop', { trunkBytes: 3 * GiB, expertCacheBytes: GiB, peakBytes: 8 * GiB, secondsPerToken: 131.2, forecastCheck }],
    ['desktop', { trunkBytes: 15 * GiB, expertCacheBytes: 9 * GiB, peakBytes: 30 * GiB, forecastCheck }],
  ]);
  const items = presetItems([{ id: 'laptop' }, { id: 'desktop' }], 'auto', 16 * GiB, facts);
  assert.equal(items[0].description, 'peak 8.0 GiB · ~2.2 min/token here (±79 %)');
  assert.match(items[0].detail, /; forecast checked on this machine: 3 of 5 slice configurations within 15 %, the worst off by 79 %$/);
  assert.equal(items[1].description, 'peak 30 GiB', 'no forecast, so no check either');
  assert.doesNotMatch(items[1].detail, /checked/);
  const mini = presetItems([{ id: 'laptop' }], 'auto', 16 * GiB, facts, 'auto', { name: 'k3-mini', bytes: 9 * 2 ** 20 });
  assert.equal(mini[0].description, 'full K3 ~2.2 min/token here (±79 %)');
});

test('the tooltip names the model with its size and, for a completion model, that it does not chat', () => {
  const mini = describeStatus({ ...base, model: { name: 'k3-mini', path: '/m', bytes: 15_654_520, chat: false } });
  assert.match(mini.ariaLabel, /^K3: Ready\. Model: k3-mini \(15 MiB of weights, code completion only: not trained for chat\)\. Preset: laptop/);
  const k3 = describeStatus({ ...base, model: { name: 'Kimi-K3', path: '/k', bytes: 1.5e12, chat: true } });
  assert.match(k3.ariaLabel, /Model: Kimi-K3 \(1397 GiB of weights\)\./);
});

test('the preset picker sets each preset against the loaded model: once "fits whole" for k3-mini, how much it holds for a large one', () => {
  const GiB = 2 ** 30;
  const facts = new Map([
    ['laptop', { trunkBytes: 3 * GiB, expertCacheBytes: 1 * GiB, peakBytes: 8 * GiB }],
    ['max', { trunkBytes: 110 * GiB, expertCacheBytes: 100 * GiB, peakBytes: 209 * GiB }],
  ]);
  const presets = [{ id: 'auto' }, { id: 'laptop' }, { id: 'max' }, { id: 'mapped' }];
  const mini = { name: 'k3-mini', bytes: 15 * 2 ** 20 };
  assert.equal(wholeModelNote(mini, facts), 'k3-mini (15 MiB) fits whole in every preset; presets matter for larger models');
  const small = presetItems(presets, 'auto', 16 * GiB, facts, 'auto', mini);
  assert.equal(small[1].detail, 'trunk 3.0 GiB + expert cache 1.0 GiB');
  assert.ok(small.every((i) => !/209 GiB|peak|fit/.test(`${i.description} ${i.detail}`)), 'no full-K3 figures for a model that fits anywhere');
  assert.match(small[3].detail, /no budgets: every weight is mapped/);
  const big = { name: 'Kimi-K3', bytes: 150 * GiB };
  assert.equal(wholeModelNote(big, facts), undefined);
  const large = presetItems(presets, 'auto', 16 * GiB, facts, 'auto', big);
  assert.equal(large[1].description, 'holds 4.0 GiB of Kimi-K3');
  assert.match(large[1].detail, /4\.0 GiB of its 150 GiB stay in memory, the rest is read as needed; fits in the 16 GiB available/);
  assert.match(large[2].detail, /all 150 GiB of Kimi-K3 stay in memory; more than the 16 GiB available/);
});

test('with ghost text and chat on different backends, the status bar names both models and the tooltip each role', () => {
  const roles: StatusResult['roles'] = {
    completions: { backend: 'embedded', model: 'k3-mini', where: '/ext/media/models/k3-mini', phase: 'ready', chats: false },
    chat: { backend: 'remote', model: 'kimi-k3', where: 'https://gpu:8000/v1', phase: 'busy', remote: { endpoint: 'https://gpu:8000/v1', prompts: 'text' } },
  };
  const view = describeStatus({ ...base, roles });
  assert.equal(view.text, '$(sparkle) K3 k3-mini | chat kimi-k3');
  assert.match(view.ariaLabel, /Completions: k3-mini \(embedded, ready\)\. Chat: kimi-k3 \(remote https:\/\/gpu:8000\/v1, working\)\./);
  assert.equal(describeStatus({ ...base, roles: { completions: roles.completions, chat: roles.completions } }).text, '$(sparkle) K3', 'one model for both: no names');
  assert.equal(
    describeRole('chat', { ...roles.completions, phase: 'no-model' }),
    'Chat: k3-mini (embedded, not available, code completion only: cannot chat)',
  );
  assert.equal(describeRole('chat', { backend: 'remote', where: 'http://x/v1', phase: 'error' }), "Chat: the server's first model (remote http://x/v1, failed)");
  assert.equal(
    describeRole('chat', { backend: 'local', where: '/m/k3', model: 'k3', phase: 'ready', memoryBytes: 3 * 2 ** 30 }),
    'Chat: k3 (local /m/k3, ready, 3.0 GiB in memory)',
    "a local role's plan in memory",
  );
});
