// store.ts - the per-workspace files under storagePath (docs/PROTOCOL.md, "Workspace
// state"): workspace.json (the chosen preset, the last load's timing), one JSON file per
// conversation (history, versioned) and one saved engine state per conversation (written
// by the engine, k3_state_save). Every JSON write is atomic (temporary file, fsync,
// rename). A file that cannot be read back (not JSON, another format version, fields of
// the wrong type) is moved to corrupt/, reported, and never stops the others from loading.
// Saved states are bounded in total bytes and conversations in number, oldest evicted
// first. Without a storagePath everything lives in memory only. It does not render or run
// anything.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ChatMessage, ChatStopReason, K3Problem } from '../protocol';
import { action } from '../errors';

export const CONVERSATION_FORMAT = 'k3-conversation';
export const CONVERSATION_VERSION = 1;
export const WORKSPACE_FORMAT = 'k3-workspace';
export const WORKSPACE_VERSION = 1;
/** Files set aside kept at most; older ones are deleted. */
const CORRUPT_KEPT = 8;

/** A message as stored: ChatMessage plus, for assistant turns, the exact ids. */
export interface StoredMessage extends ChatMessage {
  ids?: number[];
}

export interface SavedStateRef {
  /** File name under conversations/. */
  file: string;
  /** Tokens the state holds (the conversation's rendering up to its last turn). */
  tokens: number;
  /** Fingerprint of the model that wrote it (server/engine/host.ts). */
  model: string;
  bytes: number;
}

export interface StoredConversation {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  thinking: boolean;
  messages: StoredMessage[];
  state: SavedStateRef | null;
}

export interface LastLoad {
  bytes: number;
  ms: number;
}

export interface WorkspaceFile {
  preset?: string;
  lastLoad?: LastLoad;
}

