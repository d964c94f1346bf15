// definitionSource.ts - definitions.ts's questions put to VS Code: where a symbol is defined
// (the definition provider, then the type definition provider, both through
// vscode.commands), and a document's lines (opened through the workspace when no editor
// holds it). Only this file of the context gathering touches `vscode`.
import * as vscode from 'vscode';
import type { AskedDocument, DefinitionSource } from './definitions';

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
      try {
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
        return { languageId: doc.languageId, lines: doc.getText().split(/\r?\n/) };
      } catch {
        return undefined;
      }
    },
  };
}

export function askedDocument(doc: vscode.TextDocument): AskedDocument {
  return { uri: doc.uri.toString(), version: doc.version, lineAt: (line) => doc.lineAt(line).text };
}
