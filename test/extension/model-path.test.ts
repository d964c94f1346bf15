// model-path.test.ts - the model folder the extension hands the language server
// (extension/model-path.ts): the embedded k3-mini when k3.modelPath is empty with the
// local backend, never with the remote one (its tokenizer is not a K3 server's: issue 32),
// and the user's own folder with either.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serverModelPath } from '../../extension/model-path';

test('an empty k3.modelPath means the embedded model locally, and no tokenizer with a remote backend', () => {
  assert.equal(serverModelPath('local', '', '/ext/media/models/k3-mini'), '/ext/media/models/k3-mini');
  assert.equal(serverModelPath('remote', '', '/ext/media/models/k3-mini'), '');
});

test("the user's own k3.modelPath goes to the server with either backend", () => {
  assert.equal(serverModelPath('local', '/models/k3', '/ext/media/models/k3-mini'), '/models/k3');
  assert.equal(serverModelPath('remote', '/models/k3', '/ext/media/models/k3-mini'), '/models/k3');
});
