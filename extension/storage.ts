// storage.ts - where the server keeps a workspace's chat history, saved engine state and
// chosen preset: a folder under the extension's global storage named after the workspace
// itself (its workspace file, else its folder URIs), so every window of one workspace,
// and every reload, finds the same files. VS Code's per-window `storageUri` is not that:
// a second extension host of the workspace gets `<id>-1`, `<id>-2`, ... (it locks the
// first), which hid the history from the next window. Those folders are only where an
// older k3-code kept the state; the server moves it from them once. Pure apart from the
// listing of those old folders; it imports `vscode` for types only.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** What the state location needs to know about the workspace (vscode.workspace's values,
 * as URI strings). */
export interface WorkspaceFacts {
  /** vscode.workspace.workspaceFile: a saved `.code-workspace` (`file:`), or `untitled:`. */
  workspaceFile?: string;
  /** The workspace folders' URIs. */
  folders: readonly string[];
}

/** The URIs that identify a workspace: its saved workspace file, else its folders (sorted:
 * the same folders are the same workspace). Empty for a window without a folder. */
export function workspaceIdentity(w: WorkspaceFacts): string[] {
  if (w.workspaceFile && !w.workspaceFile.startsWith('untitled:')) return [w.workspaceFile];
  return [...new Set(w.folders)].sort();
}

/** The workspace's state folder under the global storage folder. */
export function workspaceStorageFolder(globalStorage: string, identity: readonly string[]): string {
  const name = identity.length === 0 ? 'no-folder' : crypto.createHash('sha256').update(identity.join('\n')).digest('hex').slice(0, 20);
  return path.join(globalStorage, 'workspaces', name);
}

/**
 * The folders an older k3-code may have kept this workspace's state in: this window's
 * `storageUri` (`…/workspaceStorage/<id>[-N]/<extension id>`) and the same extension's
 * folder in each sibling `<id>`, `<id>-1`, … (other windows of the workspace). Only those
 * that exist.
 */
export function legacyStorageFolders(storageUri: string | undefined): string[] {
  if (!storageUri) return [];
  const extensionDir = path.basename(storageUri);
  const windowDir = path.dirname(storageUri);
  const parent = path.dirname(windowDir);
  const id = path.basename(windowDir).replace(/-\d+$/, '');
  const pattern = new RegExp(`^${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(-\\d+)?$`);
  let siblings: string[];
  try {
    siblings = fs.readdirSync(parent).filter((d) => pattern.test(d));
  } catch {
    siblings = [];
  }
  const out = new Set<string>();
  for (const d of [path.basename(windowDir), ...siblings.sort()]) {
    const p = path.join(parent, d, extensionDir);
    if (fs.existsSync(p)) out.add(p);
  }
  return [...out];
}
