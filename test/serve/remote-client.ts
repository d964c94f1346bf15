// remote-client.ts - helpers for tests that drive the language server's remote backend as
// the editor does (the bundled server over stdio, test/support/lsp.ts) against a fake or a
// real server: initialization options, a language server for the length of a test body,
// the error a request rejects with, a loopback port nothing listens on, and a long source
// file to lay completions out in.
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { ResponseError } from 'vscode-languageserver-protocol/node';
import type { InitializationOptions, K3ErrorData } from '../../protocol/lsp';
import { type ServerHandle, startServer } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;

/** Options for a language server whose completions and chat go to `endpoint`. */
export function remoteInit(endpoint: string, remote: Partial<NonNullable<InitializationOptions['remote']>> = {}, modelPath = ''): InitializationOptions {
  return {
    modelPath,
    backend: 'remote',
    remote: { endpoint, timeoutMs: 20_000, ...remote },
    settings: { completions: { maxTokens: 16 } },
  };
}

/** Runs `body` with a language server started on `init`; then shuts it down and closes
 * `server` (the fake or real server it talked to), whatever happened. */
export async function withLanguageServer<R>(
  init: InitializationOptions,
  body: (ls: ServerHandle) => Promise<R>,
  server?: { close(): Promise<void> },
): Promise<R> {
  const ls = await startServer(init);
  try {
    return await body(ls);
  } finally {
    await ls.shutdown();
    await server?.close();
  }
}

/** The ResponseError the promise rejects with; fails if it resolves. */
export async function failure(p: Promise<unknown>): Promise<ResponseError<K3ErrorData>> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ResponseError, `a ResponseError, not ${String(e)}`);
    return e as ResponseError<K3ErrorData>;
  }
  assert.fail('the request succeeded');
}

/** A loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** A Python file of `lines` distinct lines, longer than any small context. */
export function longFile(lines: number): string {
  const out: string[] = [];
  for (let i = 0; i < lines; i++) out.push(`value_${i} = compute(${i}, "${'abcdefghij'.slice(i % 10)}")`);
  return `${out.join('\n')}\nresult = `;
}
