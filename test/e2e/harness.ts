// harness.ts - runs the packaged extension in a real VS Code workbench for the e2e tests:
// starts code-server 4.100.3 (installed by scripts/e2e/setup.sh) on a free loopback port
// with a private user-data folder, settings that keep the workbench quiet, and the
// extensions folder that scripts/e2e/run.mjs installed the .vsix into; opens a workspace
// in Debian's chromium through playwright-core; takes a screenshot under test-results/ when
// a step fails; reads the ghost text the editor shows (one line or several) and the
// extension's output log; and stops everything it started. It
// waits on DOM state, HTTP answers and file-system events, never on fixed sleeps. What the
// workbench's selectors mean: shared/docs/vscode-e2e.md.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext, type FrameLocator, type Locator, type Page } from 'playwright-core';
import { repoRoot } from '../support/paths';

export const CODE_SERVER_ENTRY = path.join(repoRoot, '.e2e/code-server/node_modules/code-server/out/node/entry.js');
export const EXTENSION_ID = 'k3-code.k3-code';
export const STATUS_ITEM = `[id="${EXTENSION_ID}.k3.status"]`;
const CHROMIUM = process.env.K3_E2E_CHROMIUM ?? '/usr/bin/chromium';
const RESULTS = path.join(repoRoot, 'test-results');

/**
 * Settings every session gets (shared with `npm start`): no telemetry, tips or update
 * checks, no word suggestions racing the ghost text for Tab, and no auto-save (on by
 * default in a browser workbench, off in desktop VS Code), so a file changes on disk only
 * when a test saves it.
 */
const QUIET_SETTINGS = JSON.parse(fs.readFileSync(path.join(repoRoot, 'scripts/e2e/workbench-settings.json'), 'utf8')) as Record<string, unknown>;

export interface SessionOptions {
  /** `k3.*` and other user settings on top of the quiet ones. */
  settings?: Record<string, unknown>;
  /** Files to create in the workspace: relative path -> contents. */
  files?: Record<string, string>;
}

/** One workbench window (a browser page) and what tests do in it. */
export interface Window {
  page: Page;
  /** The chat view's page (the inner frame of the webview). */
  chatFrame(): FrameLocator;
  statusItem(): Locator;
  /** The status bar item's accessible label (its tooltip facts). */
  statusLabel(): Promise<string>;
  runCommand(title: string): Promise<void>;
  screenshot(name: string): Promise<string>;
  /** Reloads the window: a new extension host, the same workspace. */
  reload(): Promise<void>;
}

export interface Session extends Window {
  context: BrowserContext;
  workspace: string;
  /** Every URL the workbench and its webviews asked for. */
  requests: string[];
  /** Opens another window on the same workspace (its own extension host and language server). */
  openWindow(): Promise<Window>;
  close(): Promise<void>;
}

/** The helpers of one window on `page`. */
function windowOn(page: Page): Window {
  return {
    page,
    chatFrame: () => page.frameLocator(`iframe.webview.ready[src*="extensionId=${EXTENSION_ID}"]`).frameLocator('iframe#active-frame'),
    statusItem: () => page.locator(STATUS_ITEM),
    statusLabel: async () => {
      const item = page.locator(STATUS_ITEM);
      const label = (await item.getAttribute('aria-label')) ?? (await item.locator('[aria-label]').first().getAttribute('aria-label'));
      return label ?? '';
    },
    runCommand: async (title) => {
      await page.keyboard.press('F1');
      const box = page.locator('.quick-input-widget .quick-input-box input');
      await box.waitFor();
      await box.fill(`>${title}`);
      await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: title }).waitFor();
      await page.keyboard.press('Enter');
    },
    screenshot: async (name) => {
      fs.mkdirSync(RESULTS, { recursive: true });
      const file = path.join(RESULTS, `${name.replace(/[^a-z0-9-]+/gi, '-')}.png`);
      await page.screenshot({ path: file, animations: 'disabled' });
      return file;
    },
    reload: async () => {
      await page.reload();
      await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    },
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url: string, proc: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  proc.once('exit', () => (exited = true));
  for (;;) {
    if (exited) throw new Error('code-server exited before it answered /healthz');
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`code-server did not answer ${url}/healthz within ${timeoutMs} ms`);
    // Polling an HTTP endpoint that has no push alternative: each try is the event waited on.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The installed extension's folder (where code-server unpacked the .vsix). */
export function installedExtension(): string {
  const extensionsDir = process.env.K3_E2E_EXTENSIONS ?? '';
  const dir = fs.existsSync(extensionsDir) ? fs.readdirSync(extensionsDir).find((d) => d.startsWith(`${EXTENSION_ID}-`)) : undefined;
  if (!dir) throw new Error(`no ${EXTENSION_ID} under K3_E2E_EXTENSIONS (${extensionsDir}): run the e2e tests with \`npm run test:e2e\``);
  return path.join(extensionsDir, dir);
}

/** How long a workbench may take to appear: an upper bound on a busy machine, not a margin. */
const WORKBENCH_TIMEOUT_MS = 180_000;

