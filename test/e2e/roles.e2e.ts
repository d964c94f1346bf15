// roles.e2e.ts - ghost text and chat each on their own backend, in one real editor window:
// chat moved to `k3 serve` (the tiny fixture, on a loopback port) through "K3: Choose Chat
// Backend" as a user does it (a dead endpoint first: the check fails and nothing is saved),
// beside the default k3.completions.backend `embedded`. Typing shows k3-mini's completion as ghost text
// (checked against the installed extension's own server on k3-mini, and k3 serve sees no
// completion request); a chat message streams its reply from k3 serve, without the k3-mini
// notice; the status bar names both models and its tooltip each role's backend and state.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { ensureFixture } from '../support/fixtures';
import { closedPort } from '../serve/remote-client';
import { type Serve, startServe } from '../serve/support';
import { ghostText, startSession, step, waitForStatus, type Session } from './harness';
import { installedServerAnswer } from './installed-server';

const ORIGINAL = 'export function add(a: number, b: number): number {\n  return a + b;\n}\n';
const TYPED = 'const total = ';
const FILE = 'src/pair.ts';
const QUESTION = 'What is a monad?';

let serve: Serve;
let s: Session;
let fixtureName: string;

before(async () => {
  const fixture = ensureFixture({ gate: 'lowerbound' });
  fixtureName = path.basename(fixture);
  serve = await startServe(fixture, { args: ['--ctx', '4096'] });
  s = await startSession({
    settings: {
      'k3.completions.debounceMs': 1000,
      // Long enough that the reply is seen streaming before it ends.
      'k3.chat.maxTokens': 600,
    },
    files: { [FILE]: ORIGINAL },
  });
});

after(async () => {
  await s?.close();
  await serve?.stop();
});


/** What k3-mini completes for `text` at its end, through the installed extension's server. */
async function miniCompletion(workspace: string, text: string): Promise<string> {
  const { items } = await installedServerAnswer(workspace, FILE, 'typescript', text);
  const insert = items[0]?.insertText;
  assert.equal(typeof insert, 'string', `k3-mini offers a completion: ${JSON.stringify(items)}`);
  return insert as string;
}

/** Runs K3: Choose Chat Backend, picks "Remote server" and gives `endpoint`. */
async function chooseRemoteChat(endpoint: string): Promise<void> {
  await s.runCommand('K3: Choose Chat Backend');
  const row = s.page.locator('.quick-input-list .monaco-list-row', { hasText: 'Remote server' });
  await row.waitFor();
  await row.click();
  const box = s.page.locator('.quick-input-widget .quick-input-box input');
  await s.page.locator('.quick-input-widget', { hasText: "The server's base URL" }).waitFor();
  await box.fill(endpoint);
  await box.press('Enter');
}

test('K3: Choose Chat Backend checks the endpoint: a dead one saves nothing, k3 serve is saved and chat moves there', async () => {
  await step(s, 'roles-choose-backend', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    // A loopback port nothing listens on (not one fetch refuses to use, like 9).
    const dead = await closedPort();
    await chooseRemoteChat(`http://127.0.0.1:${dead}`);
    const refused = s.page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'Nothing was saved' });
    await refused.waitFor({ timeout: 60_000 });
    assert.match(await refused.innerText(), new RegExp(`127\\.0\\.0\\.1:${dead}/v1/models failed: connection refused`));
    await s.screenshot('roles-choose-backend-refused');
    assert.match(await waitForStatus(s, /Chat: k3-mini/, 10_000), /Chat: k3-mini \(embedded/, 'chat stays on k3-mini');
    await chooseRemoteChat(serve.base);
    await s.page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'chat now goes to' }).waitFor({ timeout: 60_000 });
    await s.screenshot('roles-choose-backend-saved');
  });
});

test('the status bar names both roles: k3-mini embedded for ghost text, the fixture on k3 serve for chat', async () => {
  await step(s, 'roles-status', async () => {
    const label = await waitForStatus(s, /^K3: Ready.*Chat: .*ready/, 120_000);
    assert.match(label, /Completions: k3-mini \(embedded, ready, \d+ MiB in memory\)/);
    assert.match(label, new RegExp(`Chat: ${fixtureName} \\(remote ${serve.base.replace(/[.]/g, '\\.')}/v1, ready\\)`));
    assert.match(await s.statusItem().innerText(), new RegExp(`k3-mini \\| chat ${fixtureName}`));
  });
});

test('a chat message streams its reply from k3 serve, with no k3-mini notice', async () => {
  await step(s, 'roles-chat', async () => {
    await s.runCommand('K3 Chat: Focus on Chat View');
    const chat = s.chatFrame();
    await chat.locator('#send:not([disabled])').waitFor({ timeout: 120_000 });
    const notice = await chat.locator('#notice').innerText();
    assert.doesNotMatch(notice, /code-completion model/, 'chat is not on k3-mini, so no such notice');
    const from = serve.log.length;
    await chat.locator('#input').fill(QUESTION);
    await chat.locator('#input').press('Enter');
    await chat.locator('.message.user', { hasText: QUESTION }).waitFor();
    await chat.locator('.message.assistant[data-state="streaming"]').filter({ has: chat.locator('.reasoning-body, .content :is(p, pre, li)') }).waitFor({ timeout: 120_000 });
    const reply = chat.locator('.message.assistant[data-state="done"]');
    await reply.waitFor({ timeout: 120_000 });
    assert.equal(await reply.locator('.note.completion-model').count(), 0, 'a chat reply, not a continuation');
    await serve.waitForLog((l) => serve.log.indexOf(l) >= from && /POST \/v1\/chat\/completions 200/.test(l));
    await chat.locator('#messages').evaluate((el) => (el.scrollTop = 0));
  });
});

test('typing, with the chat open, shows k3-mini\'s completion as ghost text, and no completion reaches k3 serve', async () => {
  await step(s, 'roles-ghost-text', async () => {
    const from = serve.log.length;
    await s.page.keyboard.press('Control+P');
    await s.page.locator('.quick-input-widget .quick-input-box input').fill('pair.ts');
    await s.page.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'pair.ts' }).waitFor();
    await s.page.keyboard.press('Enter');
    await s.page.locator('.tab.active', { hasText: 'pair.ts' }).waitFor();
    await s.page.locator('.editor-instance .monaco-editor .view-lines').click();
    await s.page.keyboard.press('Control+End');
    await s.page.keyboard.type(TYPED, { delay: 60 });
    const shown = await ghostText(s, 90_000);
    // One picture of the pairing: the chat's reply from k3 serve, k3-mini's ghost text, the status bar.
    await s.screenshot('roles-pairing');
    const expected = await miniCompletion(s.workspace, ORIGINAL + TYPED);
    const flat = (t: string) => t.replace(/\s+/g, ' ');
    assert.equal(flat(shown), flat(expected), 'the ghost text is k3-mini\'s completion');
    assert.deepEqual(serve.log.slice(from).filter((l) => /\/v1\/completions/.test(l)), [], 'k3 serve got no completion request');
  });
});