/** Writes data to file atomically: a temporary file beside it, fsync, rename. */
export function writeFileAtomic(file: string, data: string | Buffer): void {
  const tmp = `${file}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const STOP_REASONS: readonly ChatStopReason[] = ['stop-token', 'length', 'stopped'];

function parseMessage(v: unknown): StoredMessage | string {
  const m = v as Record<string, unknown>;
  if (!m || typeof m !== 'object') return 'a message is not an object';
  if (!isStr(m.id) || (m.role !== 'user' && m.role !== 'assistant') || !isStr(m.content) || !isStr(m.reasoning) || !isNum(m.createdAt))
    return `message ${String(m.id)} lacks id, role, content, reasoning or createdAt`;
  const out: StoredMessage = { id: m.id, role: m.role, content: m.content, reasoning: m.reasoning, createdAt: m.createdAt };
  if (m.stopReason !== undefined) {
    if (!STOP_REASONS.includes(m.stopReason as ChatStopReason)) return `message ${m.id} has stopReason ${String(m.stopReason)}`;
    out.stopReason = m.stopReason as ChatStopReason;
  }
  if (m.ids !== undefined) {
    if (!Array.isArray(m.ids) || !m.ids.every((i) => Number.isInteger(i) && i >= 0)) return `message ${m.id} has bad ids`;
    out.ids = m.ids as number[];
  }
  return out;
}

/** The conversation in `text`, or why it is not one. */
export function parseConversation(text: string): StoredConversation | string {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    return `not JSON (${(e as Error).message})`;
  }
  if (!v || typeof v !== 'object' || v.format !== CONVERSATION_FORMAT) return 'not a k3 conversation file';
  if (v.version !== CONVERSATION_VERSION) return `format version ${String(v.version)}, this server reads ${CONVERSATION_VERSION}`;
  if (!isStr(v.id) || !isStr(v.title) || !isNum(v.createdAt) || !isNum(v.updatedAt) || typeof v.thinking !== 'boolean' || !Array.isArray(v.messages))
    return 'a field is missing or of the wrong type';
  const messages: StoredMessage[] = [];
  for (const raw of v.messages) {
    const m = parseMessage(raw);
    if (typeof m === 'string') return m;
    messages.push(m);
  }
  let state: SavedStateRef | null = null;
  if (v.state !== null && v.state !== undefined) {
    const s = v.state as Record<string, unknown>;
    if (!isStr(s.file) || !isNum(s.tokens) || !isStr(s.model) || !isNum(s.bytes) || path.basename(s.file) !== s.file)
      return 'the saved-state reference is malformed';
    state = { file: s.file, tokens: s.tokens, model: s.model, bytes: s.bytes };
  }
  return { id: v.id, title: v.title, createdAt: v.createdAt, updatedAt: v.updatedAt, thinking: v.thinking, messages, state };
}

export class WorkspaceStore {
  private conversations: Map<string, StoredConversation> | undefined;
  private workspace: WorkspaceFile | undefined;

  /** root: storagePath, or undefined for memory only. report: problems handled. */
  constructor(
    readonly root: string | undefined,
    private readonly report: (p: K3Problem) => void,
  ) {}

  private get convDir(): string | undefined {
    return this.root && path.join(this.root, 'conversations');
  }

  private ensureDir(dir: string): void {
    fs.mkdirSync(dir, { recursive: true });
  }

  /** Moves file to corrupt/ (keeping the newest few) and reports why. */
  setAside(file: string, kind: 'file-corrupt' | 'state-incompatible', message: string, detail?: string): K3Problem {
    let moved = '';
    if (this.root && fs.existsSync(file)) {
      const dir = path.join(this.root, 'corrupt');
      try {
        this.ensureDir(dir);
        moved = path.join(dir, `${path.basename(file)}.${Date.now()}`);
        fs.renameSync(file, moved);
        const kept = fs
          .readdirSync(dir)
          .map((f) => ({ f, t: fs.statSync(path.join(dir, f)).mtimeMs }))
          .sort((a, b) => b.t - a.t);
        for (const old of kept.slice(CORRUPT_KEPT)) fs.rmSync(path.join(dir, old.f), { force: true });
      } catch {
        fs.rmSync(file, { force: true });
        moved = '';
      }
    }
    const problem: K3Problem = {
      kind,
      action: action('none'),
      message: moved ? `${message} It was moved to ${moved}.` : message,
      detail: detail ?? file,
    };
    this.report(problem);
    return problem;
  }

  // ---- workspace.json

  readWorkspace(): WorkspaceFile {
    if (this.workspace) return this.workspace;
    this.workspace = {};
    if (!this.root) return this.workspace;
    const file = path.join(this.root, 'workspace.json');
    if (!fs.existsSync(file)) return this.workspace;
    try {
      const v = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      if (v.format !== WORKSPACE_FORMAT || v.version !== WORKSPACE_VERSION) throw new Error(`format ${String(v.format)} version ${String(v.version)}`);
      if (isStr(v.preset)) this.workspace.preset = v.preset;
      const l = v.lastLoad as Record<string, unknown> | undefined;
      if (l && isNum(l.bytes) && isNum(l.ms)) this.workspace.lastLoad = { bytes: l.bytes, ms: l.ms };
    } catch (e) {
      this.setAside(file, 'file-corrupt', 'The workspace settings file could not be read; the defaults are used.', (e as Error).message);
    }
    return this.workspace;
  }

  updateWorkspace(change: Partial<WorkspaceFile>): void {
    this.workspace = { ...this.readWorkspace(), ...change };
    if (!this.root) return;
    this.ensureDir(this.root);
    writeFileAtomic(
      path.join(this.root, 'workspace.json'),
      `${JSON.stringify({ format: WORKSPACE_FORMAT, version: WORKSPACE_VERSION, ...this.workspace }, null, 1)}\n`,
    );
  }

  // ---- conversations

  private load(): Map<string, StoredConversation> {
    if (this.conversations) return this.conversations;
    this.conversations = new Map();
    const dir = this.convDir;
    if (!dir || !fs.existsSync(dir)) return this.conversations;
    for (const f of fs.readdirSync(dir).sort()) {
      const file = path.join(dir, f);
      if (f.includes('.tmp-')) {
        fs.rmSync(file, { force: true }); // a write that never finished
        continue;
      }
      if (!f.endsWith('.json')) continue;
      let parsed: StoredConversation | string;
      try {
        parsed = parseConversation(fs.readFileSync(file, 'utf8'));
      } catch (e) {
        parsed = (e as Error).message;
      }
      if (typeof parsed === 'string' || `${parsed.id}.json` !== f) {
        this.setAside(
          file,
          'file-corrupt',
          `The chat history file ${f} could not be read, so that conversation is not listed.`,
          typeof parsed === 'string' ? parsed : `it names conversation ${parsed.id}`,
        );
        continue;
      }
      if (parsed.state && !fs.existsSync(path.join(dir, parsed.state.file))) parsed.state = null;
      this.conversations.set(parsed.id, parsed);
    }
    // Saved states no conversation refers to are leftovers.
    const referenced = new Set([...this.conversations.values()].flatMap((c) => (c.state ? [c.state.file] : [])));
    for (const f of fs.readdirSync(dir)) {
      if (f.endsWith('.k3state') && !referenced.has(f)) fs.rmSync(path.join(dir, f), { force: true });
    }
    return this.conversations;
  }

  /** Newest first. */
  list(): StoredConversation[] {
    return [...this.load().values()].sort((a, b) => b.updatedAt - a.updatedAt);
  }

  get(id: string): StoredConversation | undefined {
    return this.load().get(id);
  }

  /** Where the engine state of conversation `id` is saved. */
  statePath(id: string): string | undefined {
    const dir = this.convDir;
    if (!dir) return undefined;
    this.load(); // before a new file appears, so the leftover sweep cannot take it
    this.ensureDir(dir);
    return path.join(dir, `${id}.k3state`);
  }

  stateFile(c: StoredConversation): string | undefined {
    return c.state && this.convDir ? path.join(this.convDir, c.state.file) : undefined;
  }

  /** Records the conversation (atomically on disk). */
  put(c: StoredConversation): void {
    this.load().set(c.id, c);
    const dir = this.convDir;
    if (!dir) return;
    this.ensureDir(dir);
    writeFileAtomic(
      path.join(dir, `${c.id}.json`),
      `${JSON.stringify({ format: CONVERSATION_FORMAT, version: CONVERSATION_VERSION, ...c })}\n`,
    );
  }

  /** Forgets a conversation's saved state (the file goes; the history stays). */
  dropState(c: StoredConversation): void {
    const file = this.stateFile(c);
    if (file) fs.rmSync(file, { force: true });
    c.state = null;
    this.put(c);
  }

  delete(id: string): boolean {
    const c = this.load().get(id);
    if (!c) return false;
    this.load().delete(id);
    const dir = this.convDir;
    if (dir) {
      fs.rmSync(path.join(dir, `${id}.json`), { force: true });
      if (c.state) fs.rmSync(path.join(dir, c.state.file), { force: true });
    }
    return true;
  }

  /** Evicts the oldest: conversations past maxConversations, then saved states until they
   * total at most maxBytes. `keep` (the conversation just saved) goes last. */
  enforceLimits(maxBytes: number, maxConversations: number, keep?: string): void {
    const byAge = this.list().reverse(); // oldest first
    const order = [...byAge.filter((c) => c.id !== keep), ...byAge.filter((c) => c.id === keep)];
    let count = order.length;
    for (const c of order) {
      if (count <= maxConversations) break;
      if (c.id === keep) break;
      this.delete(c.id);
      count--;
    }
    let bytes = this.list().reduce((n, c) => n + (c.state?.bytes ?? 0), 0);
    for (const c of order) {
      if (bytes <= maxBytes) break;
      if (!this.get(c.id) || !c.state) continue;
      bytes -= c.state.bytes;
      this.dropState(c);
    }
  }

  /** Deletes every file this store keeps; returns how many. */
  clear(): number {
    let n = 0;
    this.conversations = new Map();
    this.workspace = {};
    if (!this.root || !fs.existsSync(this.root)) return 0;
    for (const name of ['workspace.json', 'conversations', 'corrupt']) {
      const p = path.join(this.root, name);
      if (!fs.existsSync(p)) continue;
      n += fs.statSync(p).isDirectory() ? fs.readdirSync(p).length : 1;
      fs.rmSync(p, { recursive: true, force: true });
    }
    return n;
  }
}
