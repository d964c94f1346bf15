// completion-snippets.test.ts - the snippets the cursor uses, without an engine
// (docs/PROMPTS.md, "Snippets the cursor uses"): identifiers and their overlap, sliding
// windows, each document's best window ranked by Jaccard with the lines above the cursor,
// the token budget, the prompt order that depends on the texts alone, the cache that keeps
// an answer while the user types in one place, and where the snippets go in the prompt.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { REFRESH_IDLE_MS } from '../../server/completion/context';
import { chunkText, type ContextChunk, layoutPrompt } from '../../server/completion/layout';
import { type IndexedDocument, MOVE_LINES, SnippetIndex } from '../../server/completion/snippetIndex';
import {
  fitSnippets,
  identifiers,
  jaccardSets,
  MIN_SCORE,
  queryOf,
  rankSnippets,
  type SnippetSource,
  WINDOW_LINES,
  WINDOW_STEP,
  windowsOf,
} from '../../server/completion/snippets';
import { Tokenizer } from '../../server/engine/tokenizer';
import { addonFile, repoRoot } from '../support/paths';

process.env.K3_ADDON ??= addonFile;
const tok = Tokenizer.open(path.join(repoRoot, 'test/data/kimi-tokenizer'));
const enc = (s: string): number[] => Array.from(tok.encode(s, false));
const count = (s: string): number => enc(s).length;

/** A file of `n` lines of filler, with `body` at line `at`. */
function fileWith(n: number, at: number, body: string[]): string {
  const lines = Array.from({ length: n }, (_, i) => `x${i} = ${i}`);
  lines.splice(at, body.length, ...body);
  return lines.join('\n');
}

const source = (uri: string, text: string): SnippetSource => ({ uri, path: uri.replace('file:///w/', ''), languageId: 'python', windows: windowsOf(text) });

test('identifiers are the names of a text, less the words every program has', () => {
  assert.deepEqual([...identifiers('def parse_date(text, fmt=None):\n    return self.strptime(text, fmt)')].sort(), ['fmt', 'parse_date', 'strptime', 'text']);
  assert.equal(jaccardSets(new Set(['a', 'b']), new Set(['b', 'c'])), 1 / 3);
  assert.equal(jaccardSets(new Set(), new Set()), 0, 'nothing shared is no evidence');
});

test('windows are WINDOW_LINES lines every WINDOW_STEP lines, the last one ending at the last line', () => {
  const w = windowsOf(fileWith(45, 0, []));
  assert.deepEqual(w.map((x) => x.start), [0, WINDOW_STEP, 2 * WINDOW_STEP, 45 - WINDOW_LINES]);
  assert.ok(w.every((x) => x.text.split('\n').length === WINDOW_LINES));
  assert.deepEqual(windowsOf('a\nb').map((x) => x.start), [0], 'a short file is one window');
});

test('the query is the lines above the cursor line only, so typing on the line cannot change it', () => {
  const above = Array.from({ length: 30 }, (_, i) => `v${i} = ${i}`).join('\n') + '\n';
  const q = queryOf(above);
  assert.ok(q.has('v29') && q.has('v10') && !q.has('v9'), 'the last 20 lines');
});

test("each document gives its best window, documents ranked by Jaccard with the query, weak ones left out", () => {
  const dates = fileWith(60, 30, ['def parse_date(text, fmt):', '    return datetime.strptime(text, fmt)']);
  const other = fileWith(60, 0, ['def unrelated_thing(y):', '    return y']);
  const some = fileWith(20, 0, ['datetime = None']);
  const q = queryOf('from dates import parse_date\nwhen = parse_date(text, fmt)\nprint(datetime.now())\n');
  const ranked = rankSnippets(q, [source('file:///w/other.py', other), source('file:///w/dates.py', dates), source('file:///w/some.py', some)]);
  // some.py shares only `datetime` among its 20 names (1/27 < MIN_SCORE); other.py nothing.
  assert.deepEqual(ranked.map((r) => r.chunk.path), ['dates.py']);
  assert.ok(ranked[0].chunk.text.includes('def parse_date'), 'the window with the definition');
  assert.ok(ranked.every((r) => r.score >= MIN_SCORE));
  assert.equal(ranked[0].chunk.key, 'snippet:file:///w/dates.py#20');
});

