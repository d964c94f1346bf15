// lsp.ts - the bundled server (dist/server.js) as its own process, driven by a real LSP
// client connection over stdio, for tests: start it with initializationOptions, send
// requests, and await notifications (status changes, chat pieces, problems, log lines)
// by predicate instead of sleeping. Kill it hard to test what survives a crash.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { pathToFileURL } from 'node:url';
import {
  CancellationTokenSource,
  createProtocolConnection,
  DidChangeTextDocumentNotification,
  DidOpenTextDocumentNotification,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type InlineCompletionList,
  InlineCompletionRequest,
  LogMessageNotification,
  type Message,
  type ProtocolConnection,
  type ResponseMessage,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import {
  ChatStreamNotification,
  type ChatStreamParams,
  DidChangeStatusNotification,
  DidReportProblemNotification,
  type InitializationOptions,
  type K3Problem,
  type StatusResult,
  StatusRequest,
} from '../../protocol/lsp';
import { serverBundle } from './paths';

/** A bound for tests that drive a server: a lost event fails the test instead of hanging
 * the run (the tiny fixture needs seconds). */
export const TEST_TIMEOUT_MS = 120_000;

export interface ServerHandle {
  connection: ProtocolConnection;
  proc: ChildProcess;
  statuses: StatusResult[];
  streams: ChatStreamParams[];
  problems: K3Problem[];
  logs: string[];
  /** Resolves with the first status (the current one, or a later notification) that satisfies pred. */
  waitForStatus(pred: (s: StatusResult) => boolean): Promise<StatusResult>;
  /** Resolves when a notification of the given list satisfies pred (already received ones count). */
  waitFor<T>(list: T[], pred: (item: T) => boolean): Promise<T>;
  open(uri: string, languageId: string, text: string): Promise<void>;
  /** Inserts text at (line, character), as an incremental change. */
  type(uri: string, version: number, line: number, character: number, text: string): Promise<void>;
  complete(uri: string, line: number, character: number, token?: CancellationTokenSource): Promise<InlineCompletionList | null>;
  /** Sends a request as raw bytes, params exactly as given (the client library would wrap
   * null as `[null]`), and resolves with the server's response to `id`. */
  rawRequest(method: string, id: string, params: unknown): Promise<ResponseMessage>;
  shutdown(): Promise<void>;
  kill(): Promise<void>;
}

export interface ServerStart {
  /** The folder (a path) the server is told it works in; none by default. */
  workspaceFolder?: string;
  /** The server bundle to run (it loads the addon beside it); default dist/server.js. */
  bundle?: string;
  /** Added to the server process's environment. */
  env?: Record<string, string>;
}

export async function startServer(initializationOptions: InitializationOptions, start: ServerStart = {}): Promise<ServerHandle> {
  const proc = spawn(process.execPath, [start.bundle ?? serverBundle, '--stdio'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    ...(start.env ? { env: { ...process.env, ...start.env } } : {}),
  });
  const connection = createProtocolConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  // A second reader of the server's output, attached with the connection's before any byte
  // arrives so that both cut the same messages: it hands rawRequest the responses the
  // connection drops as unasked-for. One attached mid-stream can start inside a message,
  // fail to find a header and never find one again (a test hung on that for 120 s).
  const raw = new StreamMessageReader(proc.stdout!);
  const rawWaiting = new Map<string, (m: ResponseMessage) => void>();
  raw.listen((m: Message) => {
    const id = (m as ResponseMessage).id;
    if (typeof id !== 'string') return;
    rawWaiting.get(id)?.(m as ResponseMessage);
    rawWaiting.delete(id);
  });
  const statuses: StatusResult[] = [];
  const streams: ChatStreamParams[] = [];
  const problems: K3Problem[] = [];
  const logs: string[] = [];
  const waiters: Array<() => void> = [];
  const poke = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  connection.onNotification(DidChangeStatusNotification.type, (s) => {
    statuses.push(s);
    poke();
  });
  connection.onNotification(ChatStreamNotification.type, (p) => {
    streams.push(p);
    poke();
  });
  connection.onNotification(DidReportProblemNotification.type, (p) => {
    problems.push(p);
    poke();
  });
  connection.onNotification(LogMessageNotification.type, (p) => {
    logs.push(p.message);
    poke();
  });
  connection.listen();
  await connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: start.workspaceFolder === undefined ? null : pathToFileURL(start.workspaceFolder).href,
    capabilities: {},
    initializationOptions,
  });
  await connection.sendNotification(InitializedNotification.type, {});

  async function waitFor<T>(list: T[], pred: (item: T) => boolean): Promise<T> {
    for (let seen = 0; ; ) {
      for (; seen < list.length; seen++) if (pred(list[seen])) return list[seen];
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  }

  const handle: ServerHandle = {
    connection,
    proc,
    statuses,
    streams,
    problems,
    logs,
    waitFor,
    async waitForStatus(pred) {
      const from = statuses.length;
      const now = await connection.sendRequest(StatusRequest.type);
      if (pred(now)) return now;
      return waitFor(statuses, (s) => statuses.indexOf(s) >= from && pred(s));
    },
    async open(uri, languageId, text) {
      await connection.sendNotification(DidOpenTextDocumentNotification.type, { textDocument: { uri, languageId, version: 1, text } });
    },
    async type(uri, version, line, character, text) {
      await connection.sendNotification(DidChangeTextDocumentNotification.type, {
        textDocument: { uri, version },
        contentChanges: [{ range: { start: { line, character }, end: { line, character } }, text }],
      });
    },
    complete(uri, line, character, token) {
      return connection.sendRequest(
        InlineCompletionRequest.type,
        { textDocument: { uri }, position: { line, character }, context: { triggerKind: 1 } },
        token?.token,
      ) as Promise<InlineCompletionList | null>;
    },
    rawRequest(method, id, params) {
      const answered = new Promise<ResponseMessage>((resolve) => rawWaiting.set(id, resolve));
      const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params }), 'utf8');
      proc.stdin!.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]));
      return answered;
    },
    async shutdown() {
      await connection.sendRequest(ShutdownRequest.type);
      const exited = once(proc, 'exit');
      await connection.sendNotification(ExitNotification.type);
      await exited;
      connection.dispose();
      raw.dispose();
    },
    async kill() {
      const exited = once(proc, 'exit');
      proc.kill('SIGKILL');
      await exited;
      connection.dispose();
      raw.dispose();
    },
  };
  return handle;
}

/** Waits until the model has loaded (status phase ready). */
export function waitReady(server: ServerHandle): Promise<StatusResult> {
  return server.waitForStatus((s) => s.phase === 'ready');
}
