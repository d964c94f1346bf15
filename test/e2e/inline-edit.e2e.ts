// inline-edit.e2e.ts - inline edit and Apply in a real editor (code-server + Chromium, the
// packaged .vsix), against the llama-server fake replaying scripted chat streams (k3.backend
// remote): Ctrl+I on a selection streams a diff; Esc (Reject All) leaves the file byte for byte
// as it was; per-hunk Accept then Accept All applies the rewrite and one Undo restores the
// original; a reply without code, a stream that fails midway and Esc while the rewrite is
// still coming each leave the file unchanged; a code block's Apply in the chat opens the same
// diff against the file it names. Then once against `k3 serve` on the tiny fixture model,
// whose random weights write no code: the edit says so and changes nothing. And with the
// embedded k3-mini, which cannot chat, Ctrl+I says so and offers the ways out. Screenshots
// of each stage go to test-results/.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startLlamaServer, type FakeLlamaServer } from '../serve/fakes/llama-server';
import { startServe, type Serve } from '../serve/support';
import { ensureFixture } from '../support/fixtures';
import { addonFile } from '../support/paths';
import { openFile, startSession, step, waitForFile, waitForStatus, type Session } from './harness';

const ORIGINAL = [
  'import sys',
  '',
  '',
  'def fib(n):',
  '    if n < 2:',
  '        return n',
  '    return fib(n - 1) + fib(n - 2)',
  '',
  '',
  'print(fib(int(sys.argv[1])))',
  '',
].join('\n');
/** The rewrite of lines 4-7: two hunks (the def line; the last return). */
const REWRITE = ['def fib(n: int) -> int:', '    if n < 2:', '        return n', '    return fib(n - 2) + fib(n - 1)'].join('\n');
const EDITED = ORIGINAL.replace('def fib(n):', 'def fib(n: int) -> int:').replace('fib(n - 1) + fib(n - 2)', 'fib(n - 2) + fib(n - 1)');
const FENCED = `Here it is:\n\`\`\`python\n${REWRITE}\n\`\`\`\n`;

/** The fenced reply cut into pieces at places that split the fence and the lines. */
function pieces(text: string): { content: string }[] {
  const out: { content: string }[] = [];
  for (let i = 0; i < text.length; i += 7) out.push({ content: text.slice(i, i + 7) });
  return out;
}

/** The editor's lines as shown, top to bottom (CodeLens rows are view zones, not lines). */
async function editorLines(s: Session): Promise<string[]> {
  return s.page.evaluate(() =>
    Array.from(document.querySelectorAll('.editor-instance .monaco-editor .view-lines .view-line'))
      .map((el) => ({ top: parseFloat((el as HTMLElement).style.top), text: (el.textContent ?? '').replace(/\u00a0/g, ' ') }))
      .sort((a, b) => a.top - b.top)
      .map((l) => l.text),
  );
}

/** Waits until the editor shows every line of `shown` and none of `gone`. */
async function waitForLines(s: Session, shown: string[], gone: string[]): Promise<void> {
  await s.page.waitForFunction(
    ({ shown, gone }) => {
      const lines = Array.from(document.querySelectorAll('.editor-instance .monaco-editor .view-lines .view-line'), (el) =>
        (el.textContent ?? '').replace(/\u00a0/g, ' '),
      );
      return shown.every((l) => lines.includes(l)) && !gone.some((l) => lines.includes(l));
    },
    { shown, gone },
    { timeout: 60_000 },
  );
}


/** Selects lines first..last (1-based, whole lines) with the keyboard. */
async function selectLines(s: Session, first: number, last: number): Promise<void> {
  await s.page.keyboard.press('Control+G');
  await s.page.keyboard.type(String(first));
  await s.page.keyboard.press('Enter');
  await s.page.keyboard.press('Home');
  await s.page.keyboard.press('Home');
  for (let l = first; l <= last; l++) await s.page.keyboard.press('Shift+ArrowDown');
}

async function askEdit(s: Session, instruction: string): Promise<void> {
  await s.page.keyboard.press('Control+I');
  const box = s.page.locator('.quick-input-widget .quick-input-box input');
  await box.waitFor();
  await s.page.locator('.quick-input-widget .quick-input-title', { hasText: 'K3: Edit lines 4–7 of fib.py' }).waitFor();
  await box.fill(instruction);
  await s.page.keyboard.press('Enter');
}

const lens = (s: Session, title: string | RegExp) => s.page.locator('.codelens-decoration a', { hasText: title });

