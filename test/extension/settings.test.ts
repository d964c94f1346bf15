// settings.test.ts - extension/settings.ts reads the `k3` section into checked values: the
// defaults, wrong types falling back, the debounce clamped, and a workspace model folder
// ignored in an untrusted workspace.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readSettings, type ConfigurationSource } from '../../extension/settings';

interface Layers {
  default?: unknown;
  global?: unknown;
  workspace?: unknown;
  folder?: unknown;
}

/** A fake configuration: `get` returns the narrowest value set, `inspect` every layer. */
function config(values: Record<string, Layers>): ConfigurationSource {
  const get = (key: string, fallback?: unknown) => {
    const v = values[key];
    return v?.folder ?? v?.workspace ?? v?.global ?? v?.default ?? fallback;
  };
  const inspect = (key: string) => {
    const v = values[key];
    return v === undefined
      ? undefined
      : { key, defaultValue: v.default, globalValue: v.global, workspaceValue: v.workspace, workspaceFolderValue: v.folder };
  };
  return { get, inspect } as unknown as ConfigurationSource;
}

test('an empty configuration gives the documented defaults', () => {
  const s = readSettings(config({}), true);
  assert.deepEqual(s, {
    modelPath: '',
    modelPathIgnored: false,
    preset: 'auto',
    presetExplicit: false,
    completions: { enabled: true, disabledLanguages: ['plaintext', 'markdown', 'scminput'], multiline: false, debounceMs: null },
  });
});

test('values of the wrong type fall back to the defaults', () => {
  const s = readSettings(
    config({
      modelPath: { global: 42 },
      preset: { global: ['laptop'] },
      'completions.enabled': { global: 'yes' },
      'completions.disabledLanguages': { global: 'python' },
      'completions.multiline': { global: 1 },
      'completions.debounceMs': { global: 'fast' },
    }),
    true,
  );
  assert.equal(s.modelPath, '');
  assert.equal(s.preset, 'auto');
  assert.equal(s.completions.enabled, true);
  assert.deepEqual(s.completions.disabledLanguages, ['plaintext', 'markdown', 'scminput']);
  assert.equal(s.completions.multiline, false);
  assert.equal(s.completions.debounceMs, null);
});

test('set values are read, trimmed and clamped', () => {
  const s = readSettings(
    config({
      modelPath: { global: '  /models/k3  ' },
      preset: { workspace: 'laptop' },
      'completions.enabled': { global: false },
      'completions.disabledLanguages': { global: ['python', 7, 'go'] },
      'completions.multiline': { global: true },
      'completions.debounceMs': { global: 99999.4 },
    }),
    true,
  );
  assert.equal(s.modelPath, '/models/k3');
  assert.equal(s.preset, 'laptop');
  assert.equal(s.presetExplicit, true);
  assert.equal(s.completions.enabled, false);
  assert.deepEqual(s.completions.disabledLanguages, ['python', 'go']);
  assert.equal(s.completions.multiline, true);
  assert.equal(s.completions.debounceMs, 10000);
  assert.equal(readSettings(config({ 'completions.debounceMs': { global: -5 } }), true).completions.debounceMs, 0);
});

test('a workspace model folder counts only in a trusted workspace', () => {
  const values = { modelPath: { default: '', global: '/home/me/k3', workspace: '/repo/evil' } };
  const trusted = readSettings(config(values), true);
  assert.equal(trusted.modelPath, '/repo/evil');
  assert.equal(trusted.modelPathIgnored, false);
  const untrusted = readSettings(config(values), false);
  assert.equal(untrusted.modelPath, '/home/me/k3');
  assert.equal(untrusted.modelPathIgnored, true);
  const folderOnly = readSettings(config({ modelPath: { default: '', folder: '/repo/evil' } }), false);
  assert.equal(folderOnly.modelPath, '');
  assert.equal(folderOnly.modelPathIgnored, true);
  const userOnly = readSettings(config({ modelPath: { default: '', global: '/home/me/k3' } }), false);
  assert.equal(userOnly.modelPath, '/home/me/k3');
  assert.equal(userOnly.modelPathIgnored, false);
});
