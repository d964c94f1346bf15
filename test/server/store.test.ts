// store.test.ts - the per-workspace files (server/state/store.ts): conversations survive a
// new store on the same folder; a corrupt or foreign file is moved aside and reported
// while the others still load, and is never deleted when corrupt/ cannot be made; a FIFO
// named like a history file is refused at once; a saved state that is a folder is set aside
// and reported by the leftover sweep, which never fails a listing; saved states are bounded in bytes and
// conversations in number, oldest first; storage that cannot be written degrades (the
// problem is reported once, what this window has stays in memory); writes are atomic even
// when cut short; leftovers of dead writers are swept, a live writer's are not; clearing
// removes everything.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { K3Problem } from '../../protocol/lsp';
import { type StoredConversation, WorkspaceStore, writeFileAtomic } from '../../server/state/store';

// Run as its own child (below): one atomic write of 100 KB under the caller's file-size limit.
if (process.env.K3_STORE_WRITE_CHILD) {
  try {
    writeFileAtomic(process.env.K3_STORE_WRITE_CHILD, 'x'.repeat(100_000));
    console.log('written');
  } catch (e) {
    console.log((e as NodeJS.ErrnoException).code);
  }
  process.exit(0);
}

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'k3-store-'));
}

function conversation(id: string, updatedAt: number, stateBytes = 0): StoredConversation {
  return {
    id,
    title: `t ${id}`,
    createdAt: updatedAt,
    updatedAt,
    thinking: true,
    messages: [
      { id: `${id}-u`, role: 'user', content: 'q', reasoning: '', createdAt: updatedAt },
      { id: `${id}-a`, role: 'assistant', content: 'a', reasoning: 'r', createdAt: updatedAt, stopReason: 'length', ids: [1, 2, 3] },
    ],
    state: stateBytes ? { file: `${id}.k3state`, tokens: 10, model: 'm', bytes: stateBytes } : null,
  };
}

/** Saves a conversation with a state file of its size, as the chat service does. */
async function putWithState(store: WorkspaceStore, root: string, c: StoredConversation): Promise<void> {
  if (c.state) {
    fs.mkdirSync(path.join(root, 'conversations'), { recursive: true });
    fs.writeFileSync(path.join(root, 'conversations', c.state.file), Buffer.alloc(c.state.bytes));
  }
  assert.equal(await store.put(c), undefined);
}

