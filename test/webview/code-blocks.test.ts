// code-blocks.test.ts - what the chat's code blocks know of themselves (webview/codeBlocks.ts)
// and their highlighting (webview/highlight.ts): the language and the file Apply targets,
// from the fence's info or the path on the line before the block; highlighted output is
// escaped text in hljs spans, and an unknown language stays plain.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blockInfo, parseInfo, pathFromLine } from '../../webview/codeBlocks';
import { highlightCode } from '../../webview/highlight';

test('the fence info gives the language and the file, in the forms models write', () => {
  assert.deepEqual(parseInfo('python'), { language: 'python' });
  assert.deepEqual(parseInfo('python src/fib.py'), { language: 'python', path: 'src/fib.py' });
  assert.deepEqual(parseInfo('ts:src/a.ts'), { language: 'ts', path: 'src/a.ts' });
  assert.deepEqual(parseInfo('src/a.rs'), { language: 'rust', path: 'src/a.rs' });
  assert.deepEqual(parseInfo(''), { language: '' });
  assert.deepEqual(parseInfo('python title="x"'), { language: 'python' });
  assert.deepEqual(parseInfo('1.2.3'), { language: '1.2.3' }, 'a version number is not a file');
});

test('without a file in the info, a line before the block that is only a path names it', () => {
  assert.equal(pathFromLine('`src/fib.py`:'), 'src/fib.py');
  assert.equal(pathFromLine('**src/fib.py**'), 'src/fib.py');
  assert.equal(pathFromLine('In `lib/util.ts`:'), 'lib/util.ts');
  assert.equal(pathFromLine('Here is the fixed version of the function:'), undefined);
  assert.deepEqual(blockInfo('python', '`src/fib.py`:'), { language: 'python', path: 'src/fib.py' });
  assert.deepEqual(blockInfo('', 'src/main.go:'), { language: 'go', path: 'src/main.go' });
  assert.deepEqual(blockInfo('python other.py', 'src/fib.py:'), { language: 'python', path: 'other.py' }, 'the info wins');
});

test('highlighting escapes the code and marks tokens; an unknown language is left alone', () => {
  const html = highlightCode('def f(x):\n    return "<b>" # hi', 'python');
  assert.ok(html);
  assert.match(html, /<span class="hljs-keyword">def<\/span>/);
  assert.match(html, /&lt;b&gt;/);
  assert.doesNotMatch(html, /<b>/);
  assert.equal(highlightCode('x', 'cobol'), undefined);
  assert.equal(highlightCode('x', ''), undefined);
  assert.ok(highlightCode('const a: number = 1;', 'TypeScript'));
});
