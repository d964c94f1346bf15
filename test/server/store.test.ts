// store.test.ts - the per-workspace files (server/state/store.ts): conversations survive a
// new store on the same folder; a corrupt or foreign file is moved aside and reported
// while the others still load; saved states are bounded in bytes and conversations in
// number, oldest first; clearing removes everything.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { K3Problem } from '../../server/protocol';
import { type StoredConversation, WorkspaceStore, writeFileAtomic } from '../../server/state/store';

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
function putWithState(store: WorkspaceStore, c: StoredConversation): void {
  if (c.state) fs.writeFileSync(store.statePath(c.state.file.replace(/\.k3state$/, ''))!, Buffer.alloc(c.state.bytes));
  store.put(c);
}

test('conversations and the workspace file are read back by a new store on the same folder', () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  a.updateWorkspace({ preset: 'laptop', lastLoad: { bytes: 10, ms: 5 } });
  putWithState(a, conversation('c1', 1, 100));
  const b = new WorkspaceStore(root, () => assert.fail('no problem expected'));
  assert.deepEqual(b.readWorkspace(), { preset: 'laptop', lastLoad: { bytes: 10, ms: 5 } });
  assert.deepEqual(b.get('c1'), conversation('c1', 1, 100));
  assert.deepEqual(fs.readdirSync(path.join(root, 'conversations')).sort(), ['c1.json', 'c1.k3state']);
});

test('a corrupt history file is moved aside and reported, and the other conversations still load', () => {
  const root = tmp();
  const a = new WorkspaceStore(root, () => undefined);
  a.put(conversation('good', 1));
  a.put(conversation('bad', 2));
  a.put(conversation('future', 3));
  const dir = path.join(root, 'conversations');
  fs.writeFileSync(path.join(dir, 'bad.json'), '{"format": "k3-conversation", "version": 1, "id": "bad", "tit');
  const future = JSON.parse(fs.readFileSync(path.join(dir, 'future.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'future.json'), JSON.stringify({ ...future, version: 99 }));
  const problems: K3Problem[] = [];
  const b = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(b.list().map((c) => c.id), ['good']);
  assert.deepEqual(problems.map((p) => p.kind), ['file-corrupt', 'file-corrupt']);
  assert.match(problems[0].message, /bad\.json could not be read.*moved to/);
  assert.match(problems[1].detail ?? '', /format version 99/);
  assert.equal(fs.readdirSync(path.join(root, 'corrupt')).length, 2);
  assert.deepEqual(fs.readdirSync(dir), ['good.json']);
});

test('a corrupt workspace file is set aside and the defaults are used', () => {
  const root = tmp();
  fs.writeFileSync(path.join(root, 'workspace.json'), 'not json');
  const problems: K3Problem[] = [];
  const s = new WorkspaceStore(root, (p) => problems.push(p));
  assert.deepEqual(s.readWorkspace(), {});
  assert.equal(problems.length, 1);
  assert.equal(fs.existsSync(path.join(root, 'workspace.json')), false);
});

test('saved states are bounded in bytes and conversations in number, oldest evicted first', () => {
  const root = tmp();
  const s = new WorkspaceStore(root, () => undefined);
  for (let i = 1; i <= 4; i++) putWithState(s, conversation(`c${i}`, i, 100));
  s.enforceLimits(250, 10, 'c4');
  assert.deepEqual(s.list().map((c) => [c.id, c.state !== null]), [['c4', true], ['c3', true], ['c2', false], ['c1', false]]);
  assert.equal(fs.existsSync(path.join(root, 'conversations/c1.k3state')), false);
  s.enforceLimits(250, 2, 'c1');
  assert.deepEqual(s.list().map((c) => c.id), ['c4', 'c1'], 'the kept conversation stays even when oldest');
});

test('a write never leaves a half-written file: it goes to a temporary file renamed into place', () => {
  const root = tmp();
  const file = path.join(root, 'x.json');
  writeFileAtomic(file, 'one');
  writeFileAtomic(file, 'two');
  assert.equal(fs.readFileSync(file, 'utf8'), 'two');
  assert.deepEqual(fs.readdirSync(root), ['x.json']);
});

test('clearing deletes every file the store keeps', () => {
  const root = tmp();
  const s = new WorkspaceStore(root, () => undefined);
  s.updateWorkspace({ preset: 'max' });
  s.put(conversation('c', 1));
  assert.equal(s.clear(), 2);
  assert.deepEqual(fs.readdirSync(root), []);
  assert.deepEqual(s.list(), []);
});
