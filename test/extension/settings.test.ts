// settings.test.ts - extension/settings.ts reads the `k3` section into checked values: the
// defaults, wrong types falling back, the debounce clamped, and a workspace model folder,
// backend or remote endpoint ignored in an untrusted workspace, and each role's backend
// (ghost text, chat) from its own setting or migrated from the older single k3.backend.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readSettings, serverSection, type ConfigurationSource } from '../../extension/settings';

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
    backend: 'local',
    remote: { endpoint: 'http://127.0.0.1:8080', model: '', timeoutMs: 60000 },
    roles: {
      completions: { backend: 'embedded', source: 'default', remote: { endpoint: 'http://127.0.0.1:8080', model: '', timeoutMs: 60000 } },
      chat: { backend: 'embedded', source: 'default', remote: { endpoint: 'http://127.0.0.1:8080', model: '', timeoutMs: 60000 } },
    },
    remoteIgnored: false,
    modelPath: '',
    modelPathIgnored: false,
    preset: 'auto',
    presetExplicit: false,
    completions: { enabled: true, disabledLanguages: ['plaintext', 'markdown', 'scminput'], multiline: 'auto', maxLines: 8, debounceMs: null, warmup: true, remoteRoute: 'auto' },
    chat: { maxTokens: 4096, maxContext: 32768 },
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
      'completions.maxLines': { global: 'many' },
      'completions.debounceMs': { global: 'fast' },
      'chat.maxTokens': { global: 'lots' },
    }),
    true,
  );
  assert.equal(s.chat.maxTokens, 4096);
  assert.equal(s.modelPath, '');
  assert.equal(s.preset, 'auto');
  assert.equal(s.completions.enabled, true);
  assert.deepEqual(s.completions.disabledLanguages, ['plaintext', 'markdown', 'scminput']);
  assert.equal(s.completions.multiline, 'auto');
  assert.equal(s.completions.maxLines, 8);
  assert.equal(s.completions.debounceMs, null);
});

test('set values are read, trimmed and clamped', () => {
  const s = readSettings(
    config({
      modelPath: { global: '  /models/k3  ' },
      preset: { workspace: 'laptop' },
      'completions.enabled': { global: false },
      'completions.disabledLanguages': { global: ['python', 7, 'go'] },
      'completions.multiline': { global: 'never' },
      'completions.maxLines': { global: 500 },
      'completions.debounceMs': { global: 99999.4 },
      'completions.warmup': { global: false },
      'completions.remote.route': { global: 'infill' },
      'chat.maxTokens': { global: 700.4 },
      'chat.maxContext': { global: 100 },
    }),
    true,
  );
  assert.equal(s.chat.maxTokens, 700);
  assert.equal(s.chat.maxContext, 256, 'the chat context is at least 256 positions, as the server holds');
  assert.deepEqual(
    serverSection(s),
    { completions: { multiline: 'never', maxLines: 100, warmup: false, remoteRoute: 'infill' }, chat: { maxTokens: 700, maxContext: 256 } },
    'the completion shape, k3.completions.warmup, k3.completions.remote.route, k3.chat.maxTokens and maxContext reach the server',
  );
  assert.equal(readSettings(config({ 'chat.maxTokens': { global: 3 } }), true).chat.maxTokens, 16);
  assert.equal(s.modelPath, '/models/k3');
  assert.equal(s.preset, 'laptop');
  assert.equal(s.presetExplicit, true);
  assert.equal(s.completions.enabled, false);
  assert.deepEqual(s.completions.disabledLanguages, ['python', 'go']);
  assert.equal(s.completions.multiline, 'never');
  assert.equal(s.completions.debounceMs, 10000);
  assert.equal(readSettings(config({ 'completions.debounceMs': { global: -5 } }), true).completions.debounceMs, 0);
});