/** The id of a process that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '']);
  return r.pid as number;
}

test('conversations and the workspace file are read back by a new store on the same folder', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  await a.updateWorkspace({ preset: 'laptop', lastLoad: { bytes: 10, ms: 5 } });
  await putWithState(a, root, conversation('c1', 1, 100));
  const b = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  assert.deepEqual(b.readWorkspace(), { preset: 'laptop', lastLoad: { bytes: 10, ms: 5 } });
  assert.deepEqual(b.get('c1'), conversation('c1', 1, 100));
  assert.deepEqual(fs.readdirSync(path.join(root, 'conversations')).sort(), ['c1.json', 'c1.k3state']);
  assert.deepEqual(b.storage(), { path: root });
});

test('a corrupt history file is moved aside and reported, and the other conversations still load', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  await a.put(conversation('good', 1));
  await a.put(conversation('bad', 2));
  await a.put(conversation('old', 3));
  const dir = path.join(root, 'conversations');
  fs.writeFileSync(path.join(dir, 'bad.json'), '{"format": "k3-conversation", "version": 1, "id": "bad", "tit');
  const old = JSON.parse(fs.readFileSync(path.join(dir, 'old.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'old.json'), JSON.stringify({ ...old, version: 0 }));
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list().map((c) => c.id), ['good']);
  assert.deepEqual(problems.map((p) => p.kind), ['file-corrupt', 'file-corrupt']);
  assert.match(problems[0].message, /bad\.json could not be read.*moved to/);
  assert.match(problems[1].detail ?? '', /format version 0/);
  assert.equal(fs.readdirSync(path.join(root, 'corrupt')).length, 2);
  assert.deepEqual(fs.readdirSync(dir), ['good.json']);
  b.list();
  assert.equal(problems.length, 2, 'a file set aside is reported once');
});

test('a history file from a newer k3-code is left where it is, reported once, and not listed', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  await a.put(conversation('future', 1));
  const file = path.join(root, 'conversations', 'future.json');
  const text = JSON.stringify({ ...JSON.parse(fs.readFileSync(file, 'utf8')), version: 99 });
  fs.writeFileSync(file, text);
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list(), []);
  b.list();
  assert.equal(problems.length, 1);
  assert.match(problems[0].message, /newer k3-code/);
  assert.equal(fs.readFileSync(file, 'utf8'), text, 'another window may run that version: the file is untouched');
});

test('a corrupt history is set aside beside itself, never deleted, when corrupt/ cannot be made', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  await a.put(conversation('good', 1));
  const bad = '{"format": "k3-conversation", "version": 1, "id": "bad", "tit';
  fs.writeFileSync(path.join(root, 'conversations', 'bad.json'), bad);
  fs.writeFileSync(path.join(root, 'corrupt'), 'a file where the folder would go');
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list().map((c) => c.id), ['good']);
  const names = fs.readdirSync(path.join(root, 'conversations'));
  const aside = names.find((n) => n.startsWith('bad.json.corrupt-'));
  assert.ok(aside, `bad.json is kept under another name; the folder holds ${names.join(', ')}`);
  assert.equal(fs.readFileSync(path.join(root, 'conversations', aside), 'utf8'), bad);
  assert.match(problems[0].message, /moved to .*bad\.json\.corrupt-/);
});

test('a FIFO named like a history file is refused at once and set aside, and the others load', { timeout: 30_000 }, async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  await a.put(conversation('good', 1));
  execFileSync('mkfifo', [path.join(root, 'conversations', 'pipe.json')]);
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list().map((c) => c.id), ['good']);
  assert.equal(problems.length, 1);
  assert.match(problems[0].detail ?? '', /not a regular file \(a FIFO\)/);
  assert.deepEqual(fs.readdirSync(path.join(root, 'conversations')), ['good.json']);
});

test('conversations/ being a file: the problem is reported once, and conversations live on in memory', async () => {
  const root = tmp();
  fs.writeFileSync(path.join(root, 'conversations'), '');
  const problems: K3Problem[] = [];
  const s = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(s.list(), []);
  const notKept = await s.put(conversation('c', 1));
  assert.equal(notKept?.kind, 'storage-unavailable');
  assert.match(notKept?.detail ?? '', /EEXIST|ENOTDIR/);
  assert.match(notKept?.message ?? '', /Completions and chat still work/);
  assert.deepEqual(s.list().map((c) => c.id), ['c'], 'this window keeps what it could not save');
  await s.put(conversation('d', 2));
  assert.ok(problems.length >= 1 && problems.every((p) => p.kind === 'storage-unavailable'));
  assert.equal(new Set(problems.map((p) => p.message)).size, problems.length, 'each problem reported once');
  assert.equal(s.storage().problem?.kind, 'storage-unavailable');
  assert.equal(s.newStatePath('c'), undefined, 'no saved state where nothing can be written');
});

test('storage that cannot be written (a file in its place) keeps the workspace values in memory and says why', async () => {
  const parent = tmp();
  const root = path.join(parent, 'state');
  fs.writeFileSync(root, 'not a folder');
  const problems: K3Problem[] = [];
  const s = new WorkspaceStore(root, (p) => problems.push(p));
  const p = await s.updateWorkspace({ preset: 'laptop' });
  assert.equal(p?.kind, 'storage-unavailable');
  assert.deepEqual(s.readWorkspace().preset, 'laptop');
  assert.equal(s.storage().problem?.message, p?.message);
  assert.equal(problems.length, 1);
  // The folder comes back: the next write succeeds and the problem is gone.
  fs.rmSync(root);
  assert.equal(await s.updateWorkspace({ lastLoad: { bytes: 1, ms: 2 } }), undefined);
  assert.equal(s.storage().problem, undefined);
  assert.deepEqual(new WorkspaceStore(root, () => undefined).readWorkspace(), { preset: 'laptop', lastLoad: { bytes: 1, ms: 2 } });
});

test('saved states are bounded in bytes and conversations in number, oldest evicted first', async () => {
  const root = tmp();
  const s = new WorkspaceStore(root, () => undefined);
  for (let i = 1; i <= 4; i++) await putWithState(s, root, conversation(`c${i}`, i, 100));
  await s.enforceLimits(250, 10, 'c4');
  assert.deepEqual(s.list().map((c) => [c.id, c.state !== null]), [['c4', true], ['c3', true], ['c2', false], ['c1', false]]);
  assert.equal(fs.existsSync(path.join(root, 'conversations/c1.k3state')), false);
  await s.enforceLimits(250, 2, 'c1');
  assert.deepEqual(s.list().map((c) => c.id), ['c4', 'c1'], 'the kept conversation stays even when oldest');
});

test('a write never leaves a half-written file: it goes to a temporary file renamed into place', async () => {
  const root = tmp();
  const file = path.join(root, 'x.json');
  writeFileAtomic(file, 'one');
  writeFileAtomic(file, 'two');
  assert.equal(fs.readFileSync(file, 'utf8'), 'two');
  assert.deepEqual(fs.readdirSync(root), ['x.json']);
});

test('a write cut short (a file-size limit) fails whole: the old file stays and no temporary file is left', async () => {
  const root = tmp();
  const file = path.join(root, 'x.json');
  writeFileAtomic(file, 'old');
  // With `ulimit -f 1` a write past 1024 bytes is short, and the next one fails with EFBIG.
  const r = spawnSync('bash', ['-c', 'ulimit -f 1; exec "$0" "$1"', process.execPath, __filename], {
    encoding: 'utf8',
    env: { ...process.env, K3_STORE_WRITE_CHILD: file },
  });
  assert.match(r.stdout, /EFBIG/, `the child said: ${r.stdout}${r.stderr}`);
  assert.equal(fs.readFileSync(file, 'utf8'), 'old');
  assert.deepEqual(fs.readdirSync(root), ['x.json']);
});

test('temporary files of writers that are gone are swept, beside workspace.json and in conversations/; a live writer’s stay', async () => {
  const root = tmp();
  const conv = path.join(root, 'conversations');
  fs.mkdirSync(conv, { recursive: true });
  const dead = deadPid();
  const live = process.ppid;
  const leftovers = [`workspace.json.tmp-${dead}-0a1b2c3d`, `workspace.json.tmp-${live}-0a1b2c3d`];
  for (const f of leftovers) fs.writeFileSync(path.join(root, f), 'x');
  const inConv = [`c.json.tmp-${dead}-00ff00ff`, `c-x.p${dead}.k3state.tmp-${dead}`, `c-y.p${live}.k3state`, `c-z.p${dead}.k3state`];
  for (const f of inConv) fs.writeFileSync(path.join(conv, f), 'x');
  const s = new WorkspaceStore(root, () => undefined);
  s.list();
  assert.deepEqual(fs.readdirSync(root).sort(), ['conversations', `workspace.json.tmp-${live}-0a1b2c3d`].sort());
  assert.deepEqual(fs.readdirSync(conv), [`c-y.p${live}.k3state`], 'a state another live window wrote but has not named yet stays');
});

test('a saved state that is a folder is set aside and reported; listing, reading and writing conversations go on', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  await a.put(conversation('other', 1));
  await a.put(conversation('c', 2, 1));
  const conv = path.join(root, 'conversations');
  // c's saved state, and a leftover no conversation names, are folders (one with a file in it).
  const leftover = path.join(conv, `c-q.p${deadPid()}.k3state`);
  fs.mkdirSync(path.join(conv, 'c.k3state'));
  fs.mkdirSync(leftover);
  fs.writeFileSync(path.join(leftover, 'x'), 'x');
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list().map((c) => c.id), ['c', 'other']);
  assert.equal(b.get('c')?.state, null, 'the turn re-reads the history instead of resuming');
  assert.deepEqual(problems.map((p) => p.kind), ['file-corrupt', 'file-corrupt']);
  for (const p of problems) assert.match(p.message, /saved engine state .*\.k3state is not a file.*moved to/);
  assert.deepEqual(fs.readdirSync(conv).sort(), ['c.json', 'other.json']);
  assert.equal(fs.readdirSync(path.join(root, 'corrupt')).length, 2, 'set aside, never deleted');
  const c = b.get('c')!;
  c.updatedAt = 3;
  assert.equal(await b.put(c), undefined);
  b.list();
  assert.equal(problems.length, 2, 'reported once');
});

test('clearing deletes every file the store keeps', async () => {
  const root = tmp();
  const s = new WorkspaceStore(root, () => undefined);
  await s.updateWorkspace({ preset: 'max' });
  await s.put(conversation('c', 1));
  assert.equal(await s.clear(), 2);
  assert.deepEqual(fs.readdirSync(root), []);
  assert.deepEqual(s.list(), []);
});
