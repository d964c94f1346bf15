// store.ts - the per-workspace files under storagePath (docs/PROTOCOL.md, "Workspace
// state"): workspace.json (the chosen preset, the last load's timing), one JSON file per
// conversation (history, versioned) and one saved engine state per conversation (written
// by the engine, k3_state_save).
//
// Several language servers (one per window of the workspace) share the folder: every write
// holds lock.ts's lock for a few file operations (so writes are async: a window waits for
// another without blocking its event loop), every listing re-reads what changed on disk, a
// history file another window changed since this one read it is never overwritten, and a
// sweep only takes leftovers whose writer is gone. Every JSON write is atomic. Reads stay
// synchronous and never fail: what they find that is not what it should be is set aside
// (an atomic rename, which needs no lock) and reported.
//
// Storage failures degrade, never disable: a folder that cannot be written (read-only, a
// file in its place, a full disk, a lock held too long) leaves what this window has in
// memory, reports the problem once and keeps it in storage() until a write succeeds. A file
// that cannot be read back is set aside (corrupt/, else renamed beside itself, else left in
// place and skipped), reported, and never deleted; a file a newer k3-code wrote is left
// alone. Without a storagePath everything lives in memory only. It renders nothing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { action } from '../errors';
import type { K3Problem } from '../../protocol/lsp';
import {
  type StoredConversation,
  type WorkspaceFile,
  conversationText,
  isParseFailure,
  parseConversation,
  parseWorkspace,
  stateFileName,
  stateFileOwner,
  workspaceText,
} from './format';
import { describeFsError, entryKind, explainFsError, isRegularFile, processAlive, readRegularFile, signature, sweepTempFiles, writeFileAtomic } from './files';
import { LockBusy, StoreLock } from './lock';
import { migrateLegacyState } from './migrate';

export type { LastLoad, SavedStateRef, StoredConversation, StoredMessage, WorkspaceFile } from './format';
export { writeFileAtomic } from './files';

/** Files set aside kept at most; older ones are deleted. */
const CORRUPT_KEPT = 8;

export interface StoreOptions {
  /** Folders an older k3-code kept this workspace's state in: their contents move here
   * once, at the first use. */
  legacy?: readonly string[];
  /** What identifies the workspace (folder URIs or the workspace file), recorded in
   * workspace.json for people looking at the folder. */
  workspace?: readonly string[];
}

export interface StorageStatus {
  /** The folder; absent when nothing is kept between runs (no storagePath). */
  path?: string;
  /** Why this window's chat history and choices cannot be saved now; absent when they can. */
  problem?: K3Problem;
}

export class WorkspaceStore {
  private readonly conversations = new Map<string, StoredConversation>();
  /** Each history file's signature as this store last read or wrote it, by file name. */
  private readonly seen = new Map<string, string>();
  /** `name@signature` of files that could not be read nor set aside: skipped, not re-reported. */
  private readonly skipped = new Set<string>();
  /** Conversations only this window has: their last write failed. */
  private readonly unsaved = new Set<string>();
  private workspace: WorkspaceFile = {};
  /** workspace.json's signature when last read; null: not read yet. */
  private workspaceSig: string | undefined | null = null;
  /** Workspace values whose write failed, kept on top of the file's. */
  private workspaceUnsaved: Partial<WorkspaceFile> = {};
  private opened = false;
  private readying: Promise<void> | undefined;
  private writeProblem: K3Problem | undefined;
  private lastReported: string | undefined;
  private readonly lock: StoreLock | undefined;

  /** root: storagePath, or undefined for memory only. report: problems handled. */
  constructor(
    readonly root: string | undefined,
    private readonly report: (p: K3Problem) => void,
    private readonly options: StoreOptions = {},
  ) {
    this.lock = root ? new StoreLock(path.join(root, 'lock')) : undefined;
  }

  private get convDir(): string | undefined {
    return this.root && path.join(this.root, 'conversations');
  }

