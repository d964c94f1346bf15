// ghost-quality.e2e.ts - ghost text a developer would accept, in the real editor with the
// embedded k3-mini and VS Code's auto-closing on (its default): after Enter the cursor
// stands after the new line's indentation, and the suggestion starts with code, not
// another space (token healing); typing `console.log(` auto-closes the `)`, and accepting a
// suggestion that writes `)` again leaves one (closer-aware ranges); a suggestion the model
// wrote as a loop is shown cut before the loop (the junk filter). Each is checked against
// what the installed extension's server answers for the same document.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, test } from 'node:test';
import type { InlineCompletionItem } from 'vscode-languageserver-protocol';
import type { CompletionStats } from '../../protocol/lsp';
import { ghostText, openFile, startSession, step, waitForFile, waitForStatus, type Session } from './harness';
import { installedServerAnswer } from './installed-server';

const STACK = 'export class Stack<T> {\n  private items: T[] = [];\n\n  push(item: T): void {\n  }\n}\n';
const TWICE = 'export function twice(x: number): number {\n  return x * 2;\n}\n';
const LOG = 'const items = [1, 2, 3];\n';

let s: Session;

/** A session per test with only that test's file, so the server's extra context (other
 * documents the editor opened) is the same as the one the test asks for comparison. */
async function session(file: string, text: string): Promise<void> {
  await s?.close();
  s = await startSession({ settings: { 'k3.completions.debounceMs': 1000 }, files: { [file]: text } });
}

after(async () => {
  await s?.close();
});



/** What the installed extension's server answers for `text` with the cursor at (line, character). */
async function serverAnswer(file: string, text: string, line: number, character: number): Promise<{ item: InlineCompletionItem; stats?: CompletionStats }> {
  const answer = await installedServerAnswer(s.workspace, file, 'typescript', text, { line, character });
  assert.equal(answer.items.length, 1, `the server offers one completion: ${JSON.stringify(answer.items)}`);
  return { item: answer.items[0], ...(answer.stats ? { stats: answer.stats } : {}) };
}

/** The line with the item accepted, as the editor applies it (its range replaces text). */
function accepted(lineText: string, item: InlineCompletionItem): string {
  const start = item.range?.start.character ?? lineText.length;
  const end = item.range?.end.character ?? start;
  return lineText.slice(0, start) + String(item.insertText) + lineText.slice(end);
}

test('after Enter, the suggestion at the new indentation starts with code and Tab inserts it', async () => {
  await session('src/stack.ts', STACK);
  await step(s, 'ghost-after-indent', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    await openFile(s, 'stack.ts');
    // The end of `push(item: T): void {`, then Enter: the editor indents the new line.
    await s.page.keyboard.press('Control+Home');
    for (let i = 0; i < 3; i++) await s.page.keyboard.press('ArrowDown');
    await s.page.keyboard.press('End');
    await s.page.keyboard.press('Enter');
    const shown = await ghostText(s, 90_000);
    assert.match(shown, /^\S/, `the suggestion starts with code: ${JSON.stringify(shown)}`);
    await s.screenshot('docs-ghost-after-indent');
    await s.page.keyboard.press('Tab');
    await s.page.keyboard.press('Control+S');
    const lines = STACK.split('\n');
    const indent = '    ';
    const text = [...lines.slice(0, 4), indent, ...lines.slice(4)].join('\n');
    const { item, stats } = await serverAnswer('src/stack.ts', text, 4, indent.length);
    assert.equal(stats?.healedText, indent, 'the server healed the indentation');
    const want = [...lines.slice(0, 4), accepted(indent, item), ...lines.slice(4)].join('\n');
    await waitForFile(path.join(s.workspace, 'src/stack.ts'), (t) => t === want, 30_000);
  });
});

test('a `)` that auto-closing put after the cursor is not doubled when the suggestion writes it too', async (t) => {
  await session('src/log.ts', LOG);
  await step(s, 'ghost-closer', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    await openFile(s, 'log.ts');
    await s.page.keyboard.press('Control+End');
    await s.page.keyboard.type('console.log(', { delay: 60 });
    await ghostText(s, 90_000);
    await s.screenshot('docs-ghost-closer');
    await s.page.keyboard.press('Tab');
    await s.page.keyboard.press('Control+S');
    const line = 'console.log()';
    const { item } = await serverAnswer('src/log.ts', LOG + line, 1, 'console.log('.length);
    const done = accepted(line, item);
    t.diagnostic(`answer ${JSON.stringify(item.insertText)}, range ${JSON.stringify(item.range)}: the line becomes ${JSON.stringify(done)}`);
    // k3-mini writes `'s');`: the item replaces the `)` instead of adding a second one.
    const opens = done.split('(').length - 1;
    const closes = done.split(')').length - 1;
    assert.equal(closes, opens, `one ")" per "(": ${JSON.stringify(done)} from ${JSON.stringify(item)}`);
    await waitForFile(path.join(s.workspace, 'src/log.ts'), (text) => text === LOG + done, 30_000);
  });
});

test('a suggestion the model wrote as a loop is shown cut before the loop', async () => {
  await session('src/twice.ts', TWICE);
  await step(s, 'ghost-loop', async () => {
    await waitForStatus(s, /^K3: Ready/, 120_000);
    await openFile(s, 'twice.ts');
    await s.page.keyboard.press('Control+End');
    await s.page.keyboard.type('const y = twice(', { delay: 60 });
    const shown = await ghostText(s, 90_000);
    const { item, stats } = await serverAnswer('src/twice.ts', `${TWICE}const y = twice()`, 3, 'const y = twice('.length);
    assert.deepEqual(stats?.filtered, { rule: 'line-loop', action: 'cut' }, 'k3-mini loops here and the filter cut it');
    assert.ok(!/(.{3,}?)\1{5,}/.test(shown), `no loop on screen: ${JSON.stringify(shown)}`);
    if (item.range?.start.character === item.range?.end.character) assert.equal(shown.replace(/\s+/g, ' '), String(item.insertText).replace(/\s+/g, ' '));
  });
});
