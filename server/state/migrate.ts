// migrate.ts - moves a workspace's state from where an older k3-code kept it (VS Code's
// per-window `storageUri`, which differs between windows of one workspace: `<id>`,
// `<id>-1`, ...) into the store's folder, once: conversations with their saved engine
// states (the newer copy of one conversation wins), the chosen preset when the new folder
// has none, files set aside. What moved is removed from the old folder, which gets a
// MOVED.txt saying where it went, so a second run finds nothing to do. Runs under the
// store's lock; never throws: failures come back as problems, and a file that could not
// be moved stays where it was.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { action } from '../errors';
import type { K3Problem } from '../../protocol/lsp';
import { isParseFailure, parseConversation, parseWorkspace, workspaceText } from './format';
import { describeFsError, entryKind, isRegularFile, readRegularFile, writeFileAtomic } from './files';

/** Renames, or copies and removes across file systems. */
function move(from: string, to: string): void {
  try {
    fs.renameSync(from, to);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
    fs.copyFileSync(from, to);
    fs.rmSync(from, { force: true });
  }
}

function mtime(p: string): number {
  return fs.statSync(p, { throwIfNoEntry: false })?.mtimeMs ?? 0;
}

function moveConversations(from: string, to: string): void {
  if (entryKind(from) !== 'folder') return;
  fs.mkdirSync(to, { recursive: true });
  const names = fs.readdirSync(from);
  for (const name of names.filter((n) => n.endsWith('.json'))) {
    const file = path.join(from, name);
    const read = readRegularFile(file);
    const parsed = 'text' in read ? parseConversation(read.text) : undefined;
    if (!parsed || isParseFailure(parsed) || `${parsed.id}.json` !== name) continue; // left for a person to look at
    const target = path.join(to, name);
    const existing = isRegularFile(target) ? readRegularFile(target) : undefined;
    const current = existing && 'text' in existing ? parseConversation(existing.text) : undefined;
    if (current && !isParseFailure(current) && current.updatedAt >= parsed.updatedAt) {
      // The new folder has this conversation already, as new or newer.
      if (parsed.state) fs.rmSync(path.join(from, parsed.state.file), { force: true });
      fs.rmSync(file, { force: true });
      continue;
    }
    if (parsed.state) {
      const state = path.join(from, parsed.state.file);
      if (isRegularFile(state)) move(state, path.join(to, parsed.state.file));
      else parsed.state = null;
    }
    if ('text' in read) writeFileAtomic(target, read.text);
    fs.rmSync(file, { force: true });
  }
  // Saved states no moved conversation named are leftovers.
  for (const name of fs.readdirSync(from)) if (name.endsWith('.k3state')) fs.rmSync(path.join(from, name), { force: true });
  if (fs.readdirSync(from).length === 0) fs.rmdirSync(from);
}

function moveWorkspaceFile(from: string, root: string): void {
  if (!isRegularFile(from)) return;
  const read = readRegularFile(from);
  const old = 'text' in read ? parseWorkspace(read.text) : undefined;
  if (old && !isParseFailure(old)) {
    const target = path.join(root, 'workspace.json');
    const existing = isRegularFile(target) ? readRegularFile(target) : undefined;
    const parsedNew = existing && 'text' in existing ? parseWorkspace(existing.text) : {};
    const current = isParseFailure(parsedNew) ? {} : parsedNew;
    if (current.preset === undefined && old.preset !== undefined) {
      writeFileAtomic(target, workspaceText({ ...current, preset: old.preset }));
    }
  }
  fs.rmSync(from, { force: true });
}

function moveCorrupt(from: string, to: string): void {
  if (entryKind(from) !== 'folder') return;
  fs.mkdirSync(to, { recursive: true });
  for (const name of fs.readdirSync(from)) move(path.join(from, name), path.join(to, `${name}.moved`));
  fs.rmdirSync(from);
}

/** Moves what the `legacy` folders hold into `root`; returns the problems met. */
export function migrateLegacyState(root: string, legacy: readonly string[]): K3Problem[] {
  const problems: K3Problem[] = [];
  const here = path.resolve(root);
  // Newest first: its preset is the one kept when several old folders have one.
  const folders = [...new Set(legacy.map((p) => path.resolve(p)))]
    .filter((p) => p !== here && entryKind(p) === 'folder')
    .sort((a, b) => mtime(path.join(b, 'workspace.json')) - mtime(path.join(a, 'workspace.json')));
  for (const old of folders) {
    const holds = ['workspace.json', 'conversations', 'corrupt'].some((n) => entryKind(path.join(old, n)) !== 'missing');
    if (!holds) continue;
    try {
      moveConversations(path.join(old, 'conversations'), path.join(root, 'conversations'));
      moveWorkspaceFile(path.join(old, 'workspace.json'), root);
      moveCorrupt(path.join(old, 'corrupt'), path.join(root, 'corrupt'));
      fs.writeFileSync(path.join(old, 'MOVED.txt'), `k3-code moved this workspace's chat history and choices to\n${root}\non ${new Date().toISOString()}.\n`);
    } catch (e) {
      problems.push({
        kind: 'storage-unavailable',
        action: action('none'),
        message: `Part of this workspace's chat history could not be moved from its old folder ${old}; what was not moved stays there.`,
        detail: describeFsError(e),
      });
    }
  }
  return problems;
}
