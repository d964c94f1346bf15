// symbol-index.test.ts - the quality bench's stand-in for the editor's language features
// (scripts/bench/lib/symbol-index.ts): each language's definition forms are found and calls
// or uses are not; a name resolves to the document when the document binds it, else to the
// first imported file that defines it; and, through the extension's own DefinitionGatherer,
// what reaches the server is the extension's `k3/context/definitions` (other files only,
// 12 lines from the definition, at most 4).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFINITION_LINES, DefinitionGatherer, MAX_DEFINITIONS } from '../../extension/definitions';
import type { ContextDefinitionsParams } from '../../protocol/lsp';
import { definitionLines, identifierAt, type IndexedDocument, symbolIndex } from '../../scripts/bench/lib/symbol-index';

test('TypeScript and JavaScript definitions are found, uses are not', () => {
  const ts = [
    'import { x } from "./x";', // 0
    'export function parse(s: string) {', // 1
    'export default class Parser {', // 2
    '  static async parse(s) {', // 3
    '    return parse(s);', // 4
    '  }', // 5
    '}', // 6
    'export interface Options {}', // 7
    'export type Mode = "a";', // 8
    'const LIMIT = 4;', // 9
    'exports.helper = function () {};', // 10
    'parse("x");', // 11
  ].join('\n');
  assert.deepEqual(definitionLines(ts, 'typescript', 'parse'), [1, 3]);
  assert.deepEqual(definitionLines(ts, 'typescript', 'Parser'), [2]);
  assert.deepEqual(definitionLines(ts, 'typescript', 'Options'), [7]);
  assert.deepEqual(definitionLines(ts, 'typescript', 'Mode'), [8]);
  assert.deepEqual(definitionLines(ts, 'javascript', 'LIMIT'), [9]);
  assert.deepEqual(definitionLines(ts, 'javascript', 'helper'), [10]);
  assert.deepEqual(definitionLines(ts, 'typescript', 'pars'), [], 'a prefix of a name is not the name');
});

test('Python, Go, Rust and C++ definitions are found, uses are not', () => {
  const py = ['import os', 'TIMEOUT = 5', 'TIMEOUT == 5', 'class Session:', '    async def get(self, url):', '        return get(url)', 'def get(url):'].join('\n');
  assert.deepEqual(definitionLines(py, 'python', 'TIMEOUT'), [1]);
  assert.deepEqual(definitionLines(py, 'python', 'Session'), [3]);
  assert.deepEqual(definitionLines(py, 'python', 'get'), [4, 6]);
  const go = ['type Command struct {', 'func (c *Command) Execute() error {', '\tc.Execute()', 'func NewCommand() *Command {', 'var ErrBad = errors.New("bad")'].join('\n');
  assert.deepEqual(definitionLines(go, 'go', 'Command'), [0]);
  assert.deepEqual(definitionLines(go, 'go', 'Execute'), [1]);
  assert.deepEqual(definitionLines(go, 'go', 'NewCommand'), [3]);
  assert.deepEqual(definitionLines(go, 'go', 'ErrBad'), [4]);
  const rs = ['pub struct Error {', 'impl Error {', '    pub(crate) fn context<C>(self, c: C) -> Self {', '        self.context(c)', 'pub trait Context<T, E> {', 'macro_rules! bail {'].join('\n');
  assert.deepEqual(definitionLines(rs, 'rust', 'Error'), [0]);
  assert.deepEqual(definitionLines(rs, 'rust', 'context'), [2]);
  assert.deepEqual(definitionLines(rs, 'rust', 'Context'), [4]);
  assert.deepEqual(definitionLines(rs, 'rust', 'bail'), [5]);
  const h = ['#define FMT_VERSION 90100', 'template <typename T> class buffer {', 'class buffer;', 'FMT_API auto vformat(string_view fmt, format_args args) -> std::string;', '  return vformat(fmt, args);', 'using string_view = basic_string_view<char>;'].join('\n');
  assert.deepEqual(definitionLines(h, 'cpp', 'FMT_VERSION'), [0]);
  assert.deepEqual(definitionLines(h, 'cpp', 'buffer'), [1], 'a forward declaration is not the definition');
  assert.deepEqual(definitionLines(h, 'cpp', 'vformat'), [3], 'a call after `return` is not a declaration');
  assert.deepEqual(definitionLines(h, 'cpp', 'string_view'), [5]);
});

