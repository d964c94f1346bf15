// session.ts - one inline edit drawn in its document: the lines being rewritten, the
// rewrite streaming in under them, then the diff (removed lines red, inserted lines green,
// each hunk with Accept / Reject above it) until every hunk is decided. The diff is drawn as
// real lines, so the undo history fills with its stages; when the session ends they are
// undone back to the text it started from, and the outcome is applied as one edit: an
// accepted edit is undone with one Undo, and a rejected or cancelled one leaves the text
// exactly as it was. (When the user changed the document meanwhile, the stages stay in the
// history rather than undo their work.) The diff itself is hunks.ts; the commands and the
// request are inlineEdit.ts.
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
  /** Edits made to draw the stages (streaming, the diff, a hunk decided). */
  private drawn = 0;
  /** The whole document when the session began. */
  private readonly startText: string;
  /** The user changed the document during the session (outside the region). */
  private foreign = false;
  /** Characters of the starting text before and after the region. */
  private readonly prefixLength: number;
  private readonly suffixLength: number;
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
    this.startText = document.getText();
    const region = this.range();
    this.prefixLength = document.offsetAt(region.start);
    this.suffixLength = this.startText.length - document.offsetAt(region.end);
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
    await this.draw(shownLines(this.original, this.rewrite, this.hunks, this.states));
    // The phase changes once the diff is drawn, so that its Accept / Reject find their lines.
    if (this.phase === 'generating') this.phase = 'diff';
    this.paint();
    this.changed(this);
    return this.phase === 'diff';
  }

  /** Decides hunks (undefined: every pending one); the session ends when none is pending. */
  async decide(accept: boolean, hunk?: number): Promise<void> {
    if (this.phase !== 'diff') return;
    this.states = this.states.map((s, k) => (s === 'pending' && (hunk === undefined || hunk === k) ? (accept ? 'accepted' : 'rejected') : s));
    const shown = shownLines(this.original, this.rewrite, this.hunks, this.states);
    if (this.states.every((s) => s !== 'pending')) await this.end(shown.map((l) => l.text));
    else await this.draw(shown);
  }

  /** Ends the session with the original text back (Esc, Reject while generating, a reply
   * that is not code, a failure). */
  finish(): Promise<void> {
    if (this.phase === 'ended') return this.queue.then(() => undefined);
    return this.end(this.original);
  }

  /** Ends the session with `outcome` as the region's text: the drawn stages undone, then
   * the outcome as one edit of its own. */
  private end(outcome: readonly string[]): Promise<void> {
    this.phase = 'ended';
    const run = async (): Promise<void> => {
      const lines = outcome.map((text): ShownLine => ({ text, kind: 'same' }));
      if (this.drawn > 0 && !this.foreign) {
        await this.undoStages();
        if (this.document.getText() !== this.startText) {
          // Undo did not lead back (another editor had focus): the outcome replaces the whole
          // document as one edit, from the text the session began with.
          await this.replaceAll(this.startText.slice(0, this.prefixLength) + this.text(lines) + this.startText.slice(this.startText.length - this.suffixLength));
          this.shown = lines;
          this.paint();
          this.changed(this);
          return;
        }
        this.shown = this.original.map((text) => ({ text, kind: 'same' }));
      }
      await this.replace(lines, true);
      this.paint();
      this.changed(this);
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Undoes this session's drawn stages in the focused editor until the document is the
   * text it started as; at most one Undo per stage. */
  private async undoStages(): Promise<void> {
    const editor = this.editor();
    if (!editor) return;
    await vscode.window.showTextDocument(this.document, { viewColumn: editor.viewColumn, preserveFocus: false });
    this.applying = true;
    try {
      for (let i = 0; i < this.drawn + 1 && this.document.getText() !== this.startText; i++) {
        await vscode.commands.executeCommand('undo');
      }
    } finally {
      this.applying = false;
    }
  }

  private async replaceAll(text: string): Promise<void> {
    const all = new vscode.Range(0, 0, this.document.lineCount, 0);
    const editor = this.editor();
    this.applying = true;
    try {
      if (editor) await editor.edit((b) => b.replace(this.document.validateRange(all), text), { undoStopBefore: true, undoStopAfter: true });
    } finally {
      this.applying = false;
    }
  }

  /** Someone else changed the document: its history is no longer only this session's. */
  changedByOthers(): void {
    this.foreign = true;
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

  /** Replaces the region with `lines` and paints them, after the edits before it. */
  private draw(lines: ShownLine[]): Promise<void> {
    const run = async (): Promise<void> => {
      if (await this.replace(lines, false)) this.drawn++;
      this.paint();
      this.changed(this);
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Replaces the region with `lines` when they differ from it; `own` makes the edit an undo
   * step of its own. Returns whether the document changed. */
  private async replace(lines: ShownLine[], own: boolean): Promise<boolean> {
    const range = this.range();
    const text = this.text(lines);
    const changed = this.document.getText(range) !== text;
    if (changed) {
      const editor = this.editor();
      this.applying = true;
      try {
        if (editor) await editor.edit((b) => b.replace(range, text), { undoStopBefore: own || this.drawn === 0, undoStopAfter: own });
        else {
          const edit = new vscode.WorkspaceEdit();
          edit.replace(this.document.uri, range, text);
          await vscode.workspace.applyEdit(edit);
        }
      } finally {
        this.applying = false;
      }
    }
    this.shown = lines;
    return changed;
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
