// repo-cases.ts - the quality bench's repository cases (scripts/bench/quality.ts): files of
// a held-out package that import other files of the same package, the imported files found
// the way a developer's open tabs would hold them, and the places a cursor stands in them:
// one-line cursors as the bench's other sets, and block cursors at the end of a line that
// opens a block, whose target is the block's body. Pure: it reads the files it is given and
// draws from the generator it is given; it does not start a server or score anything.
import * as path from 'node:path';

/** A file of a package: its path on disk, its path inside the package, its language. */
export interface PackageFile {
  path: string;
  name: string;
  languageId: string;
  text: string;
}

/** Most imported files opened beside a case's file (a developer's few open tabs). */
export const MAX_IMPORTS = 4;
/** Longest block body a block case asks for: the server's default maxLines. */
export const MAX_BLOCK_LINES = 8;

/** The module names a file imports, as written (relative or not). */
export function importSpecs(text: string, languageId: string): string[] {
  const out: string[] = [];
  const add = (re: RegExp): void => {
    for (const m of text.matchAll(re)) out.push(m[1]);
  };
  if (languageId === 'typescript' || languageId === 'javascript') {
    add(/\bfrom\s+['"]([^'"]+)['"]/g);
    add(/\b(?:require|import)\(\s*['"]([^'"]+)['"]\s*\)/g);
  } else if (languageId === 'python') {
    add(/^\s*from\s+([.\w]+)\s+import\b/gm);
    add(/^\s*import\s+([\w.]+)/gm);
  } else if (languageId === 'cpp' || languageId === 'c') {
    add(/^\s*#\s*include\s+"([^"]+)"/gm);
  } else if (languageId === 'rust') {
    add(/^\s*(?:pub\s+)?mod\s+(\w+)\s*;/gm);
    add(/\buse\s+crate::(\w+)/g);
  }
  return out;
}

/** The files of `files` that `file` imports, at most `limit`: resolved the way its language
 * does (relative paths, Python's dotted modules, quoted includes, Rust modules), or, for Go,
 * the other files of its package (its folder), which Go sees without importing them. */
export function importsOf(file: PackageFile, files: readonly PackageFile[], limit = MAX_IMPORTS): PackageFile[] {
  const byName = new Map(files.map((f) => [f.name, f]));
  const dir = path.posix.dirname(file.name);
  const found: PackageFile[] = [];
  const take = (f: PackageFile | undefined): void => {
    if (f && f !== file && !found.includes(f)) found.push(f);
  };
  const bySuffix = (suffix: string): PackageFile | undefined => files.find((f) => f.name === suffix || f.name.endsWith(`/${suffix}`));
  if (file.languageId === 'go') {
    for (const f of files) if (f.languageId === 'go' && path.posix.dirname(f.name) === dir && f.name.endsWith('_test.go') === file.name.endsWith('_test.go')) take(f);
    return found.slice(0, limit);
  }
  for (const spec of importSpecs(file.text, file.languageId)) {
    if (file.languageId === 'typescript' || file.languageId === 'javascript') {
      if (!spec.startsWith('.')) continue;
      const base = path.posix.normalize(path.posix.join(dir, spec)).replace(/\.(js|ts|mjs|cjs)$/, '');
      take(['', '.ts', '.tsx', '.js', '.mjs', '.cjs', '/index.ts', '/index.js'].map((e) => byName.get(base + e)).find(Boolean));
    } else if (file.languageId === 'python') {
      const dots = /^\.*/.exec(spec)?.[0].length ?? 0;
      const mod = spec.slice(dots).split('.').filter(Boolean).join('/');
      if (dots > 0) {
        let at = dir;
        for (let i = 1; i < dots; i++) at = path.posix.dirname(at);
        const base = mod ? path.posix.join(at, mod) : at;
        take(byName.get(`${base}.py`) ?? byName.get(`${base}/__init__.py`));
      } else if (mod) {
        take(bySuffix(`${mod}.py`) ?? bySuffix(`${mod}/__init__.py`));
      }
    } else if (file.languageId === 'cpp' || file.languageId === 'c') {
      take(byName.get(path.posix.normalize(path.posix.join(dir, spec))) ?? bySuffix(spec));
    } else if (file.languageId === 'rust') {
      take(byName.get(path.posix.join(dir, `${spec}.rs`)) ?? bySuffix(`${spec}.rs`) ?? bySuffix(`${spec}/mod.rs`));
    }
  }
  return found.slice(0, limit);
}

const indentOf = (line: string): number => line.length - line.trimStart().length;

/** A line that opens a block: ends with `{`, or a Python header ending with `:`. */
function opensBlock(line: string, languageId: string): boolean {
  const t = line.trimEnd();
  if (languageId === 'python') return /^\s*(def|class|if|elif|else|for|while|with|try|except|finally)\b.*:$/.test(t);
  return t.endsWith('{') && !t.trimStart().startsWith('//') && !t.trimStart().startsWith('*');
}

/** A block case at line `at` of `lines`, or undefined: the body (the lines after it indented
 * deeper, at most MAX_BLOCK_LINES, not blank-only) and the document without the body (the
 * closing line stays, as an editor's auto-closing leaves it). */
export function blockAt(lines: readonly string[], at: number, languageId: string): { body: string[]; text: string } | undefined {
  if (!opensBlock(lines[at], languageId)) return undefined;
  const base = indentOf(lines[at]);
  let end = at + 1;
  while (end < lines.length && (lines[end].trim() === '' || indentOf(lines[end]) > base)) end++;
  // Trailing blank lines belong to what follows.
  while (end > at + 1 && lines[end - 1].trim() === '') end--;
  const body = lines.slice(at + 1, end);
  if (body.length === 0 || body.length > MAX_BLOCK_LINES || body.some((l) => l.length > 160)) return undefined;
  return { body, text: [...lines.slice(0, at + 1), ...lines.slice(end)].join('\n') };
}

/** Characters of `real` a user would not type: the common start of the suggestion and the
 * real text (accepted word by word up to the first difference). */
export function charactersSaved(shown: string, real: string): number {
  let n = 0;
  while (n < shown.length && n < real.length && shown[n] === real[n]) n++;
  return n;
}
