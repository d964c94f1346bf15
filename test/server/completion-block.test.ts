// completion-block.test.ts - where a ghost-text suggestion of several lines fits and where it
// ends (server/completion/block.ts through postprocess.ts, docs/PROMPTS.md "Post-processing"):
// multi-line `auto` at an empty line and after a block opener, one line inside a line; the
// block ends by indentation (Python) and by brackets balanced outside strings and comments
// (braces), keeps its closing line unless the document has it, stops before a copy of the
// text after the cursor and after maxLines; and `final` says so as soon as the block ended,
// which is what stops generation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { multilineFits } from '../../server/completion/block';
import { postprocess, type PostprocessInput } from '../../server/completion/postprocess';

const pp = (raw: string, over: Partial<PostprocessInput>) =>
  postprocess(raw, { linePrefix: '', lineSuffix: '', nextLines: [], languageId: 'typescript', multiline: 'auto', maxLines: 8, lineAbove: '', maxLineLength: 1000, asciiFile: true, ...over });

test('auto: several lines at an empty line and after a block opener, one line inside a line', () => {
  for (const [lang, prefix] of [
    ['python', 'def circumference(r):'],
    ['python', '    if x > 0:  # positive'],
    ['python', ''],
    ['typescript', '  '],
    ['typescript', 'function f(a: number) {'],
    ['typescript', 'const xs = ['],
    ['typescript', 'foo('],
    ['typescript', 'const g = (x) =>'],
    ['lua', 'if x then'],
    ['ruby', 'items.each do |item|'],
    ['shellscript', 'for f in *; do'],
  ]) assert.equal(multilineFits(lang, prefix), true, `${lang}: ${prefix}`);
  for (const [lang, prefix] of [
    ['python', 'x = f('.slice(0, 4)],
    ['python', "d = {'a':"],
    ['python', 'print("a:'],
    ['typescript', 'const total = '],
    ['typescript', 'console.log("{'],
    ['typescript', 'const s = `${'.slice(0, 10)],
    ['typescript', 'x = 1; // {'],
    ['lua', 'local x = y'],
    ['python', 'if x then'],
  ]) assert.equal(multilineFits(lang, prefix), false, `${lang}: ${prefix}`);
});

test('the def f(): case: auto shows the body up to where the function ends, and never the next line only', () => {
  const input = { languageId: 'python', linePrefix: 'def circumference(r):', nextLines: [] };
  const raw = '\n    """Return the circumference."""\n    return 2 * math.pi * r\n\n\ndef area(r):\n    return';
  assert.deepEqual(pp(raw, input), { text: '\n    """Return the circumference."""\n    return 2 * math.pi * r', final: true });
  assert.deepEqual(pp(raw, { ...input, multiline: 'never' }), { text: '\n    """Return the circumference."""', final: true });
  // Nothing offered: nothing shown.
  assert.deepEqual(pp('', input), { text: '', final: false });
});

test('Python: the block ends at the first line indented below it; else/except go on with it', () => {
  const input = { languageId: 'python', linePrefix: '    if x > 0:', nextLines: ['    return y'] };
  assert.deepEqual(pp('\n        y = 1\n    else:\n        y = 2\n    z = 3\n', input), { text: '\n        y = 1\n    else:\n        y = 2', final: true });
  // The dedented line may still be growing into `else`: held back, generation goes on.
  assert.deepEqual(pp('\n        y = 1\n    el', input), { text: '\n        y = 1', final: false });
  // One that cannot (k3-mini's `def __init__(self, x, x, x, …` after a method body) ends it at once.
  const method = { languageId: 'python', linePrefix: '    def __init__(self, x, y):', nextLines: [] };
  assert.deepEqual(pp('\n        return x\n\n    def __init__(self, x, x, x', method), { text: '\n        return x', final: true });
  // A docstring's lines are not judged by their indentation.
  const doc = { languageId: 'python', linePrefix: 'def f():', nextLines: [] };
  assert.deepEqual(pp('\n    """Sum.\n\nNot indented, still the docstring.\n    """\n    return 1\nprint(f())\n', doc), {
    text: '\n    """Sum.\n\nNot indented, still the docstring.\n    """\n    return 1',
    final: true,
  });
});

test('braces: after `{` the block ends at its matching `}`, kept when the document lacks it', () => {
  const input = { languageId: 'typescript', linePrefix: 'export function area(r: number): number {', nextLines: [] };
  const raw = '\n  const a = Math.PI * r * r;\n  return a;\n}\n\nexport function perimeter(r: number) {\n';
  const shown = pp(raw, input);
  assert.deepEqual(shown, { text: '\n  const a = Math.PI * r * r;\n  return a;\n}', final: true });
  // The document already closes it: the `}` is not written twice.
  assert.deepEqual(pp(raw, { ...input, nextLines: ['}', ''] }), { text: '\n  const a = Math.PI * r * r;\n  return a;', final: true });
  // Generation stops as soon as the closing line is complete, not at the token limit.
  assert.equal(pp('\n  return a;\n}\n', input).final, true);
  assert.equal(pp('\n  return a;\n', input).final, false);
  // `} else {` closes and reopens: the statement goes on to its own end.
  const ifElse = pp('\n  if (r < 0) {\n    return 0;\n  } else {\n    return r;\n  }\n}\nconst x = 1;\n', input);
  assert.deepEqual(ifElse, { text: '\n  if (r < 0) {\n    return 0;\n  } else {\n    return r;\n  }\n}', final: true });
});

