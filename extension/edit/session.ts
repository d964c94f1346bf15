// session.ts - one inline edit drawn in its document: the lines being rewritten, the
// rewrite streaming in under them, then the diff (removed lines red, inserted lines green,
// each hunk with Accept / Reject above it) until every hunk is decided. Every change it
// makes to the document belongs to one undo step: the first opens it, the last closes it,
// so an accepted edit is undone with one Undo and a rejected or cancelled one leaves the
// text exactly as it was. The diff itself is hunks.ts; the commands and the request are
// inlineEdit.ts.
import * as vscode from 'vscode';
import { diffLines, shownLines, type Hunk, type HunkState, type ShownLine } from './hunks';

export interface SessionLook {
  removed: vscode.TextEditorDecorationType;
  inserted: vscode.TextEditorDecorationType;
  /** The whole region while the model writes. */
  pending: vscode.TextEditorDecorationType;
}

export type SessionPhase = 'generating' | 'diff' | 'ended';

export class EditSession {
  phase: SessionPhase = 'generating';
  /** The region's first line now (moves when lines above it change). */
  start: number;
  /** What the region shows now, line by line. */
  private shown: ShownLine[];
  private rewrite: string[] = [];
  hunks: Hunk[] = [];
  states: HunkState[] = [];
  /** Whether the region runs to the end of the document (its last line has no line break). */
  private readonly toEnd: boolean;
  private readonly eol: string;
  /** Edits run one after another; each waits for the one before. */
  private queue: Promise<unknown> = Promise.resolve();
  private undoOpen = false;
  /** Set while this session's own edit is applied, so its change events are not foreign. */
  applying = false;

  constructor(
    readonly document: vscode.TextDocument,
    start: number,
    readonly original: readonly string[],
    private readonly look: SessionLook,
    private readonly changed: (s: EditSession) => void,
  ) {
    this.start = start;
    this.shown = original.map((text) => ({ text, kind: 'removed' }));
    this.toEnd = start + original.length >= document.lineCount;
    this.eol = document.eol === vscode.EndOfLine.CRLF ? '\r\n' : '\n';
  }

  get ended(): boolean {
    return this.phase === 'ended';
  }

  /** The lines [start, start + n) of the region as shown now. */
  get lineCount(): number {
    return this.shown.length;
  }

  /** The line where hunk k starts to show (for its Accept / Reject). */
  hunkLine(k: number): number | undefined {
    const i = this.shown.findIndex((l) => l.hunk === k);
    return i < 0 ? undefined : this.start + i;
  }

  /** Shows the rewrite so far under the original lines (all of them marked as going). */
  stream(code: string): Promise<void> {
    if (this.phase !== 'generating') return this.queue.then(() => undefined);
    const lines = code === '' ? [] : code.split('\n');
    return this.draw([...this.original.map((text): ShownLine => ({ text, kind: 'removed' })), ...lines.map((text): ShownLine => ({ text, kind: 'inserted' }))]);
  }

  /** The finished rewrite as a diff; false when it changes nothing (the text is restored). */
  async showDiff(code: string): Promise<boolean> {
    if (this.phase === 'ended') return false;
    this.rewrite = code.split(/\r?\n/);
    this.hunks = diffLines(this.original, this.rewrite);
    this.states = this.hunks.map(() => 'pending');
    if (this.hunks.length === 0) {
      await this.finish();
      return false;
    }
    this.phase = 'diff';
    await this.draw(shownLines(this.original, this.rewrite, this.hunks, this.states));
    return true;
  }

  /** Decides hunks (undefined: every pending one); the session ends when none is pending. */
  async decide(accept: boolean, hunk?: number): Promise<void> {
    if (this.phase !== 'diff') return;
    this.states = this.states.map((s, k) => (s === 'pending' && (hunk === undefined || hunk === k) ? (accept ? 'accepted' : 'rejected') : s));
    if (this.states.every((s) => s !== 'pending')) {
      this.phase = 'ended';
      await this.draw(shownLines(this.original, this.rewrite, this.hunks, this.states), true);
    } else {
      await this.draw(shownLines(this.original, this.rewrite, this.hunks, this.states));
    }
  }

  /** Ends the session with the original text back (Esc, Reject while generating, a reply
   * that is not code, a failure). */
  finish(): Promise<void> {
    const wasOpen = this.phase !== 'ended';
    this.phase = 'ended';
    if (!wasOpen && !this.undoOpen) return this.queue.then(() => undefined);
    return this.draw(this.original.map((text) => ({ text, kind: 'same' })), true);
  }

  /** Lines above the region changed by `delta` (a foreign edit outside it). */
  shift(delta: number): void {
    this.start += delta;
  }

  /** The region's range in the document now. */
  private range(): vscode.Range {
    const end = this.start + this.shown.length;
    if (this.toEnd || end >= this.document.lineCount) {
      const last = this.document.lineAt(this.document.lineCount - 1);
      return new vscode.Range(this.start, 0, last.lineNumber, last.text.length);
    }
    return new vscode.Range(this.start, 0, end, 0);
  }

  private text(lines: readonly ShownLine[]): string {
    const body = lines.map((l) => l.text).join(this.eol);
    return this.toEnd ? body : lines.length === 0 ? '' : body + this.eol;
  }

  /** Replaces the region with `lines` and paints them; `last` closes the undo step. */
  private draw(lines: ShownLine[], last = false): Promise<void> {
    const run = async (): Promise<void> => {
      const range = this.range();
      const text = this.text(lines);
      const first = !this.undoOpen;
      const same = this.document.getText(range) === text;
      if (!same || (last && this.undoOpen)) {
        const editor = this.editor();
        this.applying = true;
        try {
          // An edit that changes nothing still closes the undo step this session opened.
          if (editor) await editor.edit((b) => (same ? undefined : b.replace(range, text)), { undoStopBefore: first, undoStopAfter: last });
          else if (!same) {
            const edit = new vscode.WorkspaceEdit();
            edit.replace(this.document.uri, range, text);
            await vscode.workspace.applyEdit(edit);
          }
        } finally {
          this.applying = false;
        }
        this.undoOpen = !last;
      }
      this.shown = lines;
      this.paint();
      this.changed(this);
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private editor(): vscode.TextEditor | undefined {
    const active = vscode.window.activeTextEditor;
    if (active?.document === this.document) return active;
    return vscode.window.visibleTextEditors.find((e) => e.document === this.document);
  }

  /** Paints the region in every editor showing the document (nothing once it ended). */
  paint(): void {
    const of = (kind: ShownLine['kind']): vscode.Range[] =>
      this.phase === 'ended' ? [] : this.shown.flatMap((l, i) => (l.kind === kind ? [new vscode.Range(this.start + i, 0, this.start + i, 0)] : []));
    const pending =
      this.phase === 'generating' && this.shown.length > 0 ? [new vscode.Range(this.start, 0, this.start + this.shown.length - 1, 0)] : [];
    for (const e of vscode.window.visibleTextEditors) {
      if (e.document !== this.document) continue;
      e.setDecorations(this.look.removed, of('removed'));
      e.setDecorations(this.look.inserted, of('inserted'));
      e.setDecorations(this.look.pending, pending);
    }
  }
}