test('the boolean k3.completions.multiline of earlier versions reads as a mode: true always, false auto', () => {
  assert.equal(readSettings(config({ 'completions.multiline': { global: true } }), true).completions.multiline, 'always');
  assert.equal(readSettings(config({ 'completions.multiline': { global: false } }), true).completions.multiline, 'auto');
  assert.equal(readSettings(config({ 'completions.multiline': { global: 'always' } }), true).completions.multiline, 'always');
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

test('the remote backend settings are read and checked', () => {
  const s = readSettings(
    config({
      backend: { global: 'remote' },
      'remote.endpoint': { global: '  https://gpu.example/v1  ' },
      'remote.model': { global: ' moonshotai/Kimi-K3 ' },
      'remote.timeoutMs': { global: 12.4 },
    }),
    true,
  );
  assert.equal(s.backend, 'remote');
  assert.deepEqual(s.remote, { endpoint: 'https://gpu.example/v1', model: 'moonshotai/Kimi-K3', timeoutMs: 1000 });
  const odd = readSettings(config({ backend: { global: 'cloud' }, 'remote.endpoint': { global: 3 }, 'remote.timeoutMs': { global: 'soon' } }), true);
  assert.equal(odd.backend, 'local');
  assert.equal(odd.remote.endpoint, 'http://127.0.0.1:8080');
  assert.equal(odd.remote.timeoutMs, 60000);
});

test('a workspace backend or remote endpoint counts only in a trusted workspace: an untrusted repository cannot send code elsewhere', () => {
  const values = {
    backend: { default: 'local', workspace: 'remote' },
    'remote.endpoint': { default: 'http://127.0.0.1:8080', global: 'http://10.0.0.5:8000', folder: 'http://evil.example' },
  };
  const trusted = readSettings(config(values), true);
  assert.equal(trusted.backend, 'remote');
  assert.equal(trusted.remote.endpoint, 'http://evil.example');
  assert.equal(trusted.remoteIgnored, false);
  const untrusted = readSettings(config(values), false);
  assert.equal(untrusted.backend, 'local');
  assert.equal(untrusted.remote.endpoint, 'http://10.0.0.5:8000');
  assert.equal(untrusted.remoteIgnored, true);
});

test('migration: k3.backend remote makes both roles remote on the old server, with the old model', () => {
  const s = readSettings(config({ backend: { global: 'remote' }, 'remote.endpoint': { global: 'https://gpu:8000/v1' }, 'remote.model': { global: 'kimi-k3' } }), true);
  for (const role of ['completions', 'chat'] as const) {
    assert.deepEqual(s.roles[role], { backend: 'remote', source: 'migrated', remote: { endpoint: 'https://gpu:8000/v1', model: 'kimi-k3', timeoutMs: 60000 } });
  }
});

test('migration: a k3.modelPath with the local backend makes both roles local; nothing set gives embedded for both', () => {
  const local = readSettings(config({ modelPath: { global: '/models/k3' }, backend: { default: 'local', global: 'local' } }), true);
  assert.equal(local.roles.completions.backend, 'local');
  assert.equal(local.roles.chat.backend, 'local');
  assert.equal(local.roles.chat.source, 'migrated');
  const implicit = readSettings(config({ modelPath: { global: '/models/k3' }, backend: { default: 'local' } }), true);
  assert.equal(implicit.roles.completions.backend, 'local', 'k3.backend defaulted to local: a model folder still means that model');
  const none = readSettings(config({ backend: { default: 'local' }, 'completions.backend': { default: 'embedded' }, 'chat.backend': { default: 'embedded' } }), true);
  assert.equal(none.roles.completions.backend, 'embedded');
  assert.equal(none.roles.chat.backend, 'embedded');
  assert.equal(none.roles.chat.source, 'default');
});

test('a role\'s own setting wins over the older one, and a role\'s own endpoint over the shared one', () => {
  const s = readSettings(
    config({
      backend: { global: 'remote' },
      'remote.endpoint': { global: 'https://shared:8000' },
      'remote.model': { global: 'shared-model' },
      'completions.backend': { default: 'embedded', global: 'embedded' },
      'chat.backend': { default: 'embedded', global: 'remote' },
      'chat.remote.endpoint': { global: 'https://chat:9000/v1' },
    }),
    true,
  );
  assert.deepEqual(s.roles.completions, { backend: 'embedded', source: 'setting', remote: { endpoint: 'https://shared:8000', model: 'shared-model', timeoutMs: 60000 } });
  // Its own endpoint: the shared model id is not carried to another server.
  assert.deepEqual(s.roles.chat, { backend: 'remote', source: 'setting', remote: { endpoint: 'https://chat:9000/v1', model: '', timeoutMs: 60000 } });
  const withModel = readSettings(config({ 'chat.backend': { global: 'remote' }, 'chat.remote.endpoint': { global: 'https://chat:9000' }, 'chat.remote.model': { global: 'kimi-k3' } }), true);
  assert.equal(withModel.roles.chat.remote.model, 'kimi-k3');
});

test('an untrusted workspace cannot send a role to a server of its choosing', () => {
  const values = {
    'chat.backend': { default: 'embedded', workspace: 'remote' },
    'chat.remote.endpoint': { default: '', workspace: 'https://evil.example' },
  };
  const untrusted = readSettings(config(values), false);
  assert.equal(untrusted.roles.chat.backend, 'embedded');
  assert.equal(untrusted.roles.chat.remote.endpoint, 'http://127.0.0.1:8080');
  assert.equal(untrusted.remoteIgnored, true);
  const trusted = readSettings(config(values), true);
  assert.equal(trusted.roles.chat.backend, 'remote');
  assert.equal(trusted.roles.chat.remote.endpoint, 'https://evil.example');
});