  /** Where state is kept, and why it cannot be saved now (if so). */
  storage(): StorageStatus {
    this.open();
    const s: StorageStatus = {};
    if (this.root) s.path = this.root;
    if (this.writeProblem) s.problem = this.writeProblem;
    return s;
  }

  /** First use: the folder and the leftovers of writes cut by a crash. */
  private open(): void {
    if (this.opened || !this.root) return;
    this.opened = true;
    try {
      fs.mkdirSync(this.root, { recursive: true });
    } catch (e) {
      this.failed('This workspace’s state', e);
      return;
    }
    sweepTempFiles(this.root);
  }

  /** The first writes, once, before the server answers anything: the old location's state
   * moved here, and the workspace's identity recorded. Never rejects. */
  ready(): Promise<void> {
    this.readying ??= (async () => {
      this.open();
      const root = this.root;
      if (!root) return;
      const legacy = this.options.legacy ?? [];
      if (legacy.length) {
        await this.write('Moving the chat history from its old folder', () => {
          for (const p of migrateLegacyState(root, legacy)) this.report(p);
        });
      }
      if (this.options.workspace?.length && JSON.stringify(this.readWorkspace().workspace) !== JSON.stringify(this.options.workspace)) {
        await this.updateWorkspace({ workspace: [...this.options.workspace] });
      }
    })();
    return this.readying;
  }

  /** Runs a write under the lock. A failure becomes the storage problem (reported when it
   * is new); a success clears it. Never rejects. */
  private async write<T>(what: string, fn: () => T): Promise<{ ok: true; value: T } | { ok: false; problem: K3Problem }> {
    try {
      if (!this.root || !this.lock) return { ok: true, value: fn() };
      this.open();
      fs.mkdirSync(this.root, { recursive: true });
      const value = await this.lock.hold(fn);
      this.writeProblem = undefined;
      this.lastReported = undefined;
      return { ok: true, value };
    } catch (e) {
      return { ok: false, problem: this.failed(what, e) };
    }
  }

  private failed(what: string, e: unknown): K3Problem {
    // One sentence per cause (not per operation), so a folder that cannot be written is
    // reported once however many writes meet it.
    const message =
      e instanceof LockBusy
        ? `${what} was not saved: ${e.message}.`
        : `This workspace’s chat history and choices cannot be saved: ${explainFsError(e)}. Completions and chat still work; this window keeps its chat history until it closes.`;
    const problem: K3Problem = { kind: 'storage-unavailable', action: action('none'), message, detail: describeFsError(e) };
    this.writeProblem = problem;
    if (this.lastReported !== problem.message) {
      this.lastReported = problem.message;
      this.report(problem);
    }
    return problem;
  }

  /** Moves a file that cannot be used out of the way and reports why: into corrupt/
   * (keeping the newest few), else renamed beside itself, else left in place and skipped
   * from now on. Never deletes it. */
  setAside(file: string, kind: 'file-corrupt' | 'state-incompatible', message: string, detail?: string): K3Problem {
    let outcome = '';
    if (this.root && entryKind(file) !== 'missing') {
      try {
        outcome = ` It was moved to ${this.moveAside(this.root, file)}.`;
      } catch (e) {
        if (entryKind(file) !== 'missing') {
          this.skipped.add(`${path.basename(file)}@${signature(file) ?? 'unreadable'}`);
          outcome = ` It could not be moved aside (${describeFsError(e)}), so it stays where it is and is skipped.`;
        }
        // Gone meanwhile: another window set it aside first.
      }
    }
    const problem: K3Problem = { kind, action: action('none'), message: `${message}${outcome}`, detail: detail ?? file };
    this.report(problem);
    return problem;
  }

