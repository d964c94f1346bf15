// main.ts - the language server's entry point: creates the LSP connection (stdio or Node
// IPC, chosen by the command line: --stdio, --node-ipc), the context that holds the
// server's state, and the handler table. It holds no logic of its own.
import { createConnection, ProposedFeatures } from 'vscode-languageserver/node';
import { ServerCtx } from './ctx';
import { registerHandlers } from './handlers';

const connection = createConnection(ProposedFeatures.all);
const ctx = new ServerCtx(connection);
registerHandlers(ctx, connection);
connection.listen();
