// remote-infill.test.ts - the decisions of server/remote/infill.ts on their own: which route
// serves completions for each setting, server, prompt verdict and /infill probe; how the
// probe reads llama-server's answers (server-context.cpp post_infill checks the FIM tokens
// first, then the request); and the suffix cut to its line and token bounds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FIM_SUFFIX_LINES, FIM_SUFFIX_TOKENS } from '../../server/completion/layout';
import { TextEstimate } from '../../server/remote/completion';
import { RemoteError } from '../../server/remote/http';
import { chooseRoute, infillSuffix, probeInfill } from '../../server/remote/infill';
import type { PromptVerdict } from '../../server/remote/tokenizer-check';

const TEXT: PromptVerdict = { prompts: 'text', reason: 'no K3 tokenizer is known here' };
const IDS: PromptVerdict = { prompts: 'ids', evidence: 'its vocabulary has 8448 tokens' };

test('auto picks /infill only for a llama-server that answers it while prompts go as text', () => {
  assert.deepEqual(chooseRoute('auto', 'llama-server', TEXT, { state: 'yes' }), {
    route: 'infill',
    reason: "auto: llama-server answers /infill with the model's own FIM tokens, and prompts would go as text (no K3 tokenizer is known here)",
  });
  assert.equal(chooseRoute('auto', 'llama-server', IDS, { state: 'yes' }).route, 'completions', 'ids: our own layout');
  assert.equal(chooseRoute('auto', 'vllm', TEXT, { state: 'unknown', reason: 'vLLM is not llama-server' }).reason, 'auto: /infill is llama-server\'s, and this server is vllm');
  assert.match(chooseRoute('auto', 'llama-server', TEXT, { state: 'unknown', reason: 'the /infill probe failed (timeout)' }).reason, /^auto: \/infill has not answered yet \(the \/infill probe failed/);
  assert.deepEqual(chooseRoute('auto', 'llama-server', TEXT, { state: 'no', reason: 'HTTP 501: Infill is not supported by this model' }), {
    route: 'completions',
    reason: 'the server refused /infill: HTTP 501: Infill is not supported by this model',
  });
});

test('the setting forces a route; a refusal still moves a forced /infill to /v1/completions, saying both', () => {
  assert.equal(chooseRoute('completions', 'llama-server', TEXT, { state: 'yes' }).route, 'completions');
  assert.deepEqual(chooseRoute('infill', 'vllm', IDS, { state: 'unknown', reason: 'not probed' }), { route: 'infill', reason: 'k3.completions.remote.route is infill' });
  assert.deepEqual(chooseRoute('infill', 'llama-server', IDS, { state: 'no', reason: 'no /infill route (HTTP 404)' }), {
    route: 'completions',
    reason: 'k3.completions.remote.route is infill, but the server refused /infill: no /infill route (HTTP 404)',
  });
});

test('the probe reads 400 about input_extra as FIM tokens present, 501 and 404 as refusals, anything else as unknown', async () => {
  const answering = (e: Error | undefined) => async (path: string, body: unknown): Promise<unknown> => {
    assert.equal(path, '../infill');
    assert.equal(typeof (body as { input_extra: unknown }).input_extra, 'string', 'an input_extra llama-server refuses before anything runs');
    if (e) throw e;
    return {};
  };
  const extra = new RemoteError('bad-request', 'rejected', 400, '"input_extra" must be an array of {"filename": string, "text": string}');
  assert.deepEqual(await probeInfill(answering(extra)), { state: 'yes' });
  assert.deepEqual(await probeInfill(answering(undefined)), { state: 'yes' });
  const fim = new RemoteError('server', 'failed', 501, 'Infill is not supported by this model: prefix token is missing. ');
  assert.deepEqual(await probeInfill(answering(fim)), { state: 'no', reason: 'HTTP 501: Infill is not supported by this model: prefix token is missing.' });
  const route = new RemoteError('not-found', 'no such route', 404, 'File Not Found');
  assert.deepEqual(await probeInfill(answering(route)), { state: 'no', reason: 'no /infill route (HTTP 404: File Not Found)' });
  const busy = new RemoteError('busy', 'POST /infill: the server is busy (HTTP 503)', 503);
  assert.deepEqual(await probeInfill(answering(busy)), { state: 'unknown', reason: 'the /infill probe failed (POST /infill: the server is busy (HTTP 503))' });
});

test('the suffix is the rest of the line and the lines below, whole lines dropped past the token bound', () => {
  const enc = new TextEstimate();
  assert.equal(infillSuffix(enc, ')', ['', 'print(1)']), ')\n\nprint(1)');
  const below = Array.from({ length: 40 }, (_, i) => `x${i}`);
  assert.equal(infillSuffix(enc, '', below).split('\n').length, 1 + FIM_SUFFIX_LINES, 'at most FIM_SUFFIX_LINES lines below');
  const long = Array.from({ length: 10 }, () => 'y'.repeat(60));
  const cut = infillSuffix(enc, 'z', long);
  assert.ok(enc.encode(cut).length <= FIM_SUFFIX_TOKENS, `${enc.encode(cut).length} tokens`);
  assert.equal(cut, ['z', ...long.slice(0, cut.split('\n').length - 1)].join('\n'), 'whole lines dropped from the end');
  const one = infillSuffix(enc, 'w'.repeat(1000), []);
  assert.equal(one.length, FIM_SUFFIX_TOKENS * 3, 'a single long line cut to the bound');
});
