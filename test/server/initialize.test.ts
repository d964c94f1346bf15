// initialize.test.ts - the bundled server (dist/server.js), started as its own process over
// stdio and driven by a real LSP client connection, answers initialize with the
// capabilities the extension relies on, answers k3/status, and shuts down cleanly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import {
  createProtocolConnection,
  ExitNotification,
  InitializeRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import { StatusRequest } from '../../protocol/lsp';
import { serverBundle } from '../support/paths';

test('the server answers initialize with inline completion and k3/status with the engine version', async () => {
  const proc = spawn(process.execPath, [serverBundle, '--stdio'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const connection = createProtocolConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  connection.listen();
  try {
    const init = await connection.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      rootUri: null,
      capabilities: {},
      initializationOptions: {},
    });
    assert.equal(init.serverInfo?.name, 'k3-code');
    assert.ok(init.capabilities.inlineCompletionProvider, 'inline completion is advertised');
    assert.equal(init.capabilities.textDocumentSync, 2, 'incremental text sync');

    const status = await connection.sendRequest(StatusRequest.type);
    assert.match(status.engineVersion, /^\d+\.\d+\.\d+$/);
    assert.equal(status.engineVersion, init.serverInfo?.version);

    await connection.sendRequest(ShutdownRequest.type);
    const exited = once(proc, 'exit');
    await connection.sendNotification(ExitNotification.type);
    const [code] = await exited;
    assert.equal(code, 0);
  } finally {
    connection.dispose();
    proc.kill();
  }
});
