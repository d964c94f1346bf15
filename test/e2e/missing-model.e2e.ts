// missing-model.e2e.ts - a model folder that does not exist: the extension does not crash
// or restart in a loop; it says what is wrong in the status bar and a notification with the
// ways out, and "Use Default Model" takes it back to the embedded default model.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startSession, step, waitForStatus, type Session } from './harness';

const MISSING = '/nonexistent/k3-model';
let s: Session;

before(async () => {
  s = await startSession({ settings: { 'k3.modelPath': MISSING }, files: { 'a.ts': 'const a = 1;\n' } });
});

after(async () => {
  await s?.close();
});

test('a missing model folder shows the action in a notification and the status bar, not a crash', async () => {
  await step(s, 'missing-model', async () => {
    const label = await waitForStatus(s, /does not exist/);
    assert.ok(label.includes(MISSING), label);
    assert.match(await s.statusItem().innerText(), /no model/);
    const toast = s.page.locator('.notifications-toasts .notification-list-item', { hasText: 'does not exist' });
    await toast.waitFor();
    for (const action of ['Select Model Folder', 'Use Default Model']) {
      await toast.locator('.monaco-button', { hasText: action }).waitFor();
    }
    await s.screenshot('docs-missing-model');
    await toast.locator('.monaco-button', { hasText: 'Use Default Model' }).click();
    // The setting is cleared and the engine starts without a model folder.
    await waitForStatus(s, /^K3: (?!Starting)(?!.*does not exist)/);
  });
});