export async function startSession(options: SessionOptions = {}): Promise<Session> {
  const extensionsDir = process.env.K3_E2E_EXTENSIONS;
  if (!extensionsDir || !fs.existsSync(extensionsDir)) {
    throw new Error('K3_E2E_EXTENSIONS is not set: run the e2e tests with `npm run test:e2e`');
  }
  if (!fs.existsSync(CODE_SERVER_ENTRY)) throw new Error('code-server is missing: run `bash scripts/e2e/setup.sh`');
  // Short: code-server puts unix sockets in TMPDIR, and their paths max out at 107 bytes.
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'k3e2e-'));
  const dirs = { data: path.join(root, 'data'), ws: path.join(root, 'ws'), tmp: path.join(root, 't'), browser: path.join(root, 'b') };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  // code-server is a remote window: settings of `machine` scope (k3.modelPath is
  // machine-overridable) count only in the Machine (remote) settings, where the extension's
  // own updates of them also go; the workbench's quiet settings are User settings.
  const scopes: [string, Record<string, unknown>][] = [['User', QUIET_SETTINGS], ['Machine', options.settings ?? {}]];
  for (const [scope, values] of scopes) {
    fs.mkdirSync(path.join(dirs.data, scope), { recursive: true });
    fs.writeFileSync(path.join(dirs.data, scope, 'settings.json'), JSON.stringify(values, null, 2));
  }
  for (const [rel, text] of Object.entries(options.files ?? {})) {
    fs.mkdirSync(path.dirname(path.join(dirs.ws, rel)), { recursive: true });
    fs.writeFileSync(path.join(dirs.ws, rel), text);
  }
  const config = path.join(root, 'config.yaml');
  fs.writeFileSync(config, '{}\n');

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(root, 'code-server.log'), 'a');
  const proc = spawn(
    process.execPath,
    [
      CODE_SERVER_ENTRY,
      '--config', config,
      '--user-data-dir', dirs.data,
      '--extensions-dir', extensionsDir,
      '--bind-addr', `127.0.0.1:${port}`,
      '--auth', 'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      dirs.ws,
    ],
    { detached: true, stdio: ['ignore', log, log], env: { ...process.env, TMPDIR: dirs.tmp } },
  );
  fs.closeSync(log);

  let context: BrowserContext | undefined;
  const stop = async () => {
    await context?.close().catch(() => undefined);
    if (proc.exitCode === null && proc.pid) {
      const exited = once(proc, 'exit');
      try {
        process.kill(-proc.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await exited;
    }
    if (!process.env.K3_E2E_KEEP) fs.rmSync(root, { recursive: true, force: true });
  };

  try {
    await waitForHealth(url, proc, 30_000);
    context = await chromium.launchPersistentContext(dirs.browser, {
      executablePath: CHROMIUM,
      headless: true,
      env: { ...process.env, XDG_CONFIG_HOME: path.join(root, 'xdg-config'), XDG_CACHE_HOME: path.join(root, 'xdg-cache') },
      args: [
        '--disable-breakpad', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
      viewport: { width: 1400, height: 900 },
    });
    const requests: string[] = [];
    context.on('request', (r) => requests.push(r.url()));
    const page = context.pages()[0] ?? (await context.newPage());
    const workbench = `${url}/?folder=${encodeURIComponent(dirs.ws)}`;
    // The workbench is what counts, not the page's load event: on a loaded machine its
    // scripts take long past the default 30 s (seen at load 16).
    await page.goto(workbench, { waitUntil: 'commit', timeout: WORKBENCH_TIMEOUT_MS });
    await page.locator('.monaco-workbench').waitFor({ timeout: WORKBENCH_TIMEOUT_MS });

    const opened = context;
    const session: Session = {
      ...windowOn(page),
      context,
      workspace: dirs.ws,
      requests,
      openWindow: async () => {
        const other = await opened.newPage();
        await other.goto(workbench, { waitUntil: 'commit', timeout: WORKBENCH_TIMEOUT_MS });
        await other.locator('.monaco-workbench').waitFor({ timeout: WORKBENCH_TIMEOUT_MS });
        return windowOn(other);
      },
      close: stop,
    };
    return session;
  } catch (e) {
    const tail = fs.existsSync(path.join(root, 'code-server.log'))
      ? fs.readFileSync(path.join(root, 'code-server.log'), 'utf8').slice(-2000)
      : '';
    await stop();
    throw new Error(`${(e as Error).message}\ncode-server log tail:\n${tail}`);
  }
}

/** Runs one test step; on failure saves a screenshot named after the step and rethrows. */
export async function step<T>(session: Window, name: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    const file = await session.screenshot(`FAILED-${name}`).catch(() => 'none (the page was gone)');
    throw new Error(`${(e as Error).message}\nscreenshot: ${file}`);
  }
}

/** Waits until the status bar item's label matches `re`; returns the label. */
export async function waitForStatus(session: Window, re: RegExp, timeoutMs = 60_000): Promise<string> {
  await session.page.waitForFunction(
    ({ selector, source }) => {
      const el = document.querySelector(selector);
      const label = el?.getAttribute('aria-label') ?? el?.querySelector('[aria-label]')?.getAttribute('aria-label') ?? '';
      return new RegExp(source).test(label);
    },
    { selector: STATUS_ITEM, source: re.source },
    { timeout: timeoutMs },
  );
  return session.statusLabel();
}

/** Opens `name` through Quick Open and puts the keyboard in its editor. */
export async function openFile(session: Window, name: string): Promise<void> {
  await session.page.keyboard.press('Control+P');
  await session.page.locator('.quick-input-widget .quick-input-box input').fill(name);
  await session.page.locator('.quick-input-list .monaco-list-row.focused', { hasText: name }).waitFor();
  await session.page.keyboard.press('Enter');
  await session.page.locator('.tab.active', { hasText: name }).waitFor();
  await session.page.locator('.editor-instance .monaco-editor .view-lines').click();
}

/**
 * Waits until the editor shows inline ghost text and returns it: every ghost span of the
 * cursor's line (the workbench splits it by syntax colour) in order, non-breaking spaces as
 * spaces. Single-line completions only (the multi-line remainder is a separate view zone).
 */
export async function ghostText(session: Window, timeoutMs = 60_000): Promise<string> {
  const handle = await session.page.waitForFunction(
    () => {
      const spans = document.querySelectorAll('.editor-instance .monaco-editor .view-line .ghost-text-decoration');
      const text = Array.from(spans, (el) => el.textContent ?? '').join('').replace(/\u00a0/g, ' ');
      return text.trim() === '' ? false : text;
    },
    undefined,
    { timeout: timeoutMs },
  );
  return (await handle.jsonValue()) as string;
}

/**
 * Waits until the editor shows ghost text and returns its lines: the inline part on the
 * cursor's line (empty when the suggestion starts with a line break), then each line of the
 * view zone the workbench draws below it for a suggestion of several lines, non-breaking
 * spaces as spaces.
 */
export async function ghostLines(session: Window, timeoutMs = 60_000): Promise<string[]> {
  const handle = await session.page.waitForFunction(
    () => {
      const text = (el: Element) => (el.textContent ?? '').replace(/\u00a0/g, ' ');
      const spans = document.querySelectorAll('.editor-instance .monaco-editor .view-line .ghost-text-decoration');
      const inline = Array.from(spans, text).join('');
      const zone = Array.from(document.querySelectorAll('.editor-instance .monaco-editor .view-zones .suggest-preview-text .view-line'), text);
      return zone.length === 0 && inline.trim() === '' ? false : [inline, ...zone];
    },
    undefined,
    { timeout: timeoutMs },
  );
  return (await handle.jsonValue()) as string[];
}

/** Waits until the ghost text's lines (as ghostLines reads them) satisfy `accept`; rejects
 * after `timeoutMs` with the last lines seen. */
export async function waitForGhost(session: Window, accept: (lines: string[]) => boolean, timeoutMs: number): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let last: string[] = [];
  for (;;) {
    last = await ghostLines(session, Math.max(1, deadline - Date.now())).catch(() => last);
    if (accept(last)) return last;
    if (Date.now() > deadline) throw new Error(`the ghost text did not become as expected within ${timeoutMs} ms; it shows ${JSON.stringify(last)}`);
    // Each read is of the DOM as it is now; the workbench redraws on its own schedule.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The lines the extension's K3 output channel has written so far (its log file in the
 * workbench's logs folder; none before the channel's first line). */
export function outputLog(session: Session): string[] {
  const logs = path.join(path.dirname(session.workspace), 'data', 'logs');
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === 'K3.log') found.push(p);
    }
  };
  walk(logs);
  // Complete lines only: the one being written may not have its end yet.
  return found.flatMap((f) => fs.readFileSync(f, 'utf8').split('\n').slice(0, -1));
}

