// ghost-text.e2e.ts - ghost text in a real editor: with no k3.modelPath set, the extension
// runs its embedded default model (media/models/k3-mini, trained by the project), and typing
// in a TypeScript file shows the engine's completion as ghost text after the debounce, and
// Tab inserts exactly that text into the document. "The engine's completion" is checked against the installed
// extension's server, started from this process and asked for the same document at the
// same position.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { ghostText, startSession, step, waitForFile, waitForStatus, type Session } from './harness';
import { installedServerAnswer } from './installed-server';

const ORIGINAL = 'export function add(a: number, b: number): number {\n  return a + b;\n}\n';
const TYPED = 'const total = ';
const FILE = 'src/hello.ts';

let s: Session;

before(async () => {
  s = await startSession({
    // A fixed debounce far above the keystroke gap: one request, for the whole typed line,
    // rather than one for a shorter prefix whose answer the cache could serve type-through.
    settings: { 'k3.completions.debounceMs': 1000 },
    files: { [FILE]: ORIGINAL },
  });
});

after(async () => {
  await s?.close();
});

/** What the installed extension's server completes for `text` at its end, seeing the workspace as the extension does. */
async function serverCompletion(workspace: string, text: string): Promise<string> {
  const { items } = await installedServerAnswer(workspace, FILE, 'typescript', text);
  assert.equal(items.length, 1, `the server offers one completion: ${JSON.stringify(items)}`);
  const insert = items[0].insertText;
  assert.equal(typeof insert, 'string');
  return insert as string;
}


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
    await s.page.keyboard.type(TYPED, { delay: 60 });
    const shown = await ghostText(s, 90_000);
    await s.screenshot('docs-ghost-text');
    await s.page.keyboard.press('Tab');
    await s.page.keyboard.press('Control+S');

    const expected = await serverCompletion(s.workspace, ORIGINAL + TYPED);
    assert.notEqual(expected.trim(), '', 'the engine completes this line with text');
    // The editor draws a tab or a run of spaces as non-breaking spaces of its own width.
    const flat = (t: string) => t.replace(/\s+/g, ' ');
    assert.equal(flat(shown), flat(expected), 'the ghost text is the engine completion');
    // Saved: the typed line followed by exactly the completion.
    await waitForFile(path.join(s.workspace, FILE), (text) => text === ORIGINAL + TYPED + expected, 30_000);
  });
});
