// inlineEdit.ts - K3: Edit (Ctrl+I / Cmd+I) and the chat's Apply: picks the lines to
// rewrite (the selection, else the enclosing function or indentation block), asks for the
// instruction, sends k3/edit/start and streams the rewrite into the document as an
// EditSession, and offers Accept / Reject for the whole edit and each hunk as CodeLens
// (Ctrl+Shift+Enter accepts all, Esc rejects all or cancels the generation). A model that
// cannot chat is said so, with the chat panel's ways out, before anything is asked. One
// session per document; the diff itself is hunks.ts, the drawing session.ts.
import * as crypto from 'node:crypto';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CancellationTokenSource, LSPErrorCodes, ResponseError, type LanguageClient } from 'vscode-languageclient/node';
import { EditStartRequest, EditStreamNotification, type EditStreamParams } from '../../protocol/lsp';
import type { ChatAvailabilityView } from '../../protocol/webview';
import { describeRequestError } from '../chatBackend';
import { enclosingSymbol, indentationBlock, type LineSpan, type SymbolSpan } from './range';
import { EditSession, type SessionLook } from './session';

export const ACTIVE_CONTEXT = 'k3.inlineEdit.active';

export interface InlineEditDeps {
  client(): LanguageClient | undefined;
  /** Whether the chat model can answer now (the chat panel's notice), and the name of the
   * local model when it is one not trained for chat. */
  availability(): { view: ChatAvailabilityView; cannotChat: string | undefined };
  /** Runs a notice button's action (choose a model folder, open the remote settings). */
  runAction(action: ChatAvailabilityView['actions'][number]['action']): void;
  /** The editor Apply targets when a code block names no file (the last one that had focus). */
  lastEditor(): vscode.TextEditor | undefined;
  log(message: string): void;
}

function toSpans(symbols: readonly vscode.DocumentSymbol[]): SymbolSpan[] {
  return symbols.map((s) => ({
    start: s.range.start.line,
    end: s.range.end.line,
    kind: vscode.SymbolKind[s.kind] ?? '',
    children: toSpans(s.children ?? []),
  }));
}

/** The whole lines a selection covers (a selection ending at a line's start leaves that line out). */
export function selectedLines(selection: vscode.Selection): LineSpan {
  const end = selection.end.character === 0 && selection.end.line > selection.start.line ? selection.end.line - 1 : selection.end.line;
  return { start: selection.start.line, end };
}

function linesOf(doc: vscode.TextDocument, span: LineSpan): string[] {
  const out: string[] = [];
  for (let l = span.start; l <= span.end; l++) out.push(doc.lineAt(l).text);
  return out;
}

