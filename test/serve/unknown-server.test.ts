// unknown-server.test.ts - the key check on a server the remote backend does not know (its
// /v1/models names no known owner): when the listing itself needs the key, that is the whole
// check; only when the listing answers without a key does one `max_tokens: 1` completion
// tell whether the key is accepted (docs/REMOTE.md, row "key"). Driven as the editor
// drives the language server.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RemoteApiKeyRequest } from '../../protocol/lsp';
import { TEST_TIMEOUT_MS } from '../support/lsp';
import { event, json, startEvents, startFake } from './fakes/core';
import { remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };
const KEY = 'their-key-31';

/** A server of unknown make: `/v1/models` open or not, generations always behind the key. */
function unknownServer(listingNeedsKey: boolean) {
  return startFake((r, res) => {
    const keyed = r.key === KEY;
    if (r.path === '/v1/models') {
      if (listingNeedsKey && !keyed) return json(res, 401, { error: { message: 'bad key' } });
      return json(res, 200, { object: 'list', data: [{ id: 'k3', object: 'model', owned_by: 'someone' }] });
    }
    if (!keyed) return json(res, 403, { error: { message: 'bad key' } });
    if (r.body?.stream !== true) return json(res, 200, { choices: [{ text: 'x', finish_reason: 'length' }] });
    startEvents(res);
    event(res, { choices: [{ text: 'ok', finish_reason: 'stop' }] });
    event(res, '[DONE]');
    res.end();
  });
}

test('an unknown server whose listing needs the key is checked by the listing alone', T, async () => {
  const fake = await unknownServer(true);
  await withLanguageServer(
    remoteInit(fake.base, { apiKey: 'wrong-32' }),
    async (ls) => {
      assert.equal((await ls.waitForStatus((x) => x.phase === 'error')).error?.kind, 'remote-unauthorized');
      assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 0);
    },
    fake,
  );
});

test('an unknown server that lists without a key has the key checked with one one-token completion', T, async () => {
  const fake = await unknownServer(false);
  await withLanguageServer(
    remoteInit(fake.base, { apiKey: 'wrong-33' }),
    async (ls) => {
      assert.equal((await ls.waitForStatus((x) => x.phase === 'error')).error?.kind, 'remote-unauthorized');
      const posts = fake.requests.filter((r) => r.method === 'POST');
      assert.deepEqual(
        posts.map((r) => [r.path, r.body?.max_tokens]),
        [['/v1/completions', 1]],
      );
      assert.deepEqual(await ls.connection.sendRequest(RemoteApiKeyRequest.type, { apiKey: KEY }), { phase: 'ready' });
      assert.ok(ls.logs.some((l) => l.includes('lists its models without the API key; the key was checked with a one-token completion')));
    },
    fake,
  );
});
