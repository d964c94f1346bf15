// spec-state.test.ts - speculative decoding and saved state through the k3 CLI on the tiny
// fixture: for every draft length 1..8 the output equals serial greedy decode, whether the
// drafts are all accepted, partly accepted or absent; a verify pass kept up to any of its
// positions leaves serial decode's tokens and state; a saved and resumed sequence
// continues bit for bit like an uninterrupted one; broken or foreign state files are
// refused with their own message.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const k3 = k3Binaries.plain;

function run(args: string[]): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(k3, args, { encoding: 'utf8' });
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

function generated(stdout: string): number[] {
  const m = /^generated: \[([^\]]*)\]$/m.exec(stdout);
  assert.ok(m, `no generated ids in:\n${stdout}`);
  return m[1] === '' ? [] : m[1].split(', ').map(Number);
}

function specStats(stdout: string) {
  const m = /^spec: (\d+) rounds, (\d+) drafted, (\d+) accepted/m.exec(stdout);
  assert.ok(m, `no spec line in:\n${stdout}`);
  return { rounds: Number(m[1]), drafted: Number(m[2]), accepted: Number(m[3]) };
}

const GEN = 24;
const PROMPTS = {
  'non-repetitive text': '1008,10484,318,15383,387',
  'highly repetitive code': '1512,12,19,4,2766,11,1512,12,19,4,2766,11,1512,12,19,4,2766,11,1512,12,19',
};

for (const [kind, ids] of Object.entries(PROMPTS)) {
  test(`speculative decode with drafts of 1..8 tokens equals serial greedy decode (${kind})`, () => {
    const model = ensureFixture();
    const serial = generated(run([model, '--ids', ids, '--gen', String(GEN), '--incremental']).stdout);
    assert.equal(serial.length, GEN);
    const tail = ids.split(',').slice(-3).join(',');
    // Material the drafter will follow: the true continuation (drafts all accepted), and a
    // copy with every fourth token wrong (drafts partly accepted).
    const perfect = `${tail},${serial.join(',')}`;
    const corrupted = `${tail},${serial.map((t, i) => (i % 4 === 3 ? (t + 1) % 163584 : t)).join(',')}`;
    for (let k = 1; k <= 8; k++) {
      for (const [label, material] of [['no material', null], ['perfect material', perfect], ['corrupted material', corrupted]]) {
        const args = [model, '--ids', ids, '--gen', String(GEN), '--spec', String(k)];
        if (material) args.push('--context-ids', material);
        // Paced (the default: the tiny model is compute-bound, so drafting mostly pauses)
        // and --spec-always (every proposal verified): the same output either way.
        const paced = run(args);
        assert.equal(paced.status, 0, paced.stderr);
        assert.deepEqual(generated(paced.stdout), serial, `--spec ${k}, ${label}, paced`);
        const r = run([...args, '--spec-always']);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(generated(r.stdout), serial, `--spec ${k}, ${label}`);
        const stats = specStats(r.stdout);
        if (label === 'perfect material') assert.equal(stats.accepted, stats.drafted, `--spec ${k}: every draft accepted`);
        if (label === 'perfect material') assert.ok(stats.drafted >= GEN / 2, `--spec ${k}: drafted ${stats.drafted}`);
        if (label === 'corrupted material' && k >= 4) assert.ok(stats.accepted < stats.drafted, `--spec ${k}: a rejection happened`);
      }
    }
  });
}

