// codeBlocks.ts - what a reply's code block says about itself: its language and the file it
// is for, from the fence's info string (```python src/fib.py, ```ts:src/a.ts, ```src/a.ts)
// or, when the info names no file, from the line just before the block when that line is
// only a path (`src/fib.py`:, **src/fib.py**). Apply uses the file; the highlighter the
// language. Pure: no DOM.

export interface BlockInfo {
  /** A language name as written ('' when none). */
  language: string;
  /** The file the block is for, as written (relative to the workspace), or undefined. */
  path?: string;
}

/** A file path: at least one name with an extension, optionally under folders. */
const PATH = /^(?:\.{0,2}\/)?(?:[\w@.+-]+\/)*[\w@+-][\w@.+-]*\.[A-Za-z0-9]+$/;

/** Language names by file extension, for a block whose info is only a path. */
const BY_EXTENSION: Record<string, string> = {
  py: 'python', ts: 'typescript', tsx: 'typescript', js: 'javascript', jsx: 'javascript', mjs: 'javascript', cjs: 'javascript',
  c: 'c', h: 'c', cc: 'cpp', cpp: 'cpp', hpp: 'cpp', rs: 'rust', go: 'go', java: 'java', sh: 'bash', json: 'json',
  css: 'css', html: 'xml', xml: 'xml', md: 'markdown', yml: 'yaml', yaml: 'yaml', sql: 'sql',
};

export function looksLikePath(word: string): boolean {
  return PATH.test(word) && !/^\d+(\.\d+)+$/.test(word);
}

function languageOf(path: string): string {
  const ext = path.slice(path.lastIndexOf('.') + 1).toLowerCase();
  return BY_EXTENSION[ext] ?? '';
}

/** The info string read as a language and a path. */
export function parseInfo(info: string): BlockInfo {
  const words = info.trim().split(/[\s:]+/).filter(Boolean);
  const path = words.find(looksLikePath);
  const language = words.find((w) => w !== path && !w.includes('=')) ?? '';
  if (path) return { language: language || languageOf(path), path };
  return { language };
}

/** The path a line just before a block names, when the line is only that path (with markdown
 * emphasis or code around it and an optional colon). */
export function pathFromLine(line: string): string | undefined {
  const bare = line.trim().replace(/:$/, '').replace(/^[*_`]+|[*_`]+$/g, '').replace(/^(?:File|In)\s+/i, '').replace(/^[*_`]+|[*_`]+$/g, '');
  return bare && looksLikePath(bare) ? bare : undefined;
}

/** A block's language and file: the info's, else the path on the line before it. */
export function blockInfo(info: string, lineBefore: string | undefined): BlockInfo {
  const parsed = parseInfo(info);
  if (parsed.path || lineBefore === undefined) return parsed;
  const path = pathFromLine(lineBefore);
  return path ? { language: parsed.language || languageOf(path), path } : parsed;
}
