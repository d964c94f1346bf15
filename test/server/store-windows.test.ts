// store-windows.test.ts - one workspace folder shared by several language servers (one per
// window; here, several WorkspaceStores on one folder, as in separate processes): each sees
// what the other wrote and deleted, a conversation continued in two windows at once is
// never overwritten (the second write is refused, with a message), a lock held by a live
// window makes a write wait and then refuse, a lock left by a dead one is broken; and the
// state an older k3-code kept in per-window folders moves to the shared folder once.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { K3Problem } from '../../protocol/lsp';
import { LOCK_WAIT_MS } from '../../server/state/lock';
import { type StoredConversation, WorkspaceStore } from '../../server/state/store';

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'k3-windows-'));
}

function conversation(id: string, updatedAt: number, replies = 1): StoredConversation {
  const messages: StoredConversation['messages'] = [];
  for (let i = 0; i < replies; i++) {
    messages.push(
      { id: `${id}-u${i}`, role: 'user', content: `q${i}`, reasoning: '', createdAt: updatedAt },
      { id: `${id}-a${i}`, role: 'assistant', content: `a${i}`, reasoning: '', createdAt: updatedAt, stopReason: 'stop-token' },
    );
  }
  return { id, title: id, createdAt: updatedAt, updatedAt, thinking: false, messages, state: null };
}

test('two windows on one folder see what the other wrote and deleted', async () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  const b = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  assert.deepEqual(b.list(), []);
  await a.put(conversation('from-a', 1));
  assert.deepEqual(b.list().map((c) => c.id), ['from-a']);
  await b.put(conversation('from-b', 2));
  await b.updateWorkspace({ preset: 'laptop' });
  assert.deepEqual(a.list().map((c) => c.id), ['from-b', 'from-a']);
  assert.equal(a.readWorkspace().preset, 'laptop');
  // A's timing write keeps B's preset: workspace.json is re-read under the lock.
  await a.updateWorkspace({ lastLoad: { bytes: 1, ms: 1 } });
  assert.deepEqual(b.readWorkspace(), { preset: 'laptop', lastLoad: { bytes: 1, ms: 1 } });
  await a.delete('from-b');
  assert.deepEqual(b.list().map((c) => c.id), ['from-a']);
});

test('a conversation continued in two windows at once: the second write is refused with a message, the first stays', async () => {
  const root = tmp();
  const problems: K3Problem[] = [];
  const a = new WorkspaceStore(root, (p) => problems.push(p));
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  await a.put(conversation('c', 1));
  const inA = a.get('c')!;
  const inB = b.get('c')!;
  // Both windows answer a message in `c`; A records its turn first.
  inA.messages.push(...conversation('c', 2, 2).messages.slice(2));
  inA.updatedAt = 2;
  assert.equal(await a.put(inA), undefined);
  inB.messages.push({ id: 'b-u', role: 'user', content: 'other', reasoning: '', createdAt: 3 });
  inB.updatedAt = 3;
  const refused = await b.put(inB);
  assert.equal(refused?.kind, 'conversation-changed');
  assert.match(refused?.message ?? '', /Another window of this workspace added to this conversation/);
  const onDisk = new WorkspaceStore(root, () => undefined).get('c');
  assert.equal(onDisk?.messages.length, 4, 'A’s turn is what the file holds');
  assert.equal(b.get('c')?.messages.length, 4, 'B now shows the version on disk');
  // Having read it, B may go on.
  const next = b.get('c')!;
  next.updatedAt = 4;
  assert.equal(await b.put(next), undefined);
});

test('a lock held by a live window makes a write wait, then refuse it naming the holder; a dead window’s lock is broken', async () => {
  const root = tmp();
  fs.writeFileSync(path.join(root, 'lock'), `${process.ppid} ${os.hostname()} held-by-another-window\n`);
  const problems: K3Problem[] = [];
  const s = new WorkspaceStore(root, (p) => problems.push(p));
  const t0 = Date.now();
  const refused = await s.put(conversation('c', 1));
  assert.ok(Date.now() - t0 >= LOCK_WAIT_MS, 'it waited for the holder first');
  assert.equal(refused?.kind, 'storage-unavailable');
  assert.match(refused?.message ?? '', new RegExp(`process ${process.ppid}`));
  assert.deepEqual(s.list().map((c) => c.id), ['c'], 'kept in memory');

  const dead = spawnSync(process.execPath, ['-e', '']).pid as number;
  fs.writeFileSync(path.join(root, 'lock'), `${dead} ${os.hostname()} left-by-a-crash\n`);
  assert.equal(await s.put(conversation('c', 2)), undefined);
  assert.equal(s.storage().problem, undefined, 'a write that succeeds clears the problem');
  assert.equal(fs.existsSync(path.join(root, 'lock')), false, 'released after the write');
  assert.equal(new WorkspaceStore(root, () => undefined).get('c')?.updatedAt, 2);
});

test('state an older k3-code kept per window moves to the shared folder once; the newer copy of a conversation wins', async () => {
  const parent = tmp();
  const legacy = [path.join(parent, 'ws-1', 'ext'), path.join(parent, 'ws-2', 'ext')];
  const write = (dir: string, c: StoredConversation, state?: string) => {
    fs.mkdirSync(path.join(dir, 'conversations'), { recursive: true });
    const withState = state ? { ...c, state: { file: state, tokens: 5, model: 'm', bytes: 3 } } : c;
    fs.writeFileSync(path.join(dir, 'conversations', `${c.id}.json`), JSON.stringify({ format: 'k3-conversation', version: 1, ...withState }));
    if (state) fs.writeFileSync(path.join(dir, 'conversations', state), 'abc');
  };
  write(legacy[0], conversation('shared', 1, 1));
  write(legacy[1], conversation('shared', 5, 2), 'shared-1.k3state');
  write(legacy[1], conversation('only-two', 3));
  fs.writeFileSync(path.join(legacy[0], 'workspace.json'), JSON.stringify({ format: 'k3-workspace', version: 1, preset: 'desktop' }));
  const root = path.join(parent, 'shared');
  const problems: K3Problem[] = [];
  const s = new WorkspaceStore(root, (p) => problems.push(p), { legacy, workspace: ['file:///w'] });
  await s.ready();
  assert.deepEqual(s.list().map((c) => [c.id, c.messages.length]), [['shared', 4], ['only-two', 2]]);
  assert.equal(s.get('shared')?.state?.file, 'shared-1.k3state');
  assert.equal(fs.readFileSync(path.join(root, 'conversations', 'shared-1.k3state'), 'utf8'), 'abc');
  assert.deepEqual(s.readWorkspace(), { preset: 'desktop', workspace: ['file:///w'] });
  assert.equal(problems.length, 0);
  for (const dir of legacy) {
    assert.deepEqual(fs.readdirSync(dir), ['MOVED.txt']);
    assert.match(fs.readFileSync(path.join(dir, 'MOVED.txt'), 'utf8'), new RegExp(root.replace(/[/\\]/g, '.')));
  }
  // Once: a later window finds nothing left to move and changes nothing.
  const again = new WorkspaceStore(root, (p) => problems.push(p), { legacy, workspace: ['file:///w'] });
  await again.ready();
  assert.deepEqual(again.list().map((c) => c.id), ['shared', 'only-two']);
  assert.equal(problems.length, 0);
});
