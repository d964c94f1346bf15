// warmup.ts - tells the server when to work ahead (k3.completions.warmup): the editor's
// context for the next completion changed (a document opened or switched to: the server
// prefills that prompt), and a suggestion was accepted (the server computes the next one).
// Sends notifications only; what is warmed and when it yields is the server's
// (server/completion/warmup.ts). Nothing is sent with the setting off, with completions off
// or in a language where ghost text is off.
import type * as vscode from 'vscode';
import { CompletionDidAcceptNotification, type CompletionPositionParams, ContextDidChangeNotification } from '../protocol/lsp';
import type { CompletionSettings } from './settings';

/** How long the active editor must stay put before its prompt is prefilled: switching
 * through several tabs warms only the one the user stops at. */
export const CONTEXT_DEBOUNCE_MS = 150;

/** The command each suggestion runs when accepted (registered in commands.ts). */
export const ACCEPTED_COMMAND = 'k3.completionAccepted';

export interface WarmupHost {
  settings(): CompletionSettings;
  /** The running client, when there is one. */
  sendNotification(method: string, params: CompletionPositionParams): void;
  activeEditor(): vscode.TextEditor | undefined;
}

export class WarmupNotifier {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly host: WarmupHost) {}

  /** The active editor changed (vscode.window.onDidChangeActiveTextEditor), or the server
   * (re)started with one open. */
  editorChanged(editor: vscode.TextEditor | undefined): void {
    clearTimeout(this.timer);
    if (!editor || !this.wanted(editor.document)) return;
    this.timer = setTimeout(() => {
      const now = this.host.activeEditor();
      if (now === editor && this.wanted(editor.document)) this.send(ContextDidChangeNotification.method, editor);
    }, CONTEXT_DEBOUNCE_MS);
  }

  /** A suggestion was accepted in the active editor (ACCEPTED_COMMAND): the cursor is after it. */
  accepted(): void {
    const editor = this.host.activeEditor();
    if (editor && this.wanted(editor.document)) this.send(CompletionDidAcceptNotification.method, editor);
  }

  dispose(): void {
    clearTimeout(this.timer);
  }

  private wanted(document: vscode.TextDocument): boolean {
    const s = this.host.settings();
    const scheme = document.uri.scheme;
    return s.warmup && s.enabled && !s.disabledLanguages.includes(document.languageId) && (scheme === 'file' || scheme === 'untitled');
  }

  private send(method: string, editor: vscode.TextEditor): void {
    const p = editor.selection.active;
    this.host.sendNotification(method, { uri: editor.document.uri.toString(), version: editor.document.version, position: { line: p.line, character: p.character } });
  }
}

/** The suggestions with ACCEPTED_COMMAND attached, so an accept tells the server. */
export function withAcceptCommand<T extends vscode.InlineCompletionItem[] | vscode.InlineCompletionList>(result: T): T {
  const items = Array.isArray(result) ? result : result.items;
  for (const item of items) item.command ??= { command: ACCEPTED_COMMAND, title: 'K3: suggestion accepted' };
  return result;
}
