// format.ts - what the per-workspace files hold and how they are read back (the formats are
// documented in docs/PROTOCOL.md, "Workspace state"): a conversation file, checked field by
// field, and workspace.json. Parsing never throws: it returns the value or the sentence
// saying why the text is not one. It does no file IO.
import * as path from 'node:path';
import type { AttachmentFate, ChatMessage, ChatStopReason, SentAttachment } from '../../protocol/lsp';

export const CONVERSATION_FORMAT = 'k3-conversation';
/** 2 added messages' `attachments` and the conversation's `notSent`; version 1 files (which
 * have neither) are still read, and rewritten as 2 at their next turn. */
export const CONVERSATION_VERSION = 2;
const CONVERSATION_VERSIONS_READ: readonly number[] = [1, 2];
export const WORKSPACE_FORMAT = 'k3-workspace';
export const WORKSPACE_VERSION = 1;

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
  /** The first this many messages are no longer sent to the model (absent: 0). */
  notSent?: number;
}

export interface LastLoad {
  bytes: number;
  ms: number;
}

export interface WorkspaceFile {
  preset?: string;
  lastLoad?: LastLoad;
  /** The workspace these files belong to (its folder URIs or workspace file), for people
   * looking at the storage folder. */
  workspace?: string[];
}

/** Why a file was not read: `newer` when a newer k3-code wrote it (left alone, not set
 * aside: another window may run that version). */
export interface ParseFailure {
  problem: string;
  newer?: boolean;
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const STOP_REASONS: readonly ChatStopReason[] = ['stop-token', 'length', 'stopped'];
const FATES: readonly AttachmentFate[] = ['whole', 'cut', 'left-out'];
const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

function parseAttachment(v: unknown, id: string, i: number): SentAttachment | string {
  const a = v as Record<string, unknown>;
  const bad = `message ${id} has a malformed attachment ${i}`;
  if (!a || typeof a !== 'object') return bad;
  const lines = a.lines as Record<string, unknown> | undefined;
  if (
    (a.kind !== 'selection' && a.kind !== 'file') ||
    !isStr(a.path) ||
    !isStr(a.uri) ||
    !isStr(a.text) ||
    !lines ||
    !isCount(lines.start) ||
    !isCount(lines.end) ||
    !isCount(a.tokens) ||
    !isCount(a.sentTokens) ||
    !FATES.includes(a.fate as AttachmentFate) ||
    (a.languageId !== undefined && !isStr(a.languageId))
  )
    return bad;
  const out: SentAttachment = {
    kind: a.kind,
    path: a.path,
    uri: a.uri,
    lines: { start: lines.start, end: lines.end },
    text: a.text,
    tokens: a.tokens,
    sentTokens: a.sentTokens,
    fate: a.fate as AttachmentFate,
  };
  if (a.languageId !== undefined) out.languageId = a.languageId as string;
  return out;
}

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
  if (m.completionModel !== undefined) {
    if (!isStr(m.completionModel)) return `message ${m.id} has a completionModel that is not a string`;
    out.completionModel = m.completionModel;
  }
  if (m.ids !== undefined) {
    if (!Array.isArray(m.ids) || !m.ids.every((i) => Number.isInteger(i) && i >= 0)) return `message ${m.id} has bad ids`;
    out.ids = m.ids as number[];
  }
  if (m.attachments !== undefined) {
    if (m.role !== 'user' || !Array.isArray(m.attachments)) return `message ${m.id} has attachments that are not a user message's list`;
    const list: SentAttachment[] = [];
    for (const [i, raw] of m.attachments.entries()) {
      const a = parseAttachment(raw, m.id, i);
      if (typeof a === 'string') return a;
      list.push(a);
    }
    out.attachments = list;
  }
  return out;
}

