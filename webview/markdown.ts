// markdown.ts - turns a reply's markdown into safe HTML for the chat page: markdown-it (the
// parser VS Code's own markdown preview uses) with raw HTML off, then DOMPurify, which
// removes anything executable or styled that got through. The page's Content-Security-Policy
// blocks remote images and fetches on top of this.
import DOMPurify from 'dompurify';
import MarkdownIt from 'markdown-it';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style', 'id', 'class'],
};

export function renderMarkdown(source: string): string {
  return DOMPurify.sanitize(md.render(source), PURIFY);
}