/** Waits until a line of the K3 output log satisfies `pred`, beyond the first `skip` lines. */
export async function waitForLog(session: Session, pred: (line: string) => boolean, skip: number, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = outputLog(session).slice(skip).find(pred);
    if (line !== undefined) return line;
    if (Date.now() > deadline) throw new Error(`no K3 log line as expected within ${timeoutMs} ms; the last: ${outputLog(session).slice(-5).join(' | ')}`);
    // The log file is appended by the workbench; each read is the event waited on.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Resolves with the text of `file` once it satisfies `accept`, checked now and on every change
 * the file system reports in its folder (the workbench may replace the file rather than write
 * it in place); rejects after `timeoutMs` with the last text seen.
 */
export function waitForFile(file: string, accept: (text: string) => boolean, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let last = '';
    const check = (): boolean => {
      try {
        last = fs.readFileSync(file, 'utf8');
      } catch {
        return false; // between an unlink and a rename
      }
      if (!accept(last)) return false;
      done();
      resolve(last);
      return true;
    };
    const watcher = fs.watch(path.dirname(file), () => check());
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${file} did not change as expected within ${timeoutMs} ms; it holds ${JSON.stringify(last)}`));
    }, timeoutMs);
    const done = () => {
      watcher.close();
      clearTimeout(timer);
    };
    check();
  });
}