/** The JSON object in `text` when it is a k3 file of `format` at `version`, or why not. */
function parseVersioned(text: string, format: string, versions: readonly number[], what: string): Record<string, unknown> | ParseFailure {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    return { problem: `not JSON (${(e as Error).message})` };
  }
  if (!v || typeof v !== 'object' || v.format !== format) return { problem: `not a k3 ${what} file` };
  if (!versions.includes(v.version as number)) {
    const newest = Math.max(...versions);
    const newer = typeof v.version === 'number' && v.version > newest;
    return { problem: `format version ${String(v.version)}, this server reads ${versions.join(' and ')}`, newer };
  }
  return v;
}

/** The conversation in `text`, or why it is not one. */
export function parseConversation(text: string): StoredConversation | ParseFailure {
  const v = parseVersioned(text, CONVERSATION_FORMAT, CONVERSATION_VERSIONS_READ, 'conversation');
  if (isParseFailure(v)) return v;
  if (!isStr(v.id) || !isStr(v.title) || !isNum(v.createdAt) || !isNum(v.updatedAt) || typeof v.thinking !== 'boolean' || !Array.isArray(v.messages))
    return { problem: 'a field is missing or of the wrong type' };
  const messages: StoredMessage[] = [];
  for (const raw of v.messages) {
    const m = parseMessage(raw);
    if (typeof m === 'string') return { problem: m };
    messages.push(m);
  }
  let state: SavedStateRef | null = null;
  if (v.state !== null && v.state !== undefined) {
    const s = v.state as Record<string, unknown>;
    if (!isStr(s.file) || !isNum(s.tokens) || !isStr(s.model) || !isNum(s.bytes) || path.basename(s.file) !== s.file || !s.file.endsWith('.k3state'))
      return { problem: 'the saved-state reference is malformed' };
    state = { file: s.file, tokens: s.tokens, model: s.model, bytes: s.bytes };
  }
  const out: StoredConversation = { id: v.id, title: v.title, createdAt: v.createdAt, updatedAt: v.updatedAt, thinking: v.thinking, messages, state };
  if (v.notSent !== undefined) {
    if (!isCount(v.notSent) || v.notSent > messages.length) return { problem: `notSent ${String(v.notSent)} is not a count of its ${messages.length} messages` };
    if (v.notSent > 0) out.notSent = v.notSent;
  }
  return out;
}

export function isParseFailure<T extends object>(v: T | ParseFailure): v is ParseFailure {
  return 'problem' in v;
}

export function conversationText(c: StoredConversation): string {
  return `${JSON.stringify({ format: CONVERSATION_FORMAT, version: CONVERSATION_VERSION, ...c })}\n`;
}

/** workspace.json's values, or why the text is not one. */
export function parseWorkspace(text: string): WorkspaceFile | ParseFailure {
  const v = parseVersioned(text, WORKSPACE_FORMAT, [WORKSPACE_VERSION], 'workspace');
  if (isParseFailure(v)) return v;
  const out: WorkspaceFile = {};
  if (isStr(v.preset)) out.preset = v.preset;
  const l = v.lastLoad as Record<string, unknown> | undefined;
  if (l && isNum(l.bytes) && isNum(l.ms)) out.lastLoad = { bytes: l.bytes, ms: l.ms };
  if (Array.isArray(v.workspace) && v.workspace.every(isStr)) out.workspace = v.workspace;
  return out;
}

export function workspaceText(w: WorkspaceFile): string {
  return `${JSON.stringify({ format: WORKSPACE_FORMAT, version: WORKSPACE_VERSION, ...w }, null, 1)}\n`;
}

/** A saved-state file name for conversation `id`, new each turn, with the writing process's
 * id (`.pPID`), so a sweep never takes a state another window has written but not yet
 * named in its history. */
export function stateFileName(id: string, now: number, pid: number): string {
  return `${id}-${now.toString(36)}.p${pid}.k3state`;
}

/** The writer's process id in a saved-state file name; undefined for names without one. */
export function stateFileOwner(name: string): number | undefined {
  const m = /\.p(\d+)\.k3state$/.exec(name);
  return m ? Number(m[1]) : undefined;
}