test('the budget keeps the best snippets that fit, skipping one too large for a smaller one, in path order', () => {
  const chunk = (p: string, lines: number): ContextChunk => ({ key: `snippet:file:///w/${p}#0`, path: p, languageId: 'python', text: Array.from({ length: lines }, (_, i) => `y${i} = ${i}`).join('\n') });
  const ranked = [
    { score: 0.5, chunk: chunk('z.py', 3) },
    { score: 0.4, chunk: chunk('big.py', 40) },
    { score: 0.3, chunk: chunk('a.py', 3) },
  ];
  const budget = count(chunkText(ranked[0].chunk)) + count(chunkText(ranked[2].chunk));
  const kept = fitSnippets(ranked, budget, count);
  assert.deepEqual(kept.map((c) => c.path), ['a.py', 'z.py'], 'big.py does not fit; the order is by path, not by score');
  assert.deepEqual(fitSnippets(ranked, budget - 1, count).map((c) => c.path), ['z.py']);
  assert.deepEqual(fitSnippets(ranked, 0, count), []);
});

test('the index keeps its answer while the user types in one place, and ranks again at quiet moments', () => {
  const docs: IndexedDocument[] = [];
  const doc = (uri: string, text: string, version = 1): IndexedDocument => ({ uri, languageId: 'python', version, getText: () => text });
  docs.push(doc('file:///w/dates.py', fileWith(40, 10, ['def parse_date(text, fmt):', '    return strptime(text, fmt)'])));
  docs.push(doc('file:///w/main.py', ''));
  const index = new SnippetIndex(() => docs, (uri) => uri.replace('file:///w/', ''));
  const ask = (textAbove: string, line: number, now: number) => index.snippets({ target: 'file:///w/main.py', line, textAbove, budget: 512, tokens: count, now });
  const first = ask('when = parse_date(text, fmt)\n', 1, 0);
  assert.equal(first.length, 1);
  // Enter: a new line above the cursor, nothing in common with dates.py; the answer stays.
  assert.equal(ask('when = parse_date(text, fmt)\nunrelated = 1\n', 2, 100), first);
  // The cursor far away: ranked again (and nothing shared now).
  assert.deepEqual(ask('unrelated = 1\n', 2 + MOVE_LINES, 200), []);
  assert.equal(ask('when = parse_date(text, fmt)\n', 2 + MOVE_LINES, 300).length, 0, 'kept while typing there');
  assert.equal(ask('when = parse_date(text, fmt)\n', 2 + MOVE_LINES, 300 + REFRESH_IDLE_MS).length, 1, 'a pause ranks again');
  // Another document's new version ranks again at once.
  docs[0] = doc('file:///w/dates.py', 'nothing here', 2);
  assert.deepEqual(ask('when = parse_date(text, fmt)\n', 2 + MOVE_LINES, 301 + REFRESH_IDLE_MS), []);
  assert.deepEqual(index.snippets({ target: 'file:///w/main.py', line: 1, textAbove: 'parse_date\n', budget: 0, tokens: count, now: 0 }), [], 'budget 0: none');
});

test('snippets go after the ring chunks and before the file, inside part 1, and typing on the line leaves them', () => {
  const text = 'from dates import parse_date\nwhen = parse_date(\n';
  const ring = [{ key: 'file:///w/util.py#0', path: 'util.py', languageId: 'python', text: 'def g():\n    pass' }];
  const snippets = [{ key: 'snippet:file:///w/dates.py#0', path: 'dates.py', languageId: 'python', text: 'def parse_date(text, fmt):\n    return 1' }];
  const input = { path: 'main.py', languageId: 'python', chunks: ring, snippets, maxPromptTokens: 2048, maxContextTokens: 512 };
  const offset = text.indexOf('(\n') + 1;
  const l = layoutPrompt(tok, { ...input, text, offset });
  const part1 = [...enc('# util.py\ndef g():\n    pass\n\n'), ...enc('# dates.py\ndef parse_date(text, fmt):\n    return 1\n\n')];
  assert.deepEqual(l.ids.slice(0, l.contextEnd), part1);
  assert.deepEqual(l.ids.slice(l.contextEnd, l.stableEnd), enc('# main.py\nfrom dates import parse_date\n'));
  assert.deepEqual(l.chunkKeys, ['file:///w/util.py#0', 'snippet:file:///w/dates.py#0']);
  const typed = layoutPrompt(tok, { ...input, text: text.replace('(\n', '(te\n'), offset: offset + 2 });
  assert.deepEqual(typed.ids.slice(0, typed.stableEnd), l.ids.slice(0, l.stableEnd));
  // A snippet whose text a ring chunk already carries is not repeated.
  const dup = layoutPrompt(tok, { ...input, snippets: [{ ...snippets[0], text: 'def g():' }], text, offset });
  assert.deepEqual(dup.chunkKeys, ['file:///w/util.py#0']);
});
