// warmup.test.ts - what the extension tells the server for warm-up (extension/warmup.ts):
// switching through editors sends one k3/context/didChange, for the editor stopped at, with
// its cursor and version; an accept sends k3/completion/didAccept with the cursor after the
// accepted text; with k3.completions.warmup off, completions off or a language where ghost
// text is off, nothing. Timers are Node's mock timers: no waiting.
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import type { CompletionPositionParams } from '../../protocol/lsp';
import type { CompletionSettings } from '../../extension/settings';
import { CONTEXT_DEBOUNCE_MS, WarmupNotifier } from '../../extension/warmup';

function editor(uri: string, version: number, line: number, character: number, languageId = 'python') {
  return {
    document: { uri: { toString: () => uri, scheme: 'file' }, version, languageId },
    selection: { active: { line, character } },
  } as never;
}

function setup(over: Partial<CompletionSettings> = {}) {
  const sent: Array<[string, CompletionPositionParams]> = [];
  let active: unknown;
  const settings: CompletionSettings = { enabled: true, disabledLanguages: ['markdown'], multiline: 'auto', maxLines: 8, debounceMs: null, warmup: true, remoteRoute: 'auto', ...over };
  const n = new WarmupNotifier({ settings: () => settings, sendNotification: (m, p) => sent.push([m, p]), activeEditor: () => active as never });
  return { n, sent, setActive: (e: unknown) => (active = e) };
}

test('switching through editors sends one context change, for the editor the user stops at', () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const { n, sent, setActive } = setup();
    const a = editor('file:///a.py', 3, 1, 2);
    const b = editor('file:///b.py', 7, 10, 4);
    setActive(a);
    n.editorChanged(a);
    mock.timers.tick(CONTEXT_DEBOUNCE_MS - 1);
    setActive(b);
    n.editorChanged(b);
    mock.timers.tick(CONTEXT_DEBOUNCE_MS);
    assert.deepEqual(sent, [['k3/context/didChange', { uri: 'file:///b.py', version: 7, position: { line: 10, character: 4 } }]]);
    n.dispose();
  } finally {
    mock.timers.reset();
  }
});

test('an accept sends the cursor after the accepted text in the active editor', () => {
  const { n, sent, setActive } = setup();
  setActive(editor('file:///a.py', 4, 2, 17));
  n.accepted();
  assert.deepEqual(sent, [['k3/completion/didAccept', { uri: 'file:///a.py', version: 4, position: { line: 2, character: 17 } }]]);
});

test('with warm-up off, completions off or a language where ghost text is off, nothing is sent', () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    for (const [over, lang] of [[{ warmup: false }, 'python'], [{ enabled: false }, 'python'], [{}, 'markdown']] as const) {
      const { n, sent, setActive } = setup(over);
      const e = editor('file:///a.md', 1, 0, 0, lang);
      setActive(e);
      n.editorChanged(e);
      mock.timers.tick(CONTEXT_DEBOUNCE_MS);
      n.accepted();
      assert.deepEqual(sent, [], JSON.stringify([over, lang]));
    }
  } finally {
    mock.timers.reset();
  }
});
