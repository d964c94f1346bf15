// documents.ts - the text of the documents the client has opened, kept in sync with
// incremental textDocument/didChange, and where each was last edited (the extra-context
// ring wants the region around the latest edit). The server reads documents only from here.
import type { Connection } from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';

export interface DocumentEvents {
  opened(uri: string): void;
  /** An edit ending at `line` (0-based, in the new text). */
  edited(uri: string, line: number): void;
  closed(uri: string): void;
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
    connection.onDidOpenTextDocument(({ textDocument: t }) => {
      this.docs.set(t.uri, TextDocument.create(t.uri, t.languageId, t.version, t.text));
      events.opened(t.uri);
    });
    connection.onDidChangeTextDocument(({ textDocument, contentChanges }) => {
      const doc = this.docs.get(textDocument.uri);
      if (!doc || contentChanges.length === 0) return;
      const updated = TextDocument.update(doc, contentChanges, textDocument.version ?? doc.version + 1);
      this.docs.set(textDocument.uri, updated);
      const last = contentChanges[contentChanges.length - 1];
      const line = 'range' in last ? last.range.start.line + last.text.split('\n').length - 1 : 0;
      events.edited(textDocument.uri, line);
    });
    connection.onDidCloseTextDocument(({ textDocument }) => {
      this.docs.delete(textDocument.uri);
      events.closed(textDocument.uri);
    });
  }
}