test("a block the cursor's line opened may end on that line", () => {
  const ts = { languageId: 'typescript', linePrefix: 'function f() {', nextLines: [] };
  assert.deepEqual(pp(' return 1; }\nfunction g() {}\n', ts), { text: ' return 1; }', final: true });
  // Its first statement on that line, its `}` below: the block goes on to the `}`.
  assert.deepEqual(pp(' return 1;\n}\nfoo();\n', ts), { text: ' return 1;\n}', final: true });
  const py = { languageId: 'python', linePrefix: 'def f():', nextLines: [] };
  assert.deepEqual(pp(' return 1\ndef g():\n', py), { text: ' return 1', final: true });
  const arrow = { languageId: 'typescript', linePrefix: 'const double = (x: number) =>', nextLines: [] };
  assert.deepEqual(pp(' x * 2;\nconst y = 1;\n', arrow), { text: ' x * 2;', final: true });
  assert.deepEqual(pp(' {\n  return x * 2;\n};\nconst y = 1;\n', arrow), { text: ' {\n  return x * 2;\n};', final: true });
});

test('between `{` and the `}` VS Code closed it with: the body on its own lines, the `}` below it', () => {
  const input = { languageId: 'typescript', linePrefix: '  if (x) {', lineSuffix: '}', nextLines: [] };
  // The model writes its own `}` (the text after the cursor has it): it goes, and the
  // completion ends with a line break and the `if`'s indentation, which move the `}` down.
  assert.deepEqual(pp('\n    y();\n  }\n\nfoo();\n', input), { text: '\n    y();\n  ', final: true });
  // A model that fills in the middle stops by itself before the `}`.
  assert.deepEqual(pp('\n    y();\n', input), { text: '\n    y();\n  ', final: false });
  // Nothing written yet: nothing to show, more to come.
  assert.deepEqual(pp('', input), { text: '', final: false });
  // A first line with code stays one line.
  assert.deepEqual(pp(' y(); }\nfoo();\n', input), { text: ' y();', final: true });
  // `never`: one line, and a line break first is no line.
  assert.deepEqual(pp('\n    y();\n  }\n', { ...input, multiline: 'never' }), { text: '', final: true });
  const call = { languageId: 'typescript', linePrefix: 'foo(', lineSuffix: ');', nextLines: [] };
  assert.deepEqual(pp('\n  a,\n  b\n);\n', call), { text: '\n  a,\n  b\n', final: true });
});

test('braces: a block opened by `{` inside a call ends at the line that closes it', () => {
  const input = { languageId: 'javascript', linePrefix: 'app.get("/", (req, res) => {', nextLines: [] };
  assert.deepEqual(pp('\n  res.send("ok");\n});\n\napp.listen(3000);\n', input), { text: '\n  res.send("ok");\n});', final: true });
});

test('brackets inside strings and comments do not count', () => {
  const input = { languageId: 'typescript', linePrefix: 'function f() {', nextLines: [] };
  const raw = '\n  const s = "}}";\n  // } not the end\n  /* } nor\n} this */\n  const t = `\n}`;\n  return s + t;\n}\nf();\n';
  assert.deepEqual(pp(raw, input), { text: '\n  const s = "}}";\n  // } not the end\n  /* } nor\n} this */\n  const t = `\n}`;\n  return s + t;\n}', final: true });
  const py = { languageId: 'python', linePrefix: 'def f():', nextLines: [] };
  assert.deepEqual(pp("\n    s = ')'  # ) too\n    return s\nx = 1\n", py), { text: "\n    s = ')'  # ) too\n    return s", final: true });
  const rust = { languageId: 'rust', linePrefix: "fn first<'a>(s: &'a str) -> char {", nextLines: [] };
  assert.deepEqual(pp("\n    let c = '}';\n    c\n}\nfn main() {}\n", rust), { text: "\n    let c = '}';\n    c\n}", final: true });
});

test('an empty line in a block: statements at its indentation, up to the enclosing block end', () => {
  const input = { languageId: 'typescript', linePrefix: '  ', nextLines: ['}'] };
  // The enclosing `}` is in the document already.
  assert.deepEqual(pp('const y = x * 2;\n  return y;\n}\n', input), { text: 'const y = x * 2;\n  return y;', final: true });
  // Lines after the cursor at the same indentation: the model's `}` is not where the block ends.
  assert.deepEqual(pp('x++;\n}\n', { ...input, nextLines: ['  return x;', '}'] }), { text: 'x++;', final: true });
  // The next function starts below without the `}`: the completion closes the block.
  assert.deepEqual(pp('return y;\n}\n\nfoo();\n', { ...input, nextLines: ['', 'function g() {'] }), { text: 'return y;\n}', final: true });
});

test('maxLines caps a block, and a copy of the text after the cursor ends it', () => {
  const input = { languageId: 'python', linePrefix: 'def f():', nextLines: ['    return total'] };
  const body = '\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n';
  assert.deepEqual(pp(body, { ...input, maxLines: 2 }), { text: '\n    a = 1\n    b = 2', final: true });
  assert.deepEqual(pp('\n    total = 0\n    return total\n', input), { text: '\n    total = 0', final: true });
});

test('inside a line auto keeps one line; always gives several wherever the line ends', () => {
  const input = { languageId: 'typescript', linePrefix: 'const total = ', nextLines: [] };
  assert.deepEqual(pp('a + b;\nconsole.log(total);\n', input), { text: 'a + b;', final: true });
  assert.deepEqual(pp('a + b;\nconsole.log(total);\n', { ...input, multiline: 'always' }), { text: 'a + b;\nconsole.log(total);', final: false });
  // Text after the cursor keeps it to one line in every mode.
  assert.deepEqual(pp('a, b)\nmore\n', { linePrefix: 'f(', lineSuffix: ')', multiline: 'always' }), { text: 'a, b', final: true });
});
