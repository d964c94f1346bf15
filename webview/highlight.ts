// highlight.ts - syntax highlighting for the chat's code blocks: highlight.js's core with the
// languages people ask about most registered by hand (these fifteen add about 86 KB to the
// minified page; the full build is about 1 MB), producing spans with `hljs-*` classes that
// main.css colours from the theme. Runs in the page; the output is escaped text inside
// spans, nothing executable, and the page keeps it to spans with a class.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = { bash, c, cpp, css, go, java, javascript, json, markdown, python, rust, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** The code as highlighted HTML, or undefined when the language is not one registered (the
 * block then stays plain text: guessing a language colours prose as code). */
export function highlightCode(code: string, language: string): string | undefined {
  const name = language.toLowerCase();
  if (!name || !hljs.getLanguage(name)) return undefined;
  return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
}