/** Waits until `n` hunks show their own Accept. */
async function hunkLenses(s: Session, n: number): Promise<void> {
  await s.page.waitForFunction(
    (n) => Array.from(document.querySelectorAll('.codelens-decoration a')).filter((a) => a.textContent === 'Accept').length === n,
    n,
    { timeout: 30_000 },
  );
}

/** Saves, then waits until the file holds exactly `expected` (the workbench may write it
 * after the tab turns clean, and may replace it rather than write in place); fails with
 * what the file holds otherwise. */
async function savedAs(s: Session, file: string, expected: string): Promise<void> {
  await s.page.locator('.editor-instance .monaco-editor .view-lines').click();
  await s.page.keyboard.press('Control+S');
  await s.page.locator('.tab.active:not(.dirty)').waitFor();
  await waitForFile(file, (text) => text === expected, 15_000);
}

describe('inline edit and Apply against a scripted chat server', () => {
  let fake: FakeLlamaServer;
  let s: Session;
  let file: string;

  before(async () => {
    fake = await startLlamaServer();
    s = await startSession({
      settings: { 'k3.backend': 'remote', 'k3.remote.endpoint': fake.base, 'k3.completions.enabled': false },
      files: { 'src/fib.py': ORIGINAL },
    });
    file = path.join(s.workspace, 'src/fib.py');
  });

  after(async () => {
    await s?.close();
    await fake?.close();
  });

  test('Ctrl+I on a selection streams a diff; Esc rejects it and the file is byte-identical', async () => {
    await step(s, 'reject', async () => {
      await waitForStatus(s, /^K3: Ready/, 120_000);
      await openFile(s, 'fib.py');
      fake.scripts.push({ pieces: pieces(FENCED), end: { done: true } });
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await lens(s, 'Accept All').waitFor({ timeout: 60_000 });
      const shown = await editorLines(s);
      assert.ok(shown.includes('def fib(n):') && shown.includes('def fib(n: int) -> int:'), `old and new lines both shown:\n${shown.join('\n')}`);
      await hunkLenses(s, 2);
      const sent = await fake.waitForRequest((r) => r.path === '/v1/chat/completions');
      const prompt = (sent.body?.messages as { content: string }[])[0]!.content;
      assert.match(prompt, /The selection:\n```python\ndef fib\(n\):\n    if n < 2:\n        return n\n    return fib\(n - 1\) \+ fib\(n - 2\)\n```/);
      await s.screenshot('inline-edit-1-diff');
      await s.page.keyboard.press('Escape');
      await lens(s, 'Accept All').waitFor({ state: 'detached' });
      await savedAs(s, file, ORIGINAL);
    });
  });

  test('Accept one hunk, then Accept All: the file is the rewrite; one Undo restores the original', async () => {
    await step(s, 'accept', async () => {
      fake.scripts.push({ pieces: pieces(FENCED), end: { done: true } });
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await lens(s, 'Accept All').waitFor({ timeout: 60_000 });
      await hunkLenses(s, 2);
      await lens(s, /^Accept$/).first().click();
      await hunkLenses(s, 1);
      await s.screenshot('inline-edit-2-one-hunk-accepted');
      await s.page.locator('.editor-instance .monaco-editor .view-lines').click();
      await s.page.keyboard.press('Control+Shift+Enter');
      await lens(s, 'Accept All').waitFor({ state: 'detached' });
      await savedAs(s, file, EDITED);
      await s.page.keyboard.press('Control+Z');
      await waitForLines(s, ['def fib(n):'], ['def fib(n: int) -> int:']);
      await savedAs(s, file, ORIGINAL);
    });
  });

  test('a reply without code, a stream that fails midway, and Esc while it streams each leave the file as it was', async () => {
    await step(s, 'not-applied', async () => {
      fake.scripts.push({ pieces: [{ content: 'That function has no types to add.' }], end: { done: true } });
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await s.page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'the reply holds no code to apply' }).waitFor({ timeout: 60_000 });
      await savedAs(s, file, ORIGINAL);

      fake.scripts.push({ pieces: pieces('```python\ndef fib(n: int) -> int:\n    if n'), end: { error: 'the slot was released' } });
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await s.page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'the edit failed, nothing changed' }).waitFor({ timeout: 60_000 });
      await savedAs(s, file, ORIGINAL);

      fake.scripts.push({ pieces: pieces('```python\ndef fib(n: int) -> int:\n    if n < 2:\n'), end: { stall: true } });
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await lens(s, 'Cancel (Esc)').waitFor({ timeout: 60_000 });
      await waitForLines(s, ['def fib(n):', 'def fib(n: int) -> int:'], []);
      await s.screenshot('inline-edit-3-streaming');
      await s.page.keyboard.press('Escape');
      await lens(s, 'Cancel (Esc)').waitFor({ state: 'detached' });
      await savedAs(s, file, ORIGINAL);
    });
  });

  test('Apply on a chat code block that names the file opens the diff; Accept All applies it', async () => {
    await step(s, 'apply', async () => {
      const whole = ORIGINAL.replace('print(fib(int(sys.argv[1])))', 'if __name__ == "__main__":\n    print(fib(int(sys.argv[1])))');
      fake.scripts.push({ pieces: pieces(`Guard the entry point:\n\n\`\`\`python src/fib.py\n${whole}\`\`\`\n`), end: { done: true } });
      await s.page.keyboard.press('Control+Home'); // no selection: Apply diffs the whole file
      await s.runCommand('K3 Chat: Focus on Chat View');
      const chat = s.chatFrame();
      await chat.locator('#send:not([disabled])').waitFor({ timeout: 60_000 });
      await chat.locator('#input').fill('guard the entry point of src/fib.py');
      await chat.locator('#input').press('Enter');
      const block = chat.locator('.message.assistant[data-state="done"] .content');
      await block.locator('.code-path', { hasText: 'src/fib.py' }).waitFor({ timeout: 60_000 });
      assert.ok((await block.locator('pre code span.hljs-keyword').count()) > 0, 'the block is highlighted');
      await s.screenshot('inline-edit-4-chat-block');
      await block.locator('button[data-action="apply"]').click();
      await lens(s, 'Accept All').waitFor({ timeout: 60_000 });
      await s.screenshot('inline-edit-5-apply-diff');
      await lens(s, 'Accept All').click();
      await lens(s, 'Accept All').waitFor({ state: 'detached' });
      await savedAs(s, file, whole);
    });
  });
});

