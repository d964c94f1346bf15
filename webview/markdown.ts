// markdown.ts - turns a reply's markdown into safe HTML for the chat page: markdown-it (the
// parser VS Code's own markdown preview uses) with raw HTML off, then DOMPurify, which
// removes anything executable or styled that got through. A code block carries what it says
// about itself (codeBlocks.ts) as data-lang and data-path, and its highlighting
// (highlight.ts) is sanitised again down to spans with a class. The page's
// Content-Security-Policy blocks remote images and fetches on top of this.
import DOMPurify from 'dompurify';
import MarkdownIt from 'markdown-it';
import { blockInfo } from './codeBlocks';
import { highlightCode } from './highlight';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style', 'id', 'class'],
};

/** Highlighted code: spans with a class, nothing else. */
const PURIFY_HIGHLIGHT = { ALLOWED_TAGS: ['span'], ALLOWED_ATTR: ['class'] };

md.renderer.rules.fence = (tokens, idx, _options, env) => {
  const token = tokens[idx]!;
  const start = token.map?.[0];
  const lineBefore = start !== undefined && start > 0 ? (env as { lines?: string[] } | undefined)?.lines?.[start - 1] : undefined;
  const info = blockInfo(token.info, lineBefore);
  const attrs = [info.language ? ` data-lang="${md.utils.escapeHtml(info.language)}"` : '', info.path ? ` data-path="${md.utils.escapeHtml(info.path)}"` : ''].join('');
  return `<pre${attrs}><code>${md.utils.escapeHtml(token.content)}</code></pre>\n`;
};

export function renderMarkdown(source: string): string {
  return DOMPurify.sanitize(md.render(source, { lines: source.split('\n') }), PURIFY);
}

/** Colours each code block of `root` whose language is known (after sanitising). */
export function highlightBlocks(root: HTMLElement): void {
  for (const pre of Array.from(root.querySelectorAll('pre[data-lang]'))) {
    const code = pre.querySelector('code');
    const html = code ? highlightCode(code.textContent ?? '', pre.getAttribute('data-lang') ?? '') : undefined;
    if (!code || html === undefined) continue;
    code.innerHTML = DOMPurify.sanitize(html, PURIFY_HIGHLIGHT);
    code.classList.add('hljs');
  }
}