  /** Renames file into corrupt/ (keeping the newest few), else beside itself; returns where
   * it went. A rename is atomic, so this takes no lock: two windows setting one file aside
   * at once move it once, and the other's rename fails on a missing file. */
  private moveAside(root: string, file: string): string {
    const stamp = Date.now();
    const dir = path.join(root, 'corrupt');
    try {
      fs.mkdirSync(dir, { recursive: true });
      const to = path.join(dir, `${path.basename(file)}.${stamp}`);
      fs.renameSync(file, to);
      try {
        this.trimCorrupt(dir);
      } catch {
        // Another window trimmed it at the same time: the next set-aside trims again.
      }
      return to;
    } catch {
      const to = `${file}.corrupt-${stamp}`;
      fs.renameSync(file, to);
      return to;
    }
  }

  private trimCorrupt(dir: string): void {
    const kept = fs
      .readdirSync(dir)
      .flatMap((f) => {
        const sig = fs.statSync(path.join(dir, f), { throwIfNoEntry: false });
        return sig ? [{ f, t: sig.mtimeMs }] : [];
      })
      .sort((a, b) => b.t - a.t);
    for (const old of kept.slice(CORRUPT_KEPT)) fs.rmSync(path.join(dir, old.f), { force: true, recursive: true });
  }

  // ---- workspace.json

  /** The workspace's values, re-read when another window changed the file. */
  readWorkspace(): WorkspaceFile {
    this.open();
    if (!this.root) return { ...this.workspace, ...this.workspaceUnsaved };
    const file = path.join(this.root, 'workspace.json');
    const sig = signature(file);
    if (sig !== this.workspaceSig) {
      this.workspaceSig = sig;
      this.workspace = sig === undefined ? {} : this.parseWorkspaceFile(file, sig);
    }
    return { ...this.workspace, ...this.workspaceUnsaved };
  }

  private parseWorkspaceFile(file: string, sig: string): WorkspaceFile {
    if (this.skipped.has(`workspace.json@${sig}`)) return {};
    const read = readRegularFile(file);
    const parsed = 'text' in read ? parseWorkspace(read.text) : { problem: `workspace.json ${read.problem}` };
    if (!isParseFailure(parsed)) return parsed;
    if (parsed.newer) {
      this.skipped.add(`workspace.json@${sig}`);
      this.report({ kind: 'file-corrupt', action: action('none'), message: 'A newer k3-code wrote the workspace settings file; it is left as it is and the defaults are used.', detail: parsed.problem });
      return {};
    }
    this.setAside(file, 'file-corrupt', 'The workspace settings file could not be read; the defaults are used.', parsed.problem);
    return {};
  }

  /** Merges `change` into workspace.json (re-read under the lock, so another window's
   * values stay). Returns the storage problem when it could not be written; the change is
   * kept in memory then. */
  async updateWorkspace(change: Partial<WorkspaceFile>): Promise<K3Problem | undefined> {
    const root = this.root;
    this.readWorkspace();
    if (!root) {
      this.workspace = { ...this.workspace, ...change };
      return undefined;
    }
    const file = path.join(root, 'workspace.json');
    const r = await this.write('This workspace’s choices', () => {
      this.workspaceSig = null;
      const next = { ...this.readWorkspace(), ...change };
      writeFileAtomic(file, workspaceText(next));
      this.workspace = next;
      this.workspaceSig = signature(file);
    });
    if (r.ok) {
      this.workspaceUnsaved = {};
      return undefined;
    }
    this.workspaceUnsaved = { ...this.workspaceUnsaved, ...change };
    return r.problem;
  }

  // ---- conversations