test('the identifier at a position covers its first to its last character', () => {
  assert.equal(identifierAt('  return parse(s);', 9), 'parse');
  assert.equal(identifierAt('  return parse(s);', 14), 'parse');
  assert.equal(identifierAt('  return parse(s);', 1), undefined);
});

const util: IndexedDocument = {
  uri: 'file:///p/util.ts',
  languageId: 'typescript',
  text: ['// utilities', 'export function parseDate(s: string): Date {', '  return new Date(s);', '}', 'export const LOCAL = "local";', ...Array.from({ length: 20 }, (_, i) => `// line ${i}`)].join('\n'),
};
const zone: IndexedDocument = { uri: 'file:///p/zone.ts', languageId: 'typescript', text: 'export class Zone {\n  name = "utc";\n}\nexport function parseDate() {}' };

test('a name resolves to the document that binds it, else to the first imported file that defines it', async () => {
  const doc: IndexedDocument = {
    uri: 'file:///p/main.ts',
    languageId: 'typescript',
    text: ['import { parseDate, LOCAL } from "./util";', 'import { Zone } from "./zone";', 'const zone = new Zone();', 'const d = parseDate(LOCAL);', 'mystery('].join('\n'),
  };
  const index = symbolIndex(() => doc, [util, zone]);
  const at = (line: number, name: string) => index.locate(doc.uri, { line, character: doc.text.split('\n')[line].indexOf(name) + 1 });
  assert.deepEqual(await at(3, 'parseDate'), [{ uri: util.uri, line: 1 }], 'the first import in order that defines it, not zone.ts');
  assert.deepEqual(await at(3, 'LOCAL'), [{ uri: util.uri, line: 4 }]);
  assert.deepEqual(await at(2, 'Zone'), [{ uri: zone.uri, line: 0 }]);
  assert.deepEqual(await at(3, 'd'), [{ uri: doc.uri, line: 3 }], 'a local constant is the document\'s');
  assert.deepEqual(await at(4, 'mystery'), [], 'a name nothing defines has no definition');
  assert.deepEqual(await index.locate('file:///p/other.ts', { line: 0, character: 1 }), [], 'another document is not indexed');
  assert.equal((await index.read(util.uri))?.lines[1], 'export function parseDate(s: string): Date {');
  assert.equal(await index.read('file:///p/absent.ts'), undefined);
});

test('through the extension\'s gatherer, the server gets other files\' definitions, 12 lines each, at most 4', async () => {
  // The cursor after `parseDate(LOCAL, ` on the last line: the identifiers near it are those
  // of that line and the line above (extension/definitions.ts identifiersNear).
  const many: IndexedDocument[] = Array.from({ length: 6 }, (_, i) => ({ uri: `file:///p/m${i}.ts`, languageId: 'typescript', text: `export function fun${i}() {\n  return ${i};\n}` }));
  const doc: IndexedDocument = {
    uri: 'file:///p/main.ts',
    languageId: 'typescript',
    text: ['import { parseDate, LOCAL } from "./util";', 'const here = 1;', 'fun0(); fun1(); fun2(); fun3(); fun4();', 'here = parseDate(LOCAL, '].join('\n'),
  };
  const sent: ContextDefinitionsParams[] = [];
  const lines = doc.text.split('\n');
  const gatherer = new DefinitionGatherer(symbolIndex(() => doc, [util, ...many]), (p) => sent.push(p));
  await gatherer.gather({ uri: doc.uri, version: 1, lineAt: (i) => lines[i] }, { line: 3, character: lines[3].length }, () => false);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].uri, doc.uri);
  assert.equal(sent[0].definitions.length, MAX_DEFINITIONS);
  // Nearest the cursor first: LOCAL, parseDate, (here: the document's, dropped), fun4, fun3.
  assert.deepEqual(
    sent[0].definitions.map((d) => [d.uri, d.line]),
    [[util.uri, 4], [util.uri, 1], ['file:///p/m4.ts', 0], ['file:///p/m3.ts', 0]],
  );
  assert.equal(sent[0].definitions[1].text, util.text.split('\n').slice(1, 1 + DEFINITION_LINES).join('\n'));
  assert.equal(sent[0].definitions[2].text, 'export function fun4() {\n  return 4;\n}');
  assert.ok(sent[0].definitions.every((d) => d.languageId === 'typescript' && d.uri !== doc.uri));
});
