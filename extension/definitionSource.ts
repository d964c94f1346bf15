// definitionSource.ts - definitions.ts's questions put to VS Code: where a symbol is defined
// (the definition provider, then the type definition provider, both through
// vscode.commands), and a document's lines: an open document's, else the file's read from
// disk, never opened as a document (that would sync it to the server, whose ring would take
// in a library's licence header). Only this file of the context gathering touches `vscode`.
import * as vscode from 'vscode';
import type { AskedDocument, DefinitionSource } from './definitions';

/** A file larger than this (a generated declaration file) is not read for one definition. */
const MAX_READ_BYTES = 2 * 1024 * 1024;

/** The language id of a file not open in the editor, by its extension: it picks the comment
 * that heads the definition in the prompt (server/completion/layout.ts). */
function languageOf(file: string): string {
  const ext = file.slice(file.lastIndexOf('.') + 1).toLowerCase();
  const known: Record<string, string> = {
    ts: 'typescript', tsx: 'typescriptreact', mts: 'typescript', cts: 'typescript', js: 'javascript', jsx: 'javascriptreact',
    mjs: 'javascript', cjs: 'javascript', py: 'python', pyi: 'python', go: 'go', rs: 'rust', c: 'c', h: 'c', cc: 'cpp',
    cpp: 'cpp', hpp: 'cpp', java: 'java', cs: 'csharp', rb: 'ruby', lua: 'lua', php: 'php', kt: 'kotlin', swift: 'swift',
  };
  return known[ext] ?? 'plaintext';
}

type Found = Array<vscode.Location | vscode.LocationLink> | vscode.Location | undefined;

function places(found: Found): Array<{ uri: string; line: number }> {
  const list = Array.isArray(found) ? found : found ? [found] : [];
  return list.map((l) =>
    'targetUri' in l
      ? { uri: l.targetUri.toString(), line: (l.targetSelectionRange ?? l.targetRange).start.line }
      : { uri: l.uri.toString(), line: l.range.start.line },
  );
}

export function vscodeDefinitions(): DefinitionSource {
  return {
    async locate(uri, at) {
      const u = vscode.Uri.parse(uri);
      const p = new vscode.Position(at.line, at.character);
      const defs = places(await vscode.commands.executeCommand<Found>('vscode.executeDefinitionProvider', u, p));
      if (defs.length) return defs;
      return places(await vscode.commands.executeCommand<Found>('vscode.executeTypeDefinitionProvider', u, p));
    },
    async read(uri) {
      const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
      if (open) return { languageId: open.languageId, lines: open.getText().split(/\r?\n/) };
      try {
        const u = vscode.Uri.parse(uri);
        const stat = await vscode.workspace.fs.stat(u);
        if (stat.size > MAX_READ_BYTES) return undefined;
        const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(u));
        return { languageId: languageOf(u.path), lines: text.split(/\r?\n/) };
      } catch {
        return undefined;
      }
    },
  };
}

export function askedDocument(doc: vscode.TextDocument): AskedDocument {
  return { uri: doc.uri.toString(), version: doc.version, lineAt: (line) => doc.lineAt(line).text };
}
