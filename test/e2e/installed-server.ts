// installed-server.ts - what the installed extension's own language server (its bundle and
// addon under the extensions folder, on k3-mini) answers for a document, with the settings
// the extension sends by default. The real-editor tests compare the ghost text the editor
// shows with it, so "the engine's completion" is checked against the engine, not restated.
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { InlineCompletionItem } from 'vscode-languageserver-protocol';
import { type CompletionStats, StatusRequest } from '../../protocol/lsp';
import { startServer, waitReady } from '../support/lsp';
import { installedExtension } from './harness';

export interface InstalledAnswer {
  items: InlineCompletionItem[];
  /** `k3/status`'s lastCompletion right after it. */
  stats?: CompletionStats;
}

/** Asks the installed server for a completion of `text` (opened as `file` of `workspace`) at
 * `at`, the text's end by default. */
export async function installedServerAnswer(
  workspace: string,
  file: string,
  languageId: string,
  text: string,
  at?: { line: number; character: number },
): Promise<InstalledAnswer> {
  const server = await startServer(
    { modelPath: path.join(installedExtension(), 'media/models/k3-mini'), settings: { completions: { multiline: 'auto', maxLines: 8 } } },
    { workspaceFolder: workspace, bundle: path.join(installedExtension(), 'dist/server.js') },
  );
  try {
    await waitReady(server);
    const uri = pathToFileURL(path.join(workspace, file)).href;
    await server.open(uri, languageId, text);
    const lines = text.split('\n');
    const { line, character } = at ?? { line: lines.length - 1, character: lines[lines.length - 1].length };
    const answer = await server.complete(uri, line, character);
    const stats = (await server.connection.sendRequest(StatusRequest.type)).lastCompletion;
    return { items: answer?.items ?? [], ...(stats ? { stats } : {}) };
  } finally {
    await server.shutdown();
  }
}