  /** Brings the in-memory conversations up to date with the folder: files another window
   * wrote are read, files it deleted are dropped, leftovers of dead writers removed. */
  private scan(): void {
    this.open();
    const dir = this.convDir;
    if (!dir) return;
    let names: string[];
    try {
      names = fs.readdirSync(dir).sort();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') this.failed('Chat history', e);
      names = [];
    }
    sweepTempFiles(dir);
    const onDisk = new Set<string>();
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const id = name.slice(0, -'.json'.length);
      const file = path.join(dir, name);
      const sig = signature(file);
      if (sig === undefined) continue;
      if (this.unsaved.has(id) || (this.seen.get(name) === sig && this.conversations.has(id))) {
        onDisk.add(id);
        continue;
      }
      if (this.skipped.has(`${name}@${sig}`)) continue;
      const c = this.readConversation(file, name, sig);
      if (!c) continue;
      this.conversations.set(id, c);
      this.seen.set(name, sig);
      onDisk.add(id);
    }
    for (const id of [...this.conversations.keys()]) {
      if (!onDisk.has(id) && !this.unsaved.has(id)) {
        this.conversations.delete(id);
        this.seen.delete(`${id}.json`);
      }
    }
    // Saved states no conversation refers to, whose writer is gone, are leftovers.
    const referenced = new Set([...this.conversations.values()].flatMap((c) => (c.state ? [c.state.file] : [])));
    for (const name of names) {
      if (!name.endsWith('.k3state') || referenced.has(name)) continue;
      const pid = stateFileOwner(name);
      if (pid !== undefined && (pid === process.pid || processAlive(pid))) continue;
      this.sweepState(dir, name);
    }
  }

  /** Removes a leftover saved state. Anything by that name that is not a file (a folder, a
   * FIFO, a dangling link) is set aside and reported instead. Never throws: a sweep runs
   * inside every listing, and must not fail one. */
  private sweepState(dir: string, name: string): void {
    const file = path.join(dir, name);
    const kind = entryKind(file);
    if (kind === 'missing') return;
    if (kind === 'file') {
      try {
        fs.rmSync(file, { force: true });
      } catch {
        // Read-only, or another window swept it first: the next sweep tries again.
      }
      return;
    }
    const sig = signature(file) ?? 'unreadable';
    if (this.skipped.has(`${name}@${sig}`)) return;
    try {
      const what = kind === 'folder' ? 'a folder' : 'not a regular file';
      this.setAside(file, 'file-corrupt', `The saved engine state ${name} is not a file (${what}), so no conversation resumes from it.`);
    } catch {
      this.skipped.add(`${name}@${sig}`);
    }
  }

  private readConversation(file: string, name: string, sig: string): StoredConversation | undefined {
    const read = readRegularFile(file);
    const parsed = 'text' in read ? parseConversation(read.text) : { problem: `${name} ${read.problem}` };
    if (isParseFailure(parsed)) {
      if (parsed.newer) {
        this.skipped.add(`${name}@${sig}`);
        this.report({
          kind: 'file-corrupt',
          action: action('none'),
          message: `The chat history file ${name} was written by a newer k3-code; it is left as it is and not listed.`,
          detail: parsed.problem,
        });
      } else {
        this.setAside(file, 'file-corrupt', `The chat history file ${name} could not be read, so that conversation is not listed.`, parsed.problem);
      }
      return undefined;
    }
    if (`${parsed.id}.json` !== name) {
      this.setAside(file, 'file-corrupt', `The chat history file ${name} could not be read, so that conversation is not listed.`, `it names conversation ${parsed.id}`);
      return undefined;
    }
    if (parsed.state && !isRegularFile(path.join(path.dirname(file), parsed.state.file))) parsed.state = null;
    return parsed;
  }

  /** Newest first. */
  list(): StoredConversation[] {
    this.scan();
    return this.sorted();
  }

  private sorted(): StoredConversation[] {
    return [...this.conversations.values()].sort((a, b) => b.updatedAt - a.updatedAt);
  }

  get(id: string): StoredConversation | undefined {
    this.scan();
    return this.conversations.get(id);
  }

  /** A new file for the engine state of conversation `id` (its folder made: no lock needed,
   * the name is this process's own); undefined when nothing is kept or the folder cannot be
   * made (the storage problem says why). */
  newStatePath(id: string): string | undefined {
    const dir = this.convDir;
    if (!dir) return undefined;
    try {
      fs.mkdirSync(dir, { recursive: true });
    } catch (e) {
      this.failed('The saved engine state', e);
      return undefined;
    }
    return path.join(dir, stateFileName(id, Date.now(), process.pid));
  }

  stateFile(c: StoredConversation): string | undefined {
    return c.state && this.convDir ? path.join(this.convDir, c.state.file) : undefined;
  }

  /** Records the conversation (atomically on disk). Returns a problem when it was not
   * written: the storage cannot be written (the conversation stays in this window's memory),
   * or another window changed the file since this one read it (that version wins). */
  async put(c: StoredConversation): Promise<K3Problem | undefined> {
    this.conversations.set(c.id, c);
    const dir = this.convDir;
    if (!dir) return undefined;
    const name = `${c.id}.json`;
    const file = path.join(dir, name);
    const r = await this.write('This conversation', () => {
      fs.mkdirSync(dir, { recursive: true });
      const now = signature(file);
      const known = this.seen.get(name);
      if (now !== undefined && known !== undefined && now !== known && !this.unsaved.has(c.id)) return false;
      writeFileAtomic(file, conversationText(c));
      this.seen.set(name, signature(file) ?? '');
      return true;
    });
    if (!r.ok) {
      this.unsaved.add(c.id);
      return r.problem;
    }
    this.unsaved.delete(c.id);
    if (r.value) return undefined;
    const problem: K3Problem = {
      kind: 'conversation-changed',
      action: action('none'),
      message: 'Another window of this workspace added to this conversation while this reply was written, so this reply was not kept; the conversation shows the other window’s version.',
      detail: file,
    };
    this.report(problem);
    return problem;
  }

  /** Forgets a conversation's saved state (the file goes; the history stays). */
  async dropState(c: StoredConversation): Promise<void> {
    const file = this.stateFile(c);
    if (file) await this.write('Removing a saved engine state', () => fs.rmSync(file, { force: true }));
    c.state = null;
    await this.put(c);
  }

  async delete(id: string): Promise<boolean> {
    this.scan();
    const c = this.conversations.get(id);
    if (!c) return false;
    this.conversations.delete(id);
    this.unsaved.delete(id);
    this.seen.delete(`${id}.json`);
    const dir = this.convDir;
    if (dir) {
      await this.write('Deleting a conversation', () => {
        fs.rmSync(path.join(dir, `${id}.json`), { force: true });
        if (c.state) fs.rmSync(path.join(dir, c.state.file), { force: true });
      });
    }
    return true;
  }

  /** Evicts the oldest: conversations past maxConversations, then saved states until they
   * total at most maxBytes. `keep` (the conversation just saved) goes last. */
  async enforceLimits(maxBytes: number, maxConversations: number, keep?: string): Promise<void> {
    const byAge = this.sorted().reverse(); // oldest first
    const order = [...byAge.filter((c) => c.id !== keep), ...byAge.filter((c) => c.id === keep)];
    let count = order.length;
    for (const c of order) {
      if (count <= maxConversations) break;
      if (c.id === keep) break;
      await this.delete(c.id);
      count--;
    }
    let bytes = this.sorted().reduce((n, c) => n + (c.state?.bytes ?? 0), 0);
    for (const c of order) {
      if (bytes <= maxBytes) break;
      if (!this.conversations.has(c.id) || !c.state) continue;
      bytes -= c.state.bytes;
      await this.dropState(c);
    }
  }

  /** Deletes every file this store keeps; returns how many. Throws the storage problem's
   * message when the folder cannot be changed. */
  async clear(): Promise<number> {
    this.conversations.clear();
    this.unsaved.clear();
    this.seen.clear();
    this.workspace = {};
    this.workspaceUnsaved = {};
    this.workspaceSig = null;
    const root = this.root;
    if (!root || !fs.existsSync(root)) return 0;
    const r = await this.write('Clearing this workspace’s state', () => {
      let n = 0;
      for (const name of ['workspace.json', 'conversations', 'corrupt']) {
        const p = path.join(root, name);
        const st = fs.lstatSync(p, { throwIfNoEntry: false });
        if (!st) continue;
        n += st.isDirectory() ? fs.readdirSync(p).length : 1;
        fs.rmSync(p, { recursive: true, force: true });
      }
      return n;
    });
    if (!r.ok) throw new Error(r.problem.message);
    return r.value;
  }
}