describe('inline edit against k3 serve on the tiny fixture', () => {
  let serve: Serve;
  let s: Session;

  before(async () => {
    process.env.K3_ADDON ??= addonFile;
    serve = await startServe(ensureFixture({ gate: 'lowerbound' }));
    s = await startSession({
      settings: { 'k3.backend': 'remote', 'k3.remote.endpoint': `http://127.0.0.1:${serve.port}`, 'k3.completions.enabled': false, 'k3.chat.maxTokens': 24 },
      files: { 'src/fib.py': ORIGINAL },
    });
  });

  after(async () => {
    await s?.close();
    await serve?.stop();
  });

  test('the request goes through k3 serve; a reply with no finished code block changes nothing', async () => {
    await step(s, 'serve', async () => {
      await waitForStatus(s, /^K3: Ready/, 120_000);
      await openFile(s, 'fib.py');
      await selectLines(s, 4, 7);
      await askEdit(s, 'add type hints');
      await s.page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'the reply holds no code to apply' }).waitFor({ timeout: 120_000 });
      await s.screenshot('inline-edit-6-k3-serve');
      const file = path.join(s.workspace, 'src/fib.py');
      await savedAs(s, file, ORIGINAL);
    });
  });
});

describe('inline edit with k3-mini, a code-completion model', () => {
  let s: Session;

  before(async () => {
    s = await startSession({ settings: { 'k3.completions.enabled': false }, files: { 'src/fib.py': ORIGINAL } });
  });

  after(async () => {
    await s?.close();
  });

  test('Ctrl+I says the model cannot chat and offers the chat backend choice; nothing is asked', async () => {
    await step(s, 'k3-mini', async () => {
      await waitForStatus(s, /^K3: Ready/, 120_000);
      await openFile(s, 'fib.py');
      await selectLines(s, 4, 7);
      await s.page.keyboard.press('Control+I');
      const toast = s.page.locator('.notifications-toasts .notification-list-item', {
        hasText: 'k3-mini is a code-completion model, not trained for chat',
      });
      await toast.filter({ hasText: 'it cannot follow an edit instruction. Inline edit needs a chat model: a Kimi K3 model folder or a remote K3 server.' }).waitFor({ timeout: 60_000 });
      await toast.locator('.monaco-button', { hasText: 'Choose Chat Backend…' }).waitFor();
      await toast.locator('.monaco-button', { hasText: 'Choose Completion Backend…' }).waitFor();
      assert.equal(await s.page.locator('.quick-input-widget .quick-input-box input').isVisible(), false, 'no instruction was asked for');
      await s.screenshot('inline-edit-7-k3-mini');
    });
  });
});
