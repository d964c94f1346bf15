// symbol-index.ts - the quality bench's stand-in for the editor's language features
// (scripts/bench/quality.ts): where a name used in a case's document is defined, found by
// the definition forms of each language in the document itself and in the files it imports
// (repo-cases.ts importsOf: relative imports, Python modules, quoted includes, Rust modules,
// Go's package folder). It implements extension/definitions.ts's DefinitionSource, so the
// bench gathers and sends definitions with the extension's own DefinitionGatherer: the same
// identifiers, the same limits, the same `k3/context/definitions` shape.
// What it is not: a type checker. It resolves a name, not a member through its receiver's
// type (`a.get` finds the first `get` defined in the imports, where a language server would
// find the one of `a`'s class), and it does not follow re-exports or transitive imports. A
// name the document itself defines resolves to the document (the gatherer then drops it, as
// it drops the editor's same-document answers); the document is read as it stands (the
// case's text, cut at the cursor), never the original file.
import type { DefinitionSource, Spot } from '../../../extension/definitions';

/** A document the index reads: its URI (as the bench opened it), language and text. */
export interface IndexedDocument {
  uri: string;
  languageId: string;
  text: string;
}

const escape = (s: string): string => s.replace(/[$]/g, '\\$');

/** The lines where a language defines `name` at the top of a module or in a class body: one
 * regular expression per form, tried on each line. */
function definitionForms(name: string, languageId: string): RegExp[] {
  const n = `${escape(name)}(?![A-Za-z0-9_$])`;
  switch (languageId) {
    case 'typescript':
    case 'typescriptreact':
    case 'javascript':
    case 'javascriptreact':
      return [
        new RegExp(`^\\s*(export\\s+)?(default\\s+)?(declare\\s+)?(async\\s+)?function\\s*\\*?\\s*${n}`),
        new RegExp(`^\\s*(export\\s+)?(default\\s+)?(declare\\s+)?(abstract\\s+)?(class|interface|enum|namespace)\\s+${n}`),
        new RegExp(`^(export\\s+)?(declare\\s+)?type\\s+${n}`),
        new RegExp(`^(export\\s+)?(declare\\s+)?(const|let|var)\\s+${n}`),
        new RegExp(`^(module\\.)?exports\\.${n}\\s*=`),
        // A method: the name, its parameters and the body's brace on the line.
        new RegExp(`^\\s+((static|async|public|private|protected|readonly|override|get|set)\\s+)*\\*?${n}\\s*(<[^>]*>)?\\(.*\\{\\s*$`),
      ];
    case 'python':
      return [new RegExp(`^\\s*(async\\s+)?def\\s+${n}`), new RegExp(`^\\s*class\\s+${n}`), new RegExp(`^${n}\\s*(:[^=]*)?=(?!=)`)];
    case 'go':
      return [
        new RegExp(`^func\\s+(\\([^)]*\\)\\s*)?${n}`),
        new RegExp(`^(type|var|const)\\s+${n}`),
        // Inside a `type ( ... )`, `var ( ... )` or `const ( ... )` group.
        new RegExp(`^\\s+${n}(\\s+(struct|interface)\\b|\\s*=|\\s+[A-Za-z*\\[].*=)`),
      ];
    case 'rust':
      return [
        new RegExp(`^\\s*(pub(\\([^)]*\\))?\\s+)?((const|async|unsafe|extern\\s+"[^"]*")\\s+)*fn\\s+${n}`),
        new RegExp(`^\\s*(pub(\\([^)]*\\))?\\s+)?(struct|enum|trait|type|union|mod)\\s+${n}`),
        new RegExp(`^\\s*(pub(\\([^)]*\\))?\\s+)?(const|static)\\s+(mut\\s+)?${n}\\s*:`),
        new RegExp(`^\\s*macro_rules!\\s*${n}`),
      ];
    case 'c':
    case 'cpp':
      return [
        new RegExp(`^\\s*(template\\s*<.*>\\s*)?(class|struct|union|enum(\\s+class)?|namespace)\\s+(\\w+\\s+)?${n}(?!\\s*;)`),
        new RegExp(`^\\s*#\\s*define\\s+${n}`),
        new RegExp(`^\\s*using\\s+${n}\\s*=`),
        new RegExp(`^\\s*typedef\\b.*\\b${n}\\s*;`),
        // A declaration: a type (words, `::`, `<>`, `*`, `&`) and the name before its parameters.
        new RegExp(`^\\s*(?!return\\b|else\\b|case\\b|delete\\b|new\\b)[A-Za-z_][\\w:<>,\\s]*[\\s*&]${n}\\s*\\(`),
      ];
    default:
      return [];
  }
}

