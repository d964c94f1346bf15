// completion-snippets-lsp.test.ts - the snippets the cursor uses, through the bundled server
// on the tiny fixture over LSP (docs/PROMPTS.md, "Snippets the cursor uses"): the prompt
// carries the best window of another open document after the ring's chunk and before the
// file, a keystroke and Enter keep it so the engine reuses the prompt it holds, and a
// request that carries it is cancelled as any other.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CancellationTokenSource, LSPErrorCodes, ResponseError } from 'vscode-languageserver-protocol/node';
import { layoutPrompt } from '../../server/completion/layout';
import { WINDOW_LINES } from '../../server/completion/snippets';
import { Tokenizer } from '../../server/engine/tokenizer';
import { ContextDefinitionsNotification, type StatusResult, StatusRequest } from '../../protocol/lsp';
import { ensureFixture } from '../support/fixtures';
import { type ServerHandle, startServer, TEST_TIMEOUT_MS, waitReady } from '../support/lsp';
import { addonFile } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const dir = ensureFixture({ gate: 'lowerbound' });

let server: ServerHandle;
let tok: Tokenizer;

before(
  async () => {
    tok = Tokenizer.open(dir);
    // Random weights write junk: the filter is off, the pipeline is what is checked. The
    // snippet budget is the one these cases were laid out for (the default is 192).
    server = await startServer({ modelPath: dir, settings: { engine: { threads: 1 }, completions: { multiline: 'never', maxTokens: 8, filter: false, snippetTokens: 384 } } });
    await waitReady(server);
  },
  { timeout: TEST_TIMEOUT_MS },
);

after(async () => {
  await server.shutdown();
  tok.close();
});

async function status(): Promise<StatusResult> {
  return server.connection.sendRequest(StatusRequest.type);
}

// dates.py: 60 lines; its top (the ring's chunk) is filler, the definition the cursor uses
// is at lines 45-46, which the windows of lines 30-49 and 40-59 hold: the earlier wins a tie.
const datesLines = Array.from({ length: 60 }, (_, i) => `filler_${i} = ${i}`);
datesLines[45] = 'def parse_when(stamp, layout):';
datesLines[46] = '    return convert_stamp(stamp, layout)';
const dates = datesLines.join('\n');
let firstShown = '';
const main = 'from dates import parse_when\n\nstamp = read_stamp()\nlayout = pick_layout(stamp)\nwhen = parse_when(';

test('the prompt carries the window of another open document that shares the most identifiers, after the ring and before the file', { timeout: TEST_TIMEOUT_MS }, async () => {
  await server.open('file:///w/dates.py', 'python', dates);
  await server.open('file:///w/main.py', 'python', main);
  const got = await server.complete('file:///w/main.py', 4, 'when = parse_when('.length);
  firstShown = String(got?.items[0]?.insertText ?? '');
  const s = (await status()).lastCompletion;
  assert.equal(s?.snippets, 1);
  assert.ok((s?.contextMs ?? -1) >= 0);
  // The layout written out by hand: the ring's chunk of dates.py (its first 32 lines), the
  // snippet (lines 30-49), then main.py, then the cursor's line healed back to its last piece.
  const ring = [{ key: 'file:///w/dates.py#0', path: 'dates.py', languageId: 'python', text: datesLines.slice(0, 32).join('\n') }];
  const snippet = [{ key: 'snippet:file:///w/dates.py#30', path: 'dates.py', languageId: 'python', text: datesLines.slice(30, 30 + WINDOW_LINES).join('\n') }];
  const l = layoutPrompt(tok, { path: 'main.py', languageId: 'python', text: main, offset: main.length, chunks: ring, snippets: snippet, maxPromptTokens: 2048, maxContextTokens: 512, heal: true });
  assert.equal(s?.promptTokens, l.ids.length);
  const without = layoutPrompt(tok, { path: 'main.py', languageId: 'python', text: main, offset: main.length, chunks: ring, maxPromptTokens: 2048, maxContextTokens: 512, heal: true });
  assert.ok(l.ids.length > without.ids.length + 20, 'the snippet is in the prompt');
});

