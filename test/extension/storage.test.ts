// storage.test.ts - where the server keeps a workspace's state (extension/storage.ts): one
// folder per workspace, named after its workspace file or its folders, the same for every
// window and reload of it; and the per-window folders an older k3-code used, found for the
// move: this window's and its siblings `<id>-N`, nobody else's.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { legacyStorageFolders, workspaceIdentity, workspaceStorageFolder } from '../../extension/storage';

test('a workspace is its saved workspace file, else its folders in any order; a window without one has its own folder', () => {
  const g = '/global';
  const a = workspaceStorageFolder(g, workspaceIdentity({ folders: ['file:///a', 'file:///b'] }));
  const b = workspaceStorageFolder(g, workspaceIdentity({ folders: ['file:///b', 'file:///a'] }));
  assert.equal(a, b, 'the same folders are the same workspace');
  assert.match(a, /^\/global\/workspaces\/[0-9a-f]{20}$/);
  assert.notEqual(workspaceStorageFolder(g, workspaceIdentity({ folders: ['file:///a'] })), a);
  assert.deepEqual(workspaceIdentity({ workspaceFile: 'file:///w.code-workspace', folders: ['file:///a'] }), ['file:///w.code-workspace']);
  assert.deepEqual(workspaceIdentity({ workspaceFile: 'untitled:Untitled-1', folders: ['file:///b', 'file:///a'] }), ['file:///a', 'file:///b']);
  assert.equal(workspaceStorageFolder(g, workspaceIdentity({ folders: [] })), '/global/workspaces/no-folder');
});

test('the old per-window folders are this window’s and its numbered siblings that hold the extension’s folder', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-legacy-'));
  for (const d of ['9952340', '9952340-1', '9952340-2', '99523401', 'other']) fs.mkdirSync(path.join(root, d, 'k3-code.k3-code'), { recursive: true });
  fs.mkdirSync(path.join(root, '9952340-3')); // a window that never wrote anything for k3-code
  const found = legacyStorageFolders(path.join(root, '9952340-2', 'k3-code.k3-code'));
  assert.deepEqual(found, ['9952340-2', '9952340', '9952340-1'].map((d) => path.join(root, d, 'k3-code.k3-code')));
  assert.deepEqual(legacyStorageFolders(undefined), []);
});
