// chat.e2e.ts - the chat panel in a real editor with the embedded default model, k3-mini:
// the status tooltip names the model and its size; the panel says k3-mini is a code
// completer that cannot chat and offers to choose the chat or completion backend, and a message sent anyway gets a
// visible reply labelled as such; a second window on the same workspace, and a reload, show
// the same history. Then, with a copy of k3-mini whose config claims chat (so its replies
// run long), Stop ends the first reply of a new conversation and a follow-up's.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { installedExtension, startSession, step, waitForStatus, type Session, type Window } from './harness';

const QUESTION = 'def fibonacci(n):';

async function openChat(w: Window): Promise<void> {
  await w.runCommand('K3 Chat: Focus on Chat View');
  await w.chatFrame().locator('#input').waitFor({ timeout: 60_000 });
}

async function send(w: Window, text: string): Promise<void> {
  const chat = w.chatFrame();
  await chat.locator('#send:not([disabled])').waitFor({ timeout: 120_000 });
  await chat.locator('#input').fill(text);
  await chat.locator('#input').press('Enter');
  await chat.locator('.message.user', { hasText: text }).last().waitFor();
}

describe('with k3-mini, a code-completion model', () => {
  let s: Session;

  before(async () => {
    s = await startSession({ files: { 'src/fib.py': `${QUESTION}\n` } });
  });

  after(async () => {
    await s?.close();
  });

  test('the status tooltip names the model and its size', async () => {
    await step(s, 'tooltip', async () => {
      const label = await waitForStatus(s, /^K3: Ready/, 120_000);
      assert.match(label, /Model: k3-mini \(\d+ MiB of weights, code completion only: not trained for chat\)/);
    });
  });

  test('the panel says k3-mini cannot chat with the ways out, and a message gets a visible reply marked as a continuation', async () => {
    await step(s, 'notice-and-reply', async () => {
      await openChat(s);
      const chat = s.chatFrame();
      const notice = chat.locator('#notice');
      await notice.filter({ hasText: 'k3-mini is a code-completion model, not trained for chat' }).waitFor();
      await notice.locator('button', { hasText: 'Choose Chat Backend…' }).waitFor();
      await notice.locator('button', { hasText: 'Choose Completion Backend…' }).waitFor();
      await send(s, QUESTION);
      const reply = chat.locator('.message.assistant[data-state="done"]');
      await reply.waitFor({ timeout: 120_000 });
      const text = (await reply.locator('.content').innerText()).trim();
      assert.notEqual(text, '', 'the reply is visible as text, not folded away');
      assert.equal(await reply.locator('details.reasoning').count(), 0, 'nothing is folded');
      await reply.locator('.note.completion-model', { hasText: 'k3-mini is a code-completion model' }).waitFor();
      assert.equal(await reply.locator('.who').innerText(), 'k3-mini');
      // The page keeps the newest text in view; the picture starts at the question.
      await chat.locator('#messages').evaluate((el) => (el.scrollTop = 0));
      await s.screenshot('docs-chat-panel');
    });
  });

  test('a second window on the same workspace shows the history, and so does a reload', async () => {
    await step(s, 'second-window', async () => {
      const other = await s.openWindow();
      try {
        await waitForStatus(other, /^K3: (?!Starting)/, 120_000);
        await openChat(other);
        await other.chatFrame().locator('.message.user', { hasText: QUESTION }).waitFor({ timeout: 60_000 });
        await other.chatFrame().locator('.message.assistant[data-state="done"] .content').waitFor();
        await other.screenshot('chat-second-window');
      } finally {
        await other.page.close();
      }
      await s.reload();
      await waitForStatus(s, /^K3: (?!Starting)/, 120_000);
      await openChat(s);
      await s.chatFrame().locator('.message.user', { hasText: QUESTION }).waitFor({ timeout: 60_000 });
      await s.chatFrame().locator('.message.assistant[data-state="done"] .content').waitFor();
    });
  });
});

describe('with a model whose replies run long', () => {
  let s: Session;
  let model: string;

  before(async () => {
    // k3-mini's weights under a config without `k3_code`: the server treats it as a chat
    // model, so a reply runs to k3.chat.maxTokens (minutes; far past any click) unless stopped.
    model = fs.mkdtempSync(path.join(os.tmpdir(), 'k3e2e-long-'));
    const mini = path.join(installedExtension(), 'media/models/k3-mini');
    for (const f of fs.readdirSync(mini)) fs.copyFileSync(path.join(mini, f), path.join(model, f));
    const config = JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8'));
    delete config.k3_code;
    fs.writeFileSync(path.join(model, 'config.json'), JSON.stringify(config));
    s = await startSession({ settings: { 'k3.modelPath': model, 'k3.chat.maxTokens': 100_000 } });
  });

  after(async () => {
    await s?.close();
    fs.rmSync(model, { recursive: true, force: true });
  });

  test('Stop ends the first reply of a new conversation, and a follow-up’s', async () => {
    await step(s, 'stop', async () => {
      await waitForStatus(s, /^K3: Ready/, 120_000);
      await openChat(s);
      const chat = s.chatFrame();
      for (const [i, text] of ['Write a long story.', 'And another one.'].entries()) {
        await send(s, text);
        const streaming = chat.locator('.message.assistant[data-state="streaming"]').filter({ has: chat.locator('.reasoning-body, .content :is(p, pre, li)') });
        await streaming.waitFor({ timeout: 120_000 });
        if (i === 0) await s.screenshot('chat-streaming');
        await chat.locator('#stop').click();
        // Only `stopped` counts: left alone, the reply would run for minutes.
        await chat.locator('.message.assistant[data-state="stopped"]').nth(i).waitFor({ timeout: 60_000 });
        await chat.locator('#stop').waitFor({ state: 'hidden' });
      }
      assert.equal(await chat.locator('.message.assistant[data-state="done"]').count(), 0);
      await s.screenshot('chat-stopped');
    });
  });
});
