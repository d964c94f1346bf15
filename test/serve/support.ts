// support.ts - `k3 serve` as a child process for tests: started on the tiny fixture on a
// free loopback port (--port 0; the port is read from its first stdout line), its stderr
// log lines collected and awaited by predicate, its RSS read from /proc; plus HTTP helpers
// that talk to it over real sockets on 127.0.0.1 only: JSON requests, streamed
// (server-sent-event) requests that can be cut off, and raw bytes for malformed input.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as readline from 'node:readline';
import { k3Binaries } from '../support/engine';

export interface Serve {
  proc: ChildProcess;
  port: number;
  base: string;
  /** stderr lines so far (one per request, among others). */
  log: string[];
  /** Resolves with the first log line (seen or to come) that satisfies pred. */
  waitForLog(pred: (line: string) => boolean): Promise<string>;
  /** Resident set size now, in KiB (VmRSS). */
  rssKiB(): number;
  /** SIGTERM, then waits for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
}

export interface ServeOptions {
  args?: string[];
  env?: Record<string, string>;
  /** The AddressSanitizer build instead of the plain one. */
  asan?: boolean;
}

/** Starts `k3 serve dir` and resolves once it listens. */
export async function startServe(dir: string, options: ServeOptions = {}): Promise<Serve> {
  const bin = options.asan ? k3Binaries.asan : k3Binaries.plain;
  const args = options.args ?? [];
  const proc = spawn(bin, ['serve', dir, ...(args.includes('--port') ? [] : ['--port', '0']), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', ...options.env },
  });
  const log: string[] = [];
  const waiters: Array<() => void> = [];
  readline.createInterface({ input: proc.stderr! }).on('line', (line) => {
    log.push(line);
    for (const w of waiters.splice(0)) w();
  });
  const exited = once(proc, 'exit');
  const first = await Promise.race([
    once(readline.createInterface({ input: proc.stdout! }), 'line').then(([line]) => String(line)),
    exited.then(([code]) => {
      throw new Error(`k3 serve exited (${String(code)}) before listening:\n${log.join('\n')}`);
    }),
  ]);
  const m = /listening on http:\/\/[^\s]*:(\d+) /.exec(first);
  if (!m) throw new Error(`k3 serve's first line does not name its port: ${first}`);
  const port = Number(m[1]);
  const serve: Serve = {
    proc,
    port,
    base: `http://127.0.0.1:${port}`,
    log,
    async waitForLog(pred) {
      for (let seen = 0; ; ) {
        for (; seen < log.length; seen++) if (pred(log[seen])) return log[seen];
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`k3 serve exited; log:\n${log.join('\n')}`);
        await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), exited]);
      }
    },
    rssKiB() {
      const m2 = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8'));
      if (!m2) throw new Error('no VmRSS');
      return Number(m2[1]);
    },
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      const [code] = await exited;
      return code as number | null;
    },
    async kill() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
  return serve;
}

export interface JsonResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  text: string;
}

/** One request with a JSON body (or none); resolves with the status and the parsed body. */
export function requestJson(port: number, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: { ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } : {}), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

export interface StreamHandle {
  /** The response's status. */
  status: Promise<number>;
  /** Every `data:` payload so far, in order. */
  events: string[];
  /** Resolves when an event satisfies pred (seen or to come). */
  waitForEvent(pred: (data: string) => boolean): Promise<string>;
  /** Resolves when the server ends the response. */
  ended: Promise<void>;
  /** Closes the connection from this side at once. */
  destroy(): void;
}

/** POSTs body and reads the server-sent events as they come. */
export function requestStream(port: number, path: string, body: unknown): StreamHandle {
  const events: string[] = [];
  const waiters: Array<() => void> = [];
  let ended = false;
  const payload = Buffer.from(JSON.stringify(body));
  let resolveStatus!: (s: number) => void;
  let resolveEnded!: () => void;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const endedP = new Promise<void>((r) => (resolveEnded = r));
  const poke = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  const req = http.request(
    { host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } },
    (res) => {
      resolveStatus(res.statusCode ?? 0);
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        pending += d;
        for (let i = pending.indexOf('\n\n'); i >= 0; i = pending.indexOf('\n\n')) {
          const block = pending.slice(0, i);
          pending = pending.slice(i + 2);
          for (const line of block.split('\n')) if (line.startsWith('data: ')) events.push(line.slice(6));
        }
        poke();
      });
      const end = (): void => {
        ended = true;
        resolveEnded();
        poke();
      };
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
    },
  );
  req.on('error', () => {
    ended = true;
    resolveStatus(0);
    resolveEnded();
    poke();
  });
  req.end(payload);
  return {
    status,
    events,
    ended: endedP,
    async waitForEvent(pred) {
      for (let seen = 0; ; ) {
        for (; seen < events.length; seen++) if (pred(events[seen])) return events[seen];
        if (ended) throw new Error(`the stream ended without such an event: ${events.join(' | ')}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    destroy() {
      req.destroy();
    },
  };
}

/** Sends raw bytes on a fresh connection; resolves with everything the server sent back
 * before closing. After sending: `end` half-closes (the default), `open` keeps sending
 * nothing more (a client that sent a partial request and waits), `reset` destroys the
 * connection at once (resolving with ''). */
export function rawExchange(port: number, bytes: string | Buffer, after: 'end' | 'open' | 'reset' = 'end'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('utf8');
    socket.on('connect', () => {
      socket.write(bytes);
      if (after === 'end') socket.end();
      if (after === 'reset') socket.resetAndDestroy();
    });
    socket.on('data', (d: string) => (got += d));
    socket.on('close', () => resolve(got));
    socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' || e.code === 'EPIPE' ? resolve(got) : reject(e)));
  });
}

/** The status code of a raw HTTP response ("HTTP/1.1 400 Bad Request" -> 400), or 0. */
export function statusOf(response: string): number {
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(response);
  return m ? Number(m[1]) : 0;
}
