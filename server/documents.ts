// documents.ts - the text of the documents the client has opened, kept in sync with
// incremental textDocument/didChange, and where each was last edited (the extra-context
// ring wants the region around the latest edit). The server reads documents only from here.
// Notifications of the wrong shape (a text that is not a string, a range that is not
// numbers, no params at all) are refused with a log line: a document opened with a
// malformed text is not kept, and one whose change cannot be applied is forgotten, so no
// completion is ever computed from text that is not the editor's.
import type { Connection, Position, Range, TextDocumentContentChangeEvent } from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

function isPosition(v: unknown): v is Position {
  return isRecord(v) && isCount(v.line) && isCount(v.character);
}

function isRange(v: unknown): v is Range {
  return isRecord(v) && isPosition(v.start) && isPosition(v.end);
}

/** Why a didChange's contentChanges cannot be applied, or undefined when they can. */
function badChanges(changes: unknown): string | undefined {
  if (!Array.isArray(changes)) return 'contentChanges is not an array';
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i] as unknown;
    if (!isRecord(c) || typeof c.text !== 'string') return `contentChanges[${i}].text is not a string`;
    if ('range' in c && c.range !== undefined && !isRange(c.range)) return `contentChanges[${i}].range is not a range of non-negative integers`;
  }
  return undefined;
}

export interface DocumentEvents {
  opened(uri: string): void;
  /** An edit ending at `line` (0-based, in the new text). */
  edited(uri: string, line: number): void;
  closed(uri: string): void;
  /** A notification of the wrong shape was refused; `message` says which and why. */
  refused(message: string): void;
}

export class Documents {
  private readonly docs = new Map<string, TextDocument>();

  get(uri: string): TextDocument | undefined {
    return this.docs.get(uri);
  }

  all(): TextDocument[] {
    return [...this.docs.values()];
  }

  listen(connection: Connection, events: DocumentEvents): void {
    connection.onDidOpenTextDocument((params) => {
      const t = (params as unknown as Record<string, unknown> | null)?.textDocument;
      if (!isRecord(t) || typeof t.uri !== 'string' || typeof t.languageId !== 'string' || !Number.isInteger(t.version) || typeof t.text !== 'string') {
        events.refused(`textDocument/didOpen refused: it needs textDocument { uri, languageId, version, text } of string, string, integer, string`);
        return;
      }
      this.docs.set(t.uri, TextDocument.create(t.uri, t.languageId, t.version as number, t.text));
      events.opened(t.uri);
    });
    connection.onDidChangeTextDocument((params) => {
      const p = params as unknown as Record<string, unknown> | null;
      const uri = isRecord(p?.textDocument) ? p.textDocument.uri : undefined;
      if (typeof uri !== 'string') {
        events.refused('textDocument/didChange refused: it names no textDocument.uri');
        return;
      }
      const doc = this.docs.get(uri);
      if (!doc) return;
      const why = badChanges(p?.contentChanges);
      if (why) {
        // The editor's text is no longer known: forget it rather than complete from a guess.
        this.docs.delete(uri);
        events.closed(uri);
        events.refused(`textDocument/didChange for ${uri} refused (${why}); the document is forgotten until it is opened again`);
        return;
      }
      const contentChanges = p?.contentChanges as TextDocumentContentChangeEvent[];
      if (contentChanges.length === 0) return;
      const version = isRecord(p?.textDocument) && Number.isInteger(p.textDocument.version) ? (p.textDocument.version as number) : doc.version + 1;
      const updated = TextDocument.update(doc, contentChanges, version);
      this.docs.set(uri, updated);
      const last = contentChanges[contentChanges.length - 1];
      const line = 'range' in last ? last.range.start.line + last.text.split('\n').length - 1 : 0;
      events.edited(uri, line);
    });
    connection.onDidCloseTextDocument((params) => {
      const uri = (params as unknown as { textDocument?: { uri?: unknown } } | null)?.textDocument?.uri;
      if (typeof uri !== 'string') {
        events.refused('textDocument/didClose refused: it names no textDocument.uri');
        return;
      }
      this.docs.delete(uri);
      events.closed(uri);
    });
  }
}
