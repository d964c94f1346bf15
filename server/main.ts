// main.ts - the language server's entry point: wires the LSP connection (stdio or Node IPC,
// chosen by the command line) to the handlers. It holds no logic of its own.
import {
  createConnection,
  ProposedFeatures,
  TextDocuments,
  TextDocumentSyncKind,
  type InitializeResult,
} from 'vscode-languageserver/node';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { loadAddon } from './engine/addon';
import { StatusRequest, type StatusResult } from './protocol';

const connection = createConnection(ProposedFeatures.all);
const documents = new TextDocuments(TextDocument);

connection.onInitialize((): InitializeResult => ({
  capabilities: {
    textDocumentSync: TextDocumentSyncKind.Incremental,
    inlineCompletionProvider: true,
  },
  serverInfo: { name: 'k3-code', version: loadAddon().version() },
}));

connection.onRequest(StatusRequest.type, (): StatusResult => ({
  engineVersion: loadAddon().version(),
  phase: 'no-model',
}));

// No model is loaded yet, so there is nothing to complete: an empty list, not an error.
connection.languages.inlineCompletion.on(() => ({ items: [] }));

documents.listen(connection);
connection.listen();
