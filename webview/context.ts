// context.ts - the chat page's context controls above the input: the next message's
// attachment chips (tokens and what the cut rule does, a button to remove each), the
// one-click suggestion chips (the current file and the open editors), the total against the
// model's context, a refused attachment's sentence, and the `@` popup that finds workspace
// files as the user types `@name`. The words come from state.ts; this builds the DOM and
// posts the user's choices.
import type { AttachmentView, FromWebview } from '../protocol/webview';
import { atQuery, budgetLine, chipLabel, chipStatus, type PageState } from './state';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A chip for an attachment; `remove` adds its × button (a pending one). */
export function attachmentChip(a: AttachmentView, remove: boolean): HTMLElement {
  const chip = el('span', { class: `chip attachment${a.fate ? ` fate-${a.fate}` : ''}${a.status ? ` ${a.status}` : ''}`, 'data-attachment': a.id });
  chip.append(el('span', { class: 'chip-label' }, chipLabel(a)));
  const status = chipStatus(a);
  if (status) chip.append(el('span', { class: 'chip-status' }, ` (${status})`));
  if (remove) chip.append(el('button', { class: 'chip-remove', 'data-remove': a.id, title: `Remove ${a.path}`, 'aria-label': `Remove ${a.path}` }, '×'));
  return chip;
}

export class ContextBar {
  /** Goes above the input. */
  readonly element = el('div', { class: 'context', id: 'context' });
  private readonly chips = el('div', { class: 'chips', id: 'attachments' });
  private readonly suggestions = el('div', { class: 'chips suggestions', id: 'suggestions' });
  private readonly budget = el('div', { class: 'budget', id: 'budget' });
  private readonly notice = el('div', { class: 'note error', id: 'draft-notice' });
  private readonly popup = el('div', { class: 'file-popup', id: 'file-popup', role: 'listbox' });
  private selected = 0;
  private lastQuery: string | undefined;

  constructor(
    private readonly input: HTMLTextAreaElement,
    private readonly post: (m: FromWebview) => void,
  ) {
    this.element.append(this.chips, this.suggestions, this.budget, this.notice, this.popup);
    this.element.addEventListener('click', (e) => {
      const target = e.target as HTMLElement;
      const remove = target.closest('[data-remove]')?.getAttribute('data-remove');
      if (remove) return post({ type: 'removeAttachment', id: remove });
      const suggest = target.closest('[data-suggest]')?.getAttribute('data-suggest');
      if (suggest) return post({ type: 'attachFile', uri: suggest });
      const match = target.closest('[data-match]')?.getAttribute('data-match');
      if (match) this.choose(match);
    });
  }

  render(state: PageState): void {
    const d = state.draft;
    this.chips.replaceChildren(...d.attachments.map((a) => attachmentChip(a, true)));
    this.suggestions.replaceChildren(
      ...d.suggestions.map((s) =>
        el('button', { class: 'chip suggestion secondary', 'data-suggest': s.uri, title: `Attach ${s.path}` }, `+ ${s.path}${s.current ? ' (current file)' : ''}`),
      ),
    );
    this.budget.textContent = budgetLine(d.budget);
    this.budget.hidden = this.budget.textContent === '';
    this.notice.textContent = d.notice;
    this.notice.hidden = d.notice === '';
    this.renderPopup(state);
  }

  private renderPopup(state: PageState): void {
    const q = atQuery(this.input.value, this.input.selectionStart ?? this.input.value.length);
    const files = q && state.fileMatches.query === q.query ? state.fileMatches.files : [];
    this.popup.hidden = !q || files.length === 0;
    if (this.selected >= files.length) this.selected = 0;
    this.popup.replaceChildren(
      ...files.map((f, i) => el('div', { class: `match${i === this.selected ? ' selected' : ''}`, role: 'option', 'data-match': f.uri }, f.path)),
    );
  }

  /** After each keystroke: asks the host for files when an `@` query is at the caret. */
  inputChanged(state: PageState): void {
    const q = atQuery(this.input.value, this.input.selectionStart ?? this.input.value.length);
    if (q && q.query !== this.lastQuery) {
      this.lastQuery = q.query;
      this.selected = 0;
      this.post({ type: 'findFiles', query: q.query });
    }
    if (!q) this.lastQuery = undefined;
    this.renderPopup(state);
  }

  /** Keys the popup takes while it is open (arrows, Enter, Tab, Escape); true when taken. */
  key(e: KeyboardEvent, state: PageState): boolean {
    if (this.popup.hidden) return false;
    const n = this.popup.children.length;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      this.selected = (this.selected + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      this.renderPopup(state);
      return true;
    }
    if (e.key === 'Enter' || e.key === 'Tab') {
      const uri = this.popup.children[this.selected]?.getAttribute('data-match');
      if (uri) this.choose(uri);
      return true;
    }
    if (e.key === 'Escape') {
      this.popup.hidden = true;
      return true;
    }
    return false;
  }

  /** Attaches the file and takes the `@query` out of the text. */
  private choose(uri: string): void {
    const caret = this.input.selectionStart ?? this.input.value.length;
    const q = atQuery(this.input.value, caret);
    if (q) {
      this.input.value = this.input.value.slice(0, q.start) + this.input.value.slice(caret);
      this.input.setSelectionRange(q.start, q.start);
    }
    this.popup.hidden = true;
    this.lastQuery = undefined;
    this.post({ type: 'attachFile', uri });
    this.post({ type: 'draftText', text: this.input.value });
    this.input.focus();
  }
}
