// completion-fim.test.ts - the fill-in-the-middle layout of docs/PROMPTS.md: a model whose
// tokenizer names <|fim_prefix|>, <|fim_suffix|> and <|fim_middle|> (k3-mini v2) gets the
// text after the cursor as a suffix block before the file (SPM order), one without them (K3,
// or k3-mini with those slots renamed back to reserved ones here) the plain layout. Typing
// at the cursor still extends a checkpointed prompt; Enter keeps the suffix block.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { fimTokens } from '../../server/completion/backend';
import { FIM_NAMES, FIM_SUFFIX_TOKENS, fimSuffixIds, layoutPrompt } from '../../server/completion/layout';
import { Tokenizer } from '../../server/engine/tokenizer';
import { type StatusResult, StatusRequest } from '../../protocol/lsp';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const MINI = path.join(repoRoot, 'media/models/k3-mini');
let plainDir: string;
let tok: Tokenizer;
let server: ServerHandle;

/** k3-mini with its FIM slots named as reserved ones again (weights linked, not copied):
 * a model without FIM tokens, as K3 is. */
function withoutFim(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-nofim-'));
  for (const f of fs.readdirSync(MINI)) if (f !== 'tokenizer_config.json') fs.symlinkSync(path.join(MINI, f), path.join(d, f));
  const config = JSON.parse(fs.readFileSync(path.join(MINI, 'tokenizer_config.json'), 'utf8'));
  const fim = new Set<string>(Object.values(FIM_NAMES));
  for (const [id, t] of Object.entries(config.added_tokens_decoder) as Array<[string, { content: string }]>) {
    if (fim.has(t.content)) t.content = `<|reserved_token_${id}|>`;
  }
  fs.writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(config, null, 2));
  return d;
}

before(
  async () => {
    plainDir = withoutFim();
    tok = Tokenizer.open(MINI);
    server = await startServer({ modelPath: MINI, settings: { engine: { threads: 1 } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await server.shutdown();
  tok.close();
  fs.rmSync(plainDir, { recursive: true, force: true });
});

const enc = (t: string): number[] => Array.from(tok.encode(t, false));

test('a tokenizer that names the FIM tokens gets the SPM layout: suffix block, then the file, then the line', () => {
  const fim = fimTokens(tok);
  assert.ok(fim, 'k3-mini v2 is FIM-capable');
  const plain = Tokenizer.open(plainDir);
  assert.equal(fimTokens(plain), undefined, 'without the names it is not');
  plain.close();
  const text = 'def f(x):\n    return x\n\nvalue = f(2)\nprint(value)\n';
  const offset = text.indexOf('f(2)');
  const l = layoutPrompt(tok, { path: 'main.py', languageId: 'python', text, offset, chunks: [], maxPromptTokens: 2048, maxContextTokens: 512, heal: true, fim });
  assert.equal(l.fim, true);
  const suffix = enc('f(2)\nprint(value)\n');
  const file = enc('# main.py\ndef f(x):\n    return x\n\n');
  // "value = " ends with a piece of its own (" "): healed, the line stops before it.
  assert.equal(l.heal, ' ');
  assert.deepEqual(l.ids, [fim!.prefix, fim!.suffix, ...suffix, fim!.middle, ...file, ...enc('value =')]);
  assert.equal(l.suffixEnd, 3 + suffix.length);
  assert.equal(l.stableEnd, l.suffixEnd + file.length);
});

test('the FIM suffix keeps whole lines within its token budget', () => {
  const long = Array.from({ length: 40 }, (_, i) => `line_${i} = compute(${i}, "some text that takes tokens")`);
  const ids = fimSuffixIds(tok, ')', long);
  assert.ok(ids.length <= FIM_SUFFIX_TOKENS);
  // Whole lines: the ids are those of the rest of the line and the first k lines, for some k.
  const k = Array.from({ length: 17 }, (_, j) => j).find((j) => enc([')', ...long.slice(0, j)].join('\n')).length === ids.length);
  assert.ok(k !== undefined && k >= 1, `${ids.length} tokens are whole lines`);
  assert.deepEqual(Array.from(ids), enc([')', ...long.slice(0, k)].join('\n')));
  // One line longer than the budget is cut to its first tokens.
  assert.equal(fimSuffixIds(tok, 'x'.repeat(5000), []).length, FIM_SUFFIX_TOKENS);
});

async function status(): Promise<StatusResult> {
  return server.connection.sendRequest(StatusRequest.type);
}

test('through the server: typing at the cursor extends the checkpointed FIM prompt; Enter keeps the suffix block', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/fim.py';
  const text = 'import os\n\n\ndef walk(root):\n    \n    return result\n';
  await server.open(uri, 'python', text);
  await server.complete(uri, 4, 4);
  const s1 = (await status()).lastCompletion;
  assert.equal(s1?.layout, 'fim');
  assert.equal(s1?.healedText, '    ');
  // A letter after the indentation takes its last space ("   " + " r"): one token read.
  await server.type(uri, 2, 4, 4, 'r');
  await server.complete(uri, 4, 5);
  const s2 = (await status()).lastCompletion;
  assert.equal(s2?.source, 'engine');
  assert.equal(s2?.prefilledTokens, enc('   ').length);
  // Inside the last piece: the same prompt, nothing prefilled.
  await server.type(uri, 3, 4, 5, 'e');
  await server.complete(uri, 4, 6);
  const s2b = (await status()).lastCompletion;
  assert.equal(s2b?.prefilledTokens, 0);
  // A new piece: only the finished one is read.
  await server.type(uri, 4, 4, 6, 'sult = ');
  await server.complete(uri, 4, 13);
  const s3 = (await status()).lastCompletion;
  assert.equal(s3?.source, 'engine');
  assert.equal(s3?.prefilledTokens, (s3?.promptTokens ?? 0) - (s2b?.promptTokens ?? 0));
  assert.equal(s3?.reusedTokens, s2b?.promptTokens);
  // Enter at the end of the line: the suffix block is unchanged, the line joins the file part.
  await server.type(uri, 5, 4, 13, '[]\n    ');
  await server.complete(uri, 5, 4);
  const s4 = (await status()).lastCompletion;
  assert.equal(s4?.source, 'engine');
  assert.ok((s4?.reusedTokens ?? 0) >= (s1?.promptTokens ?? 0) - 1, `reused ${s4?.reusedTokens} of ${s4?.promptTokens}`);
  assert.ok((s4?.prefilledTokens ?? 99) <= 8, `prefilled ${s4?.prefilledTokens}`);
});

test('a model without FIM tokens keeps the plain layout', { timeout: TEST_TIMEOUT_MS }, async () => {
  const plain = await startServer({ modelPath: plainDir, settings: { engine: { threads: 1 } } });
  try {
    await waitReady(plain);
    await plain.open('file:///w/p.py', 'python', 'x = 1\ny = \nz = 3\n');
    await plain.complete('file:///w/p.py', 1, 4);
    const s = (await plain.connection.sendRequest(StatusRequest.type)).lastCompletion;
    assert.equal(s?.layout, 'plain');
  } finally {
    await plain.shutdown();
  }
});
