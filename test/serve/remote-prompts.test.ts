// remote-prompts.test.ts - completion prompts go to a remote server as token ids only when
// the local tokenizer is proven to be the server's (issue 32, the bug first): without a
// local K3 tokenizer they go as text; with one the server's tokenize route confirms, as
// ids; with k3-mini's tokenizer (what the extension used to pass) against a server that
// tokenizes as K3, or a vocabulary size that differs, or a server that can prove nothing,
// as text with the reason in the status and the log; and a request made before the check
// finished goes as text. Against the fakes of test/serve/fakes, awaiting events.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { StatusRequest } from '../../protocol/lsp';
import { Tokenizer } from '../../server/engine/tokenizer';
import { PROBE_TEXT } from '../../server/remote/tokenizer-check';
import { ensureFixture } from '../support/fixtures';
import type { ServerHandle } from '../support/lsp';
import { TEST_TIMEOUT_MS } from '../support/lsp';
import { repoRoot } from '../support/paths';
import type { FakeServer } from './fakes/core';
import { startLlamaServer } from './fakes/llama-server';
import { startSglang } from './fakes/sglang';
import { startVllm } from './fakes/vllm';
import { remoteInit, withLanguageServer } from './remote-client';

const T = { timeout: TEST_TIMEOUT_MS };
/** A folder holding the K3 tokenizer (the fixture's), and the embedded k3-mini (8,448 tokens). */
const k3Dir = ensureFixture({ gate: 'lowerbound' });
const miniDir = path.join(repoRoot, 'media', 'models', 'k3-mini');
const k3 = Tokenizer.open(k3Dir);
const mini = Tokenizer.open(miniDir);
after(() => {
  k3.close();
  mini.close();
});
const k3Tokenize = (text: string): number[] => Array.from(k3.encode(text, false));

/** Completes once in a small file and returns the prompt the server was sent. */
async function sentPrompt(ls: ServerHandle, fake: FakeServer, uri: string): Promise<unknown> {
  await ls.open(uri, 'python', 'import os\n\ndef main():\n    return ');
  const from = fake.requests.length;
  await ls.complete(uri, 3, 11);
  const r = await fake.waitForRequest((x) => fake.requests.indexOf(x) >= from && x.path === '/v1/completions');
  return r.body?.prompt;
}

test('without a local K3 tokenizer, prompts go as text, and the status says why', T, async () => {
  const fake = await startVllm({ tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.prompts, 'text');
      assert.match(s.remote?.promptsReason ?? '', /no K3 tokenizer is known here/);
      assert.equal(typeof (await sentPrompt(ls, fake, 'file:///w/a.py')), 'string');
    },
    fake,
  );
});

test('a local tokenizer the server tokenizes a probe text with identically: prompts go as token ids', T, async () => {
  const fake = await startVllm({ tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base, {}, k3Dir),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.prompts === 'ids');
      assert.equal(s.remote?.promptsReason, undefined);
      const probe = await fake.waitForRequest((r) => r.path === '/tokenize');
      assert.equal(probe.body?.prompt, PROBE_TEXT);
      assert.ok(Array.isArray(await sentPrompt(ls, fake, 'file:///w/b.py')), 'the prompt went as ids');
      await ls.waitFor(ls.logs, (l) => /prompts go as token ids: the server's tokenizer is the local one \(it tokenizes a probe text as the local tokenizer does/.test(l));
    },
    fake,
  );
});

test("k3-mini's tokenizer against a server that tokenizes as K3 (the reported bug): prompts go as text, with the reason", T, async () => {
  const fake = await startVllm({ tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base, {}, miniDir),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.prompts, 'text');
      assert.match(s.remote?.promptsReason ?? '', /^the server tokenizes a probe text as \[[^\]]*\](?: \(\d+ ids\))?, the local tokenizer as \[[^\]]*\](?: \(\d+ ids\))?: they are not the same tokenizer$/);
      assert.equal(typeof (await sentPrompt(ls, fake, 'file:///w/c.py')), 'string', 'no k3-mini ids sent to a K3 server');
      await ls.waitFor(ls.logs, (l) => l.startsWith('remote backend: prompts go as text: the server tokenizes a probe text as'));
    },
    fake,
  );
});

test('a vocabulary size the server publishes that differs from the local tokenizer: text, naming both sizes', T, async () => {
  const fake = await startLlamaServer({ nVocab: k3.vocabSize, tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base, {}, miniDir),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.prompts, 'text');
      assert.equal(
        s.remote?.promptsReason,
        `the server's vocabulary has ${k3.vocabSize} tokens, the local tokenizer's ${mini.vocabSize}: they are not the same tokenizer`,
      );
      assert.equal(typeof (await sentPrompt(ls, fake, 'file:///w/d.py')), 'string');
    },
    fake,
  );
});

test('llama-server publishing the same vocabulary and tokenizing the probe identically: ids', T, async () => {
  const fake = await startLlamaServer({ nVocab: k3.vocabSize, tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base, {}, k3Dir),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.prompts === 'ids');
      assert.equal((await fake.waitForRequest((r) => r.path === '/tokenize')).body?.content, PROBE_TEXT);
      assert.ok(Array.isArray(await sentPrompt(ls, fake, 'file:///w/e.py')));
    },
    fake,
  );
});

test('a server that can prove nothing (no vocabulary published, no tokenize route): text, saying so', T, async () => {
  const fake = await startSglang();
  await withLanguageServer(
    remoteInit(fake.base, {}, k3Dir),
    async (ls) => {
      const s = await ls.waitForStatus((x) => x.phase === 'ready');
      assert.equal(s.remote?.prompts, 'text');
      assert.match(s.remote?.promptsReason ?? '', /publishes neither its vocabulary size nor a tokenize route/);
      assert.equal(typeof (await sentPrompt(ls, fake, 'file:///w/f.py')), 'string');
    },
    fake,
  );
});

test('SGLang tokenizing the probe identically at /v1/tokenize: ids', T, async () => {
  const fake = await startSglang({ tokenize: k3Tokenize });
  await withLanguageServer(
    remoteInit(fake.base, {}, k3Dir),
    async (ls) => {
      await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.prompts === 'ids');
      assert.ok(Array.isArray(await sentPrompt(ls, fake, 'file:///w/g.py')));
    },
    fake,
  );
});

test('a completion asked while the check waits for the server goes as text; after the check, as ids', T, async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const fake = await startVllm({ tokenize: k3Tokenize, beforeTokenize: () => released });
  await withLanguageServer(
    remoteInit(fake.base, {}, k3Dir),
    async (ls) => {
      await fake.waitForRequest((r) => r.path === '/tokenize');
      const during = await ls.connection.sendRequest(StatusRequest.type);
      assert.equal(during.remote?.prompts, 'text');
      assert.equal(during.remote?.promptsReason, 'the server has not been checked yet');
      assert.equal(typeof (await sentPrompt(ls, fake, 'file:///w/h.py')), 'string', 'before the check finished: text');
      release();
      await ls.waitForStatus((x) => x.phase === 'ready' && x.remote?.prompts === 'ids');
      assert.ok(Array.isArray(await sentPrompt(ls, fake, 'file:///w/i.py')), 'after it: ids');
    },
    fake,
  );
});
