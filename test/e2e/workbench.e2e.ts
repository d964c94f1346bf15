// workbench.e2e.ts - the packaged extension in a real VS Code (code-server + chromium) with
// the tiny generated checkpoint as its model folder (the embedded default model does not
// exist yet): it activates and says what the engine is doing in the status bar, its
// commands are in the palette, the chat view opens under a strict Content-Security-Policy
// without any remote request, and picking a memory preset from the palette reloads the
// engine and changes the status bar, which survives a window reload.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ensureFixture } from '../support/fixtures';
import { startSession, step, waitForStatus, type Session } from './harness';

const COMMAND_TITLES = [
  'K3: Select Memory Preset',
  'K3: Select Model Folder',
  'K3: New Chat',
  'K3: Clear Workspace State',
  'K3: Toggle Completions',
  'K3: Show Logs',
];

let s: Session;

before(async () => {
  s = await startSession({
    settings: { 'k3.modelPath': ensureFixture() },
    files: { 'src/hello.ts': 'export function add(a: number, b: number): number {\n  return a + b;\n}\n' },
  });
});

after(async () => {
  await s?.close();
});

test('activation shows the K3 status bar item with what the engine is doing', async () => {
  await step(s, 'activation', async () => {
    await s.statusItem().waitFor({ timeout: 60_000 });
    // Past "Starting": the server answered k3/status.
    const label = await waitForStatus(s, /^K3: (?!Starting)/);
    assert.match(label, /Preset: auto/);
    assert.match(await s.statusItem().innerText(), /K3/);
  });
});

test('every K3 command is in the command palette', async () => {
  await step(s, 'palette', async () => {
    await s.page.keyboard.press('F1');
    const box = s.page.locator('.quick-input-widget .quick-input-box input');
    await box.fill('>K3: ');
    const rows = s.page.locator('.quick-input-list .monaco-list-row');
    for (const title of COMMAND_TITLES) await rows.filter({ hasText: title }).first().waitFor();
    await s.page.keyboard.press('Escape');
  });
});

test('the chat view opens with a nonce CSP and makes no remote request', async () => {
  await step(s, 'chat-view', async () => {
    await s.page.locator('.activitybar .action-label[aria-label^="K3 Chat"]').click();
    const chat = s.chatFrame();
    await chat.locator('#input').waitFor();
    const csp = (await chat.locator('meta[http-equiv="Content-Security-Policy"]').getAttribute('content')) ?? '';
    assert.match(csp, /default-src 'none'/);
    const nonce = await chat.locator('script[nonce]').getAttribute('nonce');
    assert.ok(nonce && nonce.length >= 16, 'the script carries a nonce');
    assert.ok(csp.includes(`script-src 'nonce-${nonce}'`), `CSP ${csp} allows only the nonce'd script`);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*(?!\.vscode-cdn\.net)/);
    // *.vscode-resource.vscode-cdn.net is the name webview resources get; the webview's
    // service worker answers those from code-server, so they never leave the machine.
    const local = /^(https?:\/\/127\.0\.0\.1[:/]|https:\/\/[^/]+\.vscode-resource\.vscode-cdn\.net\/|data:|blob:|vscode-)/;
    const remote = s.requests.filter((u) => !local.test(u));
    assert.deepEqual(remote, [], 'requests outside this machine');
    await chat.locator('#input').focus();
    await s.page.keyboard.type('hello');
    assert.equal(await chat.locator('#input').inputValue(), 'hello', 'the input takes the keyboard');
  });
});

test('a chat message streams a reply into the panel, Stop ends it, and it survives a window reload', async () => {
  await step(s, 'chat-stream', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    const chat = s.chatFrame();
    await chat.locator('#send:not([disabled])').waitFor();
    await chat.locator('#input').fill('Say hello');
    await chat.locator('#input').press('Enter');
    await chat.locator('.message.user', { hasText: 'Say hello' }).waitFor();
    // A piece of the reply has arrived while it is still streaming (content or reasoning).
    const streaming = chat.locator('.message.assistant[data-state="streaming"]').filter({ has: chat.locator('.content :is(p, pre, li), .reasoning') });
    await streaming.waitFor({ timeout: 120_000 });
    await s.screenshot('chat-fixture');
    await chat.locator('#stop').click();
    await chat.locator('.message.assistant[data-state="stopped"], .message.assistant[data-state="done"]').waitFor({ timeout: 60_000 });
    await s.reload();
    await waitForStatus(s, /^K3: (?!Starting)/);
    await s.runCommand('K3 Chat: Focus on Chat View');
    await s.chatFrame().locator('.message.user', { hasText: 'Say hello' }).waitFor({ timeout: 60_000 });
    await s.chatFrame().locator('.message.assistant').waitFor();
  });
});

test('picking a memory preset from the palette reloads the engine and changes the status bar', async () => {
  await step(s, 'preset', async () => {
    await s.runCommand('K3: Select Memory Preset');
    await s.page.locator('.quick-input-widget .quick-input-title', { hasText: 'Select Memory Preset' }).waitFor();
    const rows = s.page.locator('.quick-input-list .monaco-list-row');
    await rows.filter({ hasText: 'recommended' }).filter({ hasText: 'auto' }).first().waitFor();
    for (const name of ['laptop', 'desktop', 'workstation', 'server', 'max']) await rows.filter({ hasText: name }).first().waitFor();
    await s.screenshot('docs-preset-picker');
    await s.page.locator('.quick-input-widget .quick-input-box input').fill('laptop');
    await s.page.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'laptop' }).waitFor();
    await s.page.keyboard.press('Enter');
    await waitForStatus(s, /Preset: laptop/);
  });
});

test('the chosen preset survives a window reload', async () => {
  await step(s, 'reload', async () => {
    await s.reload();
    const label = await waitForStatus(s, /^K3: (?!Starting).*Preset: laptop/);
    assert.match(label, /Preset: laptop/);
  });
});