test('--replay-acceptance A replays a drafter that lands A of its tokens: the drafts of the true continuation stop being accepted at the first coin that fails, and the output is serial decode\'s', () => {
  const model = ensureFixture();
  const ids = PROMPTS['non-repetitive text'];
  const gen = 64;
  const serial = generated(run([model, '--ids', ids, '--gen', String(gen), '--incremental']).stdout);
  const material = `${ids.split(',').slice(-3).join(',')},${serial.join(',')}`;
  const base = [model, '--ids', ids, '--gen', String(gen), '--spec', '8', '--spec-always', '--context-ids', material];
  const rates: number[] = [];
  for (const a of [0, 0.4, 0.8, 1]) {
    const r = run([...base, '--replay-acceptance', String(a)]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(generated(r.stdout), serial, `--replay-acceptance ${a}`);
    const st = specStats(r.stdout);
    rates.push(st.accepted / st.drafted);
    // Each round accepts a run of drafts, then (unless all landed) one spoiled token.
    for (const round of specRounds(r.stdout)) {
      const [drafted, accepted] = round.split('/').map(Number);
      assert.ok(accepted <= drafted, round);
    }
  }
  // 0 and 1: the switch off (the true continuation, every draft lands) and on at 1 agree.
  assert.equal(rates[0], 1);
  assert.equal(rates[3], 1);
  // A drafter landing a of its tokens in turn accepts a run before the first miss: the share
  // of drafted tokens accepted grows with a and stays below 1.
  assert.ok(rates[1] < rates[2] && rates[2] < 1, `accepted shares ${rates.join(', ')}`);
  assert.ok(rates[1] > 0.1 && rates[1] < 0.6, `at 0.4: ${rates[1]}`);
  const bad = run([...base, '--replay-acceptance', '1.5']);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--replay-acceptance/);
  const alone = run([model, '--ids', ids, '--gen', '4', '--replay-acceptance', '0.5']);
  assert.notEqual(alone.status, 0);
  assert.match(alone.stderr, /--replay-acceptance spoils --spec's drafts: it needs --spec N/);
});

/** Each verify pass's "drafted/accepted" counts, in order. */
function specRounds(stdout: string): string[] {
  const m = /^spec rounds \(drafted\/accepted\):(.*)$/m.exec(stdout);
  assert.ok(m, `no spec rounds line in:\n${stdout}`);
  return m[1].trim().split(' ').filter(Boolean);
}

test('a verify pass cut back after any number of accepted drafts leaves the tokens and the state of serial decode, at any thread count and pass size', () => {
  const model = ensureFixture();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-verify-'));
  try {
    // Ten tokens without a repeated trigram: the drafter's only evidence is the material,
    // which repeats the prompt, so its first proposal (at --spec 12 and the initial 50 %
    // acceptance) is exactly 6 tokens of the material's continuation.
    const ids = '1008,10484,318,15383,387,220,3412,4432,11,1512';
    const serialState = path.join(dir, 'serial.k3state');
    const serialRun = run([model, '--ids', ids, '--gen', String(GEN), '--incremental', '--save-state', serialState]);
    assert.equal(serialRun.status, 0, serialRun.stderr);
    const serial = generated(serialRun.stdout);
    const want = fs.readFileSync(serialState);
    const DRAFTED = 6;
    // Draft i of the first pass is serial[1 + i]: a wrong token there accepts exactly i.
    for (let accepted = 0; accepted <= DRAFTED; accepted++) {
      const material = serial.map((t, i) => (i === 1 + accepted ? (t + 1) % 163584 : t));
      for (const [threads, batch] of [[1, 128], [2, 128], [3, 128], [2, 4], [1, 1]]) {
        const label = `${accepted} of ${DRAFTED} accepted, --threads ${threads} --batch ${batch}`;
        const state = path.join(dir, `spec-${accepted}-${threads}-${batch}.k3state`);
        const r = run([model, '--ids', ids, '--gen', String(GEN), '--spec', '12', '--spec-always', '--context-ids', `${ids},${material.join(',')}`,
          '--threads', String(threads), '--batch', String(batch), '--save-state', state]);
        assert.equal(r.status, 0, `${label}: ${r.stderr}`);
        assert.equal(specRounds(r.stdout)[0], `${DRAFTED}/${accepted}`, label);
        assert.deepEqual(generated(r.stdout), serial, label);
        // The saved state holds the tokens, every KDA layer's recurrent state and conv
        // history and the MLA cache: all of it bit for bit.
        assert.ok(fs.readFileSync(state).equals(want), `${label}: the state differs from serial decode's`);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a saved and resumed sequence continues bit for bit like an uninterrupted one', () => {
  const model = ensureFixture();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-state-'));
  try {
    const state = path.join(dir, 'conversation.k3state');
    const save = run([model, '--ids', '1512,12,19,4,2766,11,220', '--gen', '0', '--save-state', state]);
    assert.equal(save.status, 0, save.stderr);
    const resumed = run([model, '--ids', '1008,10484', '--load-state', state, '--gen', '16', '--dump-logits', path.join(dir, 'a.bin')]);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /^prefilled 2 tokens \(7 resumed from held state\)$/m);
    const whole = run([model, '--ids', '1512,12,19,4,2766,11,220,1008,10484', '--gen', '16', '--incremental', '--dump-logits', path.join(dir, 'b.bin')]);
    assert.equal(whole.status, 0, whole.stderr);
    assert.deepEqual(generated(resumed.stdout), generated(whole.stdout));
    assert.ok(fs.readFileSync(path.join(dir, 'a.bin')).equals(fs.readFileSync(path.join(dir, 'b.bin'))), 'first-step logits differ');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** FNV-1a 64 of bytes (the state file's payload checksum, native/src/hash.c). */
function fnv1a64(bytes: Buffer): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}

/** A copy of a state file changed by edit, with its checksum made valid again. */
function forged(state: Buffer, edit: (b: Buffer) => void): Buffer {
  const b = Buffer.from(state);
  edit(b);
  b.writeBigUInt64LE(fnv1a64(b.subarray(96)), 88);
  return b;
}

test('state files that are truncated, corrupted, forged, from another model or another architecture are refused', () => {
  const model = ensureFixture();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-state-'));
  try {
    const state = path.join(dir, 'good.k3state');
    assert.equal(run([model, '--ids', '1,2,3,4,5', '--gen', '0', '--save-state', state]).status, 0);
    const good = fs.readFileSync(state);
    const variants: [string, Buffer, RegExp, string][] = [
      ['truncated', good.subarray(0, good.length - 100), /is truncated/, model],
      ['byte-flipped', Buffer.from(good.map((b, i) => (i === good.length - 7 ? b ^ 0x10 : b))), /is corrupted: its checksum does not match/, model],
      ['another architecture', (() => { const b = Buffer.from(good); b.writeUInt32LE(b.readUInt32LE(16) + 1, 16); return b; })(), /another architecture: hidden_size 65, this model has 64/, model],
      ['not a state file', Buffer.from('hello, this is not a state file at all, not even close'), /is not a k3 state file/, model],
      ['another model', good, /saved by another model/, ensureFixture({ gate: 'softplus' })],
      // A checksum only says the bytes are the ones written; these are written with a valid
      // one, and each value must still be refused.
      ['a token count of 2^31 - 1', (() => { const b = Buffer.from(good); b.writeUInt32LE(0x7fffffff, 72); return b; })(), /it says 2147483647 tokens, but its payload of \d+ bytes cannot hold their ids/, model],
      ['a token id outside the vocabulary', forged(good, (b) => b.writeInt32LE(163840, 96 + 4 * 2)), /token 2 of 5 is id 163840, outside the vocabulary \[0, 163840\)/, model],
      ['a negative token id', forged(good, (b) => b.writeInt32LE(-7, 96)), /token 0 of 5 is id -7/, model],
      ['no next token after five', forged(good, (b) => b.writeInt32LE(-1, 96 + 4 * 5)), /the next token is -1, expected an id in the vocabulary/, model],
      ['a NaN in the KDA state', forged(good, (b) => b.writeFloatLE(Number.NaN, 96 + 4 * 6 + 4 * 10)), /the KDA state's float 10 of \d+ is NaN/, model],
      ['an infinity in the MLA cache', forged(good, (b) => b.writeFloatLE(Number.POSITIVE_INFINITY, b.length - 4)), /the MLA cache's float \d+ of \d+ is infinite/, model],
    ];
    for (const [label, bytes, expect, target] of variants) {
      const file = path.join(dir, `${label}.k3state`);
      fs.writeFileSync(file, bytes);
      for (const bin of [k3Binaries.plain, k3Binaries.asan]) {
        const r = spawnSync(bin, [target, '--ids', '6', '--load-state', file, '--gen', '1'], { encoding: 'utf8' });
        assert.equal(r.status, 1, `${label}: ${r.stderr}`);
        assert.match(r.stderr, /loading the state failed \(state\)/, label);
        assert.match(r.stderr, expect, label);
        assert.doesNotMatch(r.stderr, /AddressSanitizer|runtime error/, label);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('k3 draft-replay drafts from repeated code and material, and nothing from text without repeats', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-replay-'));
  try {
    const tok = path.join(ensureFixture(), '.');
    const line = 'for (int i = 0; i < n; i++) total += weight[i] * value[i];\n';
    fs.writeFileSync(path.join(dir, 'prefix'), `int sum(void) {\n${line}${line}`);
    fs.writeFileSync(path.join(dir, 'truth'), `${line}${line}${line}return total;\n}\n`);
    fs.writeFileSync(path.join(dir, 'material'), `return total;\n}\n`);
    fs.writeFileSync(path.join(dir, 'plain'), 'The quick brown fox jumps over the lazy dog near the river bank today.');
    fs.writeFileSync(path.join(dir, 'other'), 'Seven wizards quietly mixed jam, honey and green pepper for breakfast.');
    const replay = (prefix: string, truth: string, extra: string[] = []) => {
      const r = run(['draft-replay', '--tok', tok, '--prefix-file', path.join(dir, prefix), '--truth-file', path.join(dir, truth), '--spec', '8', ...extra]);
      assert.equal(r.status, 0, r.stderr);
      const m = /(\d+) true tokens, (\d+) forward passes, \d+ rounds, (\d+) drafted, (\d+) accepted/.exec(r.stdout);
      assert.ok(m, r.stdout);
      return { tokens: Number(m[1]), passes: Number(m[2]), drafted: Number(m[3]), accepted: Number(m[4]) };
    };
    const repeated = replay('prefix', 'truth', ['--context-file', path.join(dir, 'material')]);
    assert.ok(repeated.accepted > repeated.tokens / 2, `accepted ${repeated.accepted} of ${repeated.tokens}`);
    assert.ok(repeated.passes < repeated.tokens / 2, `${repeated.passes} passes for ${repeated.tokens} tokens`);
    const plain = replay('plain', 'other');
    assert.equal(plain.drafted, 0);
    assert.equal(plain.passes, plain.tokens);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
