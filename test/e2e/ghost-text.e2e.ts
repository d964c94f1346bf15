// ghost-text.e2e.ts - ghost text in a real editor: with the tiny generated checkpoint loaded
// (random weights: the text is gibberish, the path is real), typing in a TypeScript file
// shows the engine's completion as ghost text after the debounce, and Tab inserts exactly
// that text into the document.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { ensureFixture } from '../support/fixtures';
import { startSession, step, waitForStatus, type Session } from './harness';

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

test('typing in a TypeScript file shows the engine completion as ghost text and Tab inserts it', async () => {
  await step(s, 'ghost-text', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    await s.page.keyboard.press('Control+P');
    await s.page.locator('.quick-input-widget .quick-input-box input').fill('hello.ts');
    await s.page.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'hello.ts' }).waitFor();
    await s.page.keyboard.press('Enter');
    await s.page.locator('.tab.active', { hasText: 'hello.ts' }).waitFor();
    await s.page.locator('.editor-instance .monaco-editor .view-lines').click();
    await s.page.keyboard.press('Control+End');
    await s.page.keyboard.type('const total = ', { delay: 60 });
    const ghost = s.page.locator('.ghost-text-decoration').first();
    await ghost.waitFor({ timeout: 90_000 });
    const shown = ((await ghost.textContent()) ?? '').replace(/\u00a0/g, ' ');
    assert.ok(shown.trim().length > 0, 'the ghost text is not blank');
    await s.screenshot('docs-ghost-text');
    await s.page.keyboard.press('Tab');
    await s.page.keyboard.press('Control+S');
    const file = path.join(s.workspace, 'src/hello.ts');
    await s.page.waitForFunction(() => !document.querySelector('.tab.active.dirty'));
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    const last = lines.filter((l) => l.startsWith('const total = ')).pop() ?? '';
    assert.ok(last.startsWith(`const total = ${shown}`), `line ${JSON.stringify(last)} holds the ghost text ${JSON.stringify(shown)}`);
  });
});