test('a keystroke and Enter keep the snippets, so the engine reads only what is new', { timeout: TEST_TIMEOUT_MS }, async () => {
  const uri = 'file:///w/main.py';
  const s1 = (await status()).lastCompletion;
  // A character inside the line's last piece, which the completion does not start with (the
  // cache would answer): nothing new to read.
  const typed = firstShown.startsWith('s') ? 'q' : 's';
  await server.type(uri, 2, 4, 'when = parse_when('.length, typed);
  await server.complete(uri, 4, 'when = parse_when('.length + 1);
  const s2 = (await status()).lastCompletion;
  assert.equal(s2?.source, 'engine');
  assert.equal(s2?.snippets, 1);
  assert.equal(s2?.promptTokens, s1?.promptTokens);
  assert.equal(s2?.prefilledTokens, 0);
  // Enter: the line joins the file part; the snippets are as they were, so the prompt
  // extends the one the engine holds and only the new line's tokens are read.
  await server.type(uri, 3, 4, 'when = parse_when('.length + 1, ')\n');
  await server.complete(uri, 5, 0);
  const s3 = (await status()).lastCompletion;
  assert.equal(s3?.snippets, 1);
  assert.ok((s3?.reusedTokens ?? 0) >= (s1?.promptTokens ?? 0) - 2, `reused ${s3?.reusedTokens} of ${s3?.promptTokens}`);
  assert.ok((s3?.prefilledTokens ?? 99) <= 8, `prefilled ${s3?.prefilledTokens}`);
});

test('a request that carries snippets is cancelled with it: the engine stops within a forward pass', { timeout: TEST_TIMEOUT_MS }, async () => {
  await server.connection.sendNotification('workspace/didChangeConfiguration', {
    settings: { k3: { completions: { multiline: 'always', maxLines: 100000, maxTokens: 4000, filter: false, snippetTokens: 384 } } },
  });
  const uri = 'file:///w/long.py';
  await server.open(uri, 'python', 'from dates import parse_when\nwhen = parse_when(stamp, layout)\n');
  const source = new CancellationTokenSource();
  const request = server.complete(uri, 2, 0, source);
  await server.waitForStatus((s) => s.job?.kind === 'completion' && s.job.stage === 'generate' && s.job.tokens > 0);
  source.cancel();
  await assert.rejects(request, (e: unknown) => e instanceof ResponseError && e.code === LSPErrorCodes.RequestCancelled);
  const s = await status();
  assert.equal(s.phase, 'ready');
  assert.equal(s.lastCompletion?.outcome, 'cancelled');
  assert.ok((s.lastCompletion?.snippets ?? 0) >= 1, 'dates.py and main.py share its identifiers');
  assert.ok((s.lastCompletion?.tokensAfterCancel ?? 99) <= 9, `${s.lastCompletion?.tokensAfterCancel} tokens after the cancel`);
});

test('definitions the editor sends (k3/context/definitions) are laid out with the snippets; malformed ones are refused', { timeout: TEST_TIMEOUT_MS }, async () => {
  await server.connection.sendNotification('workspace/didChangeConfiguration', {
    settings: { k3: { completions: { multiline: 'never', maxTokens: 8, filter: false } } },
  });
  await server.connection.sendNotification(ContextDefinitionsNotification.type, { uri: 'file:///w/use.py', version: 1, definitions: [{ uri: 'file:///w/lib/shapes.py', languageId: 'python', line: 10 } as never] });
  assert.ok(await waitForLog(/k3\/context\/definitions refused/), 'a definition without its text is refused');
  // shapes.py is not open in the server: a snippet of it can only come from the editor.
  const definition = 'def area_of(shape):\n    return shape.width * shape.height';
  await server.connection.sendNotification(ContextDefinitionsNotification.type, { uri: 'file:///w/use.py', version: 1, definitions: [{ uri: 'file:///w/lib/shapes.py', languageId: 'python', line: 10, text: definition }] });
  const text = 'total = area_of(shape_x)\nvalue = ';
  await server.open('file:///w/use.py', 'python', text);
  await server.complete('file:///w/use.py', 1, 'value = '.length);
  const s = (await status()).lastCompletion;
  assert.equal(s?.snippets, 1);
  assert.equal(s?.definitions, 1, 'the status says the snippet is a definition');
  await server.open('file:///w/use2.py', 'python', text);
  await server.complete('file:///w/use2.py', 1, 'value = '.length);
  const without = (await status()).lastCompletion;
  // No definitions were sent for use2.py, and use.py's window is already the ring's chunk of it.
  assert.equal(without?.snippets, 0);
  assert.equal(without?.definitions, 0);
});

/** Resolves true when a log line matches (the server's logs arrive as notifications). */
async function waitForLog(re: RegExp): Promise<boolean> {
  // A request after the notification: the server handles messages in order, so its log line
  // has been sent before the answer.
  await status();
  return server.logs.some((l) => re.test(l));
}