export class InlineEdits implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly sessions = new Map<string, EditSession>();
  /** The request of each generating session. */
  private readonly requests = new Map<EditSession, CancellationTokenSource>();
  private readonly streams = new Map<string, (p: EditStreamParams) => void>();
  private readonly lensChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensChanged.event;
  private readonly look: SessionLook;
  private readonly disposables: vscode.Disposable[] = [];
  private streamClient: LanguageClient | undefined;

  constructor(private readonly deps: InlineEditDeps) {
    this.look = {
      removed: vscode.window.createTextEditorDecorationType({
        isWholeLine: true,
        backgroundColor: new vscode.ThemeColor('diffEditor.removedLineBackground'),
        textDecoration: 'line-through',
        opacity: '0.7',
        overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.deletedForeground'),
        overviewRulerLane: vscode.OverviewRulerLane.Left,
      }),
      inserted: vscode.window.createTextEditorDecorationType({
        isWholeLine: true,
        backgroundColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
        overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.addedForeground'),
        overviewRulerLane: vscode.OverviewRulerLane.Left,
      }),
      pending: vscode.window.createTextEditorDecorationType({
        isWholeLine: true,
        border: '1px dashed',
        borderColor: new vscode.ThemeColor('editorInfo.foreground'),
      }),
    };
    this.disposables.push(
      this.look.removed,
      this.look.inserted,
      this.look.pending,
      this.lensChanged,
      vscode.languages.registerCodeLensProvider({ scheme: '*' }, this),
      vscode.commands.registerCommand('k3.inlineEdit.hunk', (uri: string, hunk: number, accept: boolean) => this.decide(uri, accept, hunk)),
      vscode.workspace.onDidChangeTextDocument((e) => this.documentChanged(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.sessions.get(d.uri.toString()) && void this.end(d.uri.toString(), 'closed')),
      vscode.window.onDidChangeVisibleTextEditors(() => {
        for (const s of this.sessions.values()) s.paint();
      }),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
    );
  }

  /** K3: Edit. */
  async start(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) return void vscode.window.showInformationMessage('K3: open a file and put the cursor in the code to edit.');
    const key = editor.document.uri.toString();
    if (this.sessions.has(key)) return void vscode.window.showInformationMessage('K3: accept or reject the edit in progress first (Ctrl+Shift+Enter accepts it, Esc rejects it).');
    if (!this.canChat()) return;
    const span = await this.spanToEdit(editor);
    const doc = editor.document;
    const what = span.start === span.end ? `line ${span.start + 1}` : `lines ${span.start + 1}–${span.end + 1}`;
    editor.selection = new vscode.Selection(span.start, 0, span.end, doc.lineAt(span.end).text.length);
    const instruction = await vscode.window.showInputBox({
      title: `K3: Edit ${what} of ${path.basename(doc.fileName)}`,
      prompt: 'What should change? The rewrite streams in as a diff to accept or reject.',
      placeHolder: 'e.g. add type hints; handle the empty list; rename x to count',
      ignoreFocusOut: true,
    });
    if (!instruction?.trim()) return;
    if (this.sessions.has(key)) return;
    if (!this.canChat()) return;
    const client = this.deps.client();
    if (!client?.isRunning()) return void vscode.window.showWarningMessage('K3: the engine is not running; restart it from the K3 menu.');
    const session = this.open(doc, span);
    // The diff's colours show what changes; a selection over them would hide them.
    editor.selection = new vscode.Selection(span.start, 0, span.start, 0);
    const editId = crypto.randomUUID();
    const cancel = new CancellationTokenSource();
    this.requests.set(session, cancel);
    this.listen(client);
    this.streams.set(editId, (p) => void session.stream(p.code));
    const endLine = doc.lineAt(span.end).range.end;
    try {
      const result = await client.sendRequest(
        EditStartRequest.type,
        {
          editId,
          languageId: doc.languageId,
          path: vscode.workspace.asRelativePath(doc.uri),
          before: doc.getText(new vscode.Range(0, 0, span.start, 0)),
          selection: linesOf(doc, span).join('\n'),
          after: doc.getText(new vscode.Range(endLine, doc.lineAt(doc.lineCount - 1).range.end)).replace(/^\r?\n/, ''),
          instruction: instruction.trim(),
        },
        cancel.token,
      );
      if (session.phase === 'ended') return;
      this.requests.delete(session);
      if (result.reply.kind === 'message') {
        await this.end(key, 'message');
        void vscode.window.showInformationMessage(`K3: the reply holds no code to apply, so nothing changed. It says: ${result.reply.text}`);
        return;
      }
      if (!(await session.showDiff(result.reply.code))) {
        this.sessions.delete(key);
        this.changed();
        void vscode.window.showInformationMessage('K3: the rewrite is the same as the code; nothing changed.');
      }
      this.changed();
    } catch (e) {
      // Esc cancels the request; anything else that ends it is a failure to report.
      const cancelled = cancel.token.isCancellationRequested || (e instanceof ResponseError && e.code === LSPErrorCodes.RequestCancelled);
      if (session.phase !== 'ended') await this.end(key, 'failed');
      if (!cancelled) {
        this.deps.log(`k3/edit/start: ${describeRequestError(e)}`);
        void vscode.window.showErrorMessage(`K3: the edit failed, nothing changed: ${describeRequestError(e)}`);
      }
    } finally {
      this.streams.delete(editId);
      this.requests.delete(session);
      cancel.dispose();
    }
  }

  /** The chat's Apply: `code` as a diff against the file the block names (relative to the
   * workspace, or absolute), else the last active editor; against its selected lines when
   * there is a selection, else the whole file. */
  async apply(code: string, target?: string): Promise<void> {
    let editor = this.deps.lastEditor();
    if (target) {
      const uri = this.resolve(target);
      if (!uri) return void vscode.window.showWarningMessage(`K3: the code block names ${target}, which is not a file of this workspace; nothing was applied.`);
      editor = await vscode.window.showTextDocument(uri);
    } else if (editor && !editor.document.isClosed) {
      editor = await vscode.window.showTextDocument(editor.document, editor.viewColumn);
    } else {
      return void vscode.window.showInformationMessage('K3: open the file to apply the code to, then press Apply again.');
    }
    const doc = editor.document;
    const key = doc.uri.toString();
    if (this.sessions.has(key)) return void vscode.window.showInformationMessage('K3: accept or reject the edit in progress first.');
    // The whole file leaves out its final empty line: the block's code carries no final line
    // break, and the file keeps its own.
    const lastText = doc.lineCount > 1 && doc.lineAt(doc.lineCount - 1).text === '' ? doc.lineCount - 2 : doc.lineCount - 1;
    const span = editor.selection.isEmpty ? { start: 0, end: lastText } : selectedLines(editor.selection);
    const session = this.open(doc, span);
    if (!(await session.showDiff(code.replace(/\r?\n$/, '')))) {
      this.sessions.delete(key);
      void vscode.window.showInformationMessage(`K3: ${path.basename(doc.fileName)} already holds this code; nothing changed.`);
    }
    this.changed();
  }

  /** Accepts or rejects every pending hunk of the active editor's edit; Esc while the model
   * writes cancels it (rejecting leaves the text as it was). */
  async decideAll(accept: boolean): Promise<void> {
    const key = vscode.window.activeTextEditor?.document.uri.toString();
    const session = key ? this.sessions.get(key) : undefined;
    if (!session || !key) return;
    if (session.phase === 'generating') {
      if (accept) return void vscode.window.showInformationMessage('K3: the rewrite is still coming; accept it once the diff is shown (Esc cancels).');
      return this.end(key, 'cancelled');
    }
    await this.decide(key, accept);
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const session = this.sessions.get(document.uri.toString());
    if (!session || session.phase === 'ended') return [];
    const top = new vscode.Range(session.start, 0, session.start, 0);
    if (session.phase === 'generating') {
      return [new vscode.CodeLens(top, { title: 'K3 is writing the rewrite… Cancel (Esc)', command: 'k3.inlineEdit.rejectAll' })];
    }
    const uri = document.uri.toString();
    const lenses = [
      new vscode.CodeLens(top, { title: 'Accept All (Ctrl+Shift+Enter)', command: 'k3.inlineEdit.acceptAll' }),
      new vscode.CodeLens(top, { title: 'Reject All (Esc)', command: 'k3.inlineEdit.rejectAll' }),
    ];
    session.states.forEach((state, k) => {
      const line = session.hunkLine(k);
      if (state !== 'pending' || line === undefined) return;
      const at = new vscode.Range(line, 0, line, 0);
      lenses.push(
        new vscode.CodeLens(at, { title: 'Accept', command: 'k3.inlineEdit.hunk', arguments: [uri, k, true] }),
        new vscode.CodeLens(at, { title: 'Reject', command: 'k3.inlineEdit.hunk', arguments: [uri, k, false] }),
      );
    });
    return lenses;
  }

  dispose(): void {
    for (const key of [...this.sessions.keys()]) void this.end(key, 'closed');
    for (const d of this.disposables.splice(0)) d.dispose();
  }

  private canChat(): boolean {
    const { view, cannotChat } = this.deps.availability();
    if (view.canSend && !cannotChat) return true;
    const sentence = cannotChat
      ? `${cannotChat} is a code-completion model, not trained for chat: it cannot follow an edit instruction. Inline edit needs a chat model: a Kimi K3 model folder or a remote K3 server.`
      : view.notice || 'The engine cannot answer now.';
    const titles = view.actions.map((a) => a.title);
    void vscode.window.showWarningMessage(`K3: ${sentence}`, ...titles).then((pick) => {
      const action = view.actions.find((a) => a.title === pick);
      if (action) this.deps.runAction(action.action);
    });
    return false;
  }

  private async spanToEdit(editor: vscode.TextEditor): Promise<LineSpan> {
    if (!editor.selection.isEmpty) return selectedLines(editor.selection);
    const line = editor.selection.active.line;
    try {
      const symbols = await vscode.commands.executeCommand<vscode.DocumentSymbol[] | undefined>('vscode.executeDocumentSymbolProvider', editor.document.uri);
      const found = symbols && 'children' in (symbols[0] ?? {}) ? enclosingSymbol(toSpans(symbols), line) : undefined;
      if (found) return found;
    } catch {
      // No symbol provider for this language: the indentation decides.
    }
    const lines: string[] = [];
    for (let l = 0; l < editor.document.lineCount; l++) lines.push(editor.document.lineAt(l).text);
    return indentationBlock(lines, line);
  }

  private open(doc: vscode.TextDocument, span: LineSpan): EditSession {
    const session = new EditSession(doc, span.start, linesOf(doc, span), this.look, () => this.changed());
    this.sessions.set(doc.uri.toString(), session);
    this.changed();
    return session;
  }

  private async decide(key: string, accept: boolean, hunk?: number): Promise<void> {
    const session = this.sessions.get(key);
    if (!session || session.phase !== 'diff') return;
    await session.decide(accept, hunk);
    if (session.ended) this.sessions.delete(key);
    this.changed();
  }

  /** Ends a session with the original text back, cancelling its request. */
  private async end(key: string, why: 'cancelled' | 'message' | 'failed' | 'closed'): Promise<void> {
    const session = this.sessions.get(key);
    if (!session) return;
    this.sessions.delete(key);
    this.requests.get(session)?.cancel();
    if (why !== 'closed') await session.finish();
    this.changed();
  }

  private resolve(target: string): vscode.Uri | undefined {
    if (path.isAbsolute(target)) return vscode.Uri.file(target);
    const folder = vscode.workspace.workspaceFolders?.[0];
    return folder ? vscode.Uri.joinPath(folder.uri, target) : undefined;
  }

  /** A change made by someone else: above a session's region it moves the region; inside it
   * (the user typed into the diff) the session ends and leaves the text as it is. */
  private documentChanged(e: vscode.TextDocumentChangeEvent): void {
    const key = e.document.uri.toString();
    const session = this.sessions.get(key);
    if (!session || session.applying || e.contentChanges.length === 0) return;
    session.changedByOthers();
    for (const c of e.contentChanges) {
      const added = c.text.split('\n').length - 1;
      const removed = c.range.end.line - c.range.start.line;
      if (c.range.end.line < session.start) session.shift(added - removed);
      else if (c.range.start.line < session.start + session.lineCount) {
        this.sessions.delete(key);
        this.requests.get(session)?.cancel();
        session.phase = 'ended';
        session.paint();
        this.changed();
        void vscode.window.showWarningMessage('K3: the file changed inside the edit, so the edit stopped and the text is left as it is (Undo takes it back).');
        return;
      }
    }
  }

  private listen(client: LanguageClient): void {
    if (this.streamClient === client) return;
    this.streamClient = client;
    this.disposables.push(client.onNotification(EditStreamNotification.type, (p) => this.streams.get(p.editId)?.(p)));
  }

  private changed(): void {
    this.lensChanged.fire();
    this.updateContext();
  }

  private updateContext(): void {
    const key = vscode.window.activeTextEditor?.document.uri.toString();
    void vscode.commands.executeCommand('setContext', ACTIVE_CONTEXT, key !== undefined && this.sessions.has(key));
  }
}
