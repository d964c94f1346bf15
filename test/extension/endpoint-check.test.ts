// endpoint-check.test.ts - extension/endpointCheck.ts, which "K3: Choose … Backend" runs
// before saving a remote endpoint: the URL it asks (/v1 added once), the model ids of a
// listing, and a message in the user's words for each way it fails, against a real HTTP
// server on a loopback port (and a closed port).
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { checkEndpoint, modelsUrl, networkReason } from '../../extension/endpointCheck';
import { closedPort } from '../serve/remote-client';

/** Answers by path: what each test's endpoint returns for GET <path>/v1/models. */
const answers: Record<string, { status: number; body: string }> = {
  '/ok/v1/models': { status: 200, body: JSON.stringify({ object: 'list', data: [{ id: 'kimi-k3' }, { id: 'k3-mini' }] }) },
  '/key/v1/models': { status: 401, body: '{"error":"Unauthorized"}' },
  '/html/v1/models': { status: 200, body: '<html>a login page</html>' },
  '/empty/v1/models': { status: 200, body: '{"data":[]}' },
  '/gone/v1/models': { status: 404, body: 'not found' },
};
let server: http.Server;
let base: string;
const seen: Array<string | undefined> = [];

before(async () => {
  server = http.createServer((req, res) => {
    seen.push(req.headers.authorization);
    const a = answers[req.url ?? ''] ?? { status: 404, body: '' };
    res.writeHead(a.status, { 'content-type': 'application/json' });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

test('the listing is asked at <endpoint>/v1/models, /v1 added only when missing', () => {
  assert.equal(String(modelsUrl('http://gpu:8000')), 'http://gpu:8000/v1/models');
  assert.equal(String(modelsUrl('https://gpu/api/v1/')), 'https://gpu/api/v1/models');
  assert.equal(String(modelsUrl('gpu:8000')), 'the endpoint must be an http:// or https:// URL, not gpu:');
  assert.match(String(modelsUrl('not a url')), /is not a URL/);
});

test('a server that lists models gives their ids, and the key goes as a bearer token', async () => {
  assert.deepEqual(await checkEndpoint(`${base}/ok`, 'sesame', 5000), { ok: true, models: ['kimi-k3', 'k3-mini'] });
  assert.equal(seen.at(-1), 'Bearer sesame');
});

test('each failure says what happened, naming the URL', async () => {
  const fail = async (endpoint: string): Promise<string> => {
    const r = await checkEndpoint(endpoint, undefined, 5000);
    assert.equal(r.ok, false);
    return r.ok ? '' : r.message;
  };
  assert.match(await fail(`${base}/key`), /\/key\/v1\/models refused the API key \(HTTP 401\)/);
  assert.match(await fail(`${base}/html`), /did not answer JSON/);
  assert.match(await fail(`${base}/empty`), /lists no model/);
  assert.match(await fail(`${base}/gone`), /answered HTTP 404: is this an OpenAI-compatible API\?/);
  assert.match(await fail(`http://127.0.0.1:${await closedPort()}`), /failed: connection refused \(is the server running, and listening on that port\?\) \[ECONNREFUSED\]/);
});

test('a network failure is named from wherever fetch put the system code', () => {
  const failed = (cause?: unknown): Error => Object.assign(new TypeError('fetch failed'), cause === undefined ? {} : { cause });
  assert.equal(networkReason(failed({ code: 'ENOTFOUND' })), 'no such host [ENOTFOUND]');
  // Several addresses tried (IPv4 and IPv6): an AggregateError whose errors carry the codes.
  assert.match(networkReason(failed({ errors: [{ code: 'ECONNREFUSED' }, { code: 'ECONNREFUSED' }] })), /^connection refused .*\[ECONNREFUSED\]$/);
  assert.equal(networkReason(failed({ code: 'EPROTO' })), 'EPROTO', 'an unknown code as it is');
  assert.equal(networkReason(failed({ message: 'other side closed' })), 'other side closed');
  assert.equal(networkReason(failed()), 'fetch failed', 'nothing better to say');
});