/** Where the document's own text binds `name` beyond definitionForms: an assignment, a
 * parameter-free loop variable, a local declaration. A name bound here is the document's. */
function localBinding(name: string, languageId: string): RegExp {
  const n = `${escape(name)}(?![A-Za-z0-9_$])`;
  if (languageId === 'python') return new RegExp(`^\\s*(${n}\\s*(:[^=]*)?=(?!=)|for\\s+(.*[\\s,(])?${n}.*\\bin\\b|(import|from)\\b.*\\bas\\s+${n})`);
  if (languageId === 'go') return new RegExp(`^\\s*(var\\s+)?${n}\\s*(:=|=)|\\b${n}\\s*:=`);
  if (languageId === 'rust') return new RegExp(`\\blet\\s+(mut\\s+)?${n}`);
  return new RegExp(`\\b(const|let|var)\\s+${n}|^\\s*${n}\\s*=[^=]`);
}

/** The lines (0-based) of `text` where `name` is defined, in order. */
export function definitionLines(text: string, languageId: string, name: string): number[] {
  const forms = definitionForms(name, languageId);
  if (forms.length === 0) return [];
  const out: number[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.includes(name) && forms.some((re) => re.test(line))) out.push(i);
  });
  return out;
}

/** The identifier that covers `character` of `line`, or undefined. */
export function identifierAt(line: string, character: number): string | undefined {
  for (const m of line.matchAll(/[A-Za-z_$][A-Za-z0-9_$]*/g)) {
    const start = m.index ?? 0;
    if (start <= character && character <= start + m[0].length) return m[0];
  }
  return undefined;
}

/** A DefinitionSource over one document and the files it imports. `document()` is read on
 * every question (the bench types into it). Answers the document itself for a name it
 * defines or binds, else the first imported file, in import order, that defines it (its first
 * definition), else nothing. */
export function symbolIndex(document: () => IndexedDocument, imported: readonly IndexedDocument[]): DefinitionSource {
  const lines = new Map<string, string[]>();
  const linesOf = (d: IndexedDocument): string[] => {
    let l = lines.get(d.uri);
    if (!l) lines.set(d.uri, (l = d.text.split('\n')));
    return l;
  };
  return {
    async locate(uri, at: Spot) {
      const doc = document();
      if (uri !== doc.uri) return [];
      const docLines = doc.text.split('\n');
      const name = identifierAt(docLines[at.line] ?? '', at.character);
      if (!name) return [];
      const own = definitionLines(doc.text, doc.languageId, name);
      const bound = localBinding(name, doc.languageId);
      const ownLine = own.length ? own[0] : docLines.findIndex((l) => bound.test(l));
      if (ownLine >= 0) return [{ uri: doc.uri, line: ownLine }];
      for (const f of imported) {
        const found = definitionLines(f.text, f.languageId, name);
        if (found.length) return [{ uri: f.uri, line: found[0] }];
      }
      return [];
    },
    async read(uri) {
      const doc = document();
      if (uri === doc.uri) return { languageId: doc.languageId, lines: doc.text.split('\n') };
      const f = imported.find((d) => d.uri === uri);
      return f ? { languageId: f.languageId, lines: linesOf(f) } : undefined;
    },
  };
}
