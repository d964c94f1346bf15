// completions.ts - the ghost-text policy in front of the LSP inline-completion feature (a
// vscode-languageclient middleware): ask only after typing (not after cursor moves), wait an
// adaptive debounce, cancel the previous request, respect the per-language and on/off
// settings, and report while the engine is thinking. It passes on what the server offers
// as it is: the server shapes the text (one line, the next line, or a block, by
// k3.completions.multiline: server/completion/postprocess.ts), builds prompts and caches
// results; with k3.completions.warmup each suggestion carries the command that tells the
// server it was accepted.
import type * as vscode from 'vscode';
import { AdaptiveDebounce, type EditInfo, LatestOnly, TypingTracker, cancellableWait } from './debounce';
import type { CompletionSettings } from './settings';
import { withAcceptCommand } from './warmup';

/** vscode.InlineCompletionTriggerKind.Invoke: the user asked (Alt+\). Enum values are API. */
const TRIGGER_INVOKE = 0;
/** vscode.TextDocumentChangeReason.Undo and .Redo. */
const REASON_UNDO = 1;
const REASON_REDO = 2;

export interface CompletionHost {
  settings(): CompletionSettings;
  /** Called with true when a request goes to the engine, false when it comes back. */
  thinking(active: boolean): void;
  now(): number;
  /** Gathers and sends the context the cursor uses (definitions.ts) before the request;
   * stops early when the token is cancelled. */
  context?(document: vscode.TextDocument, position: vscode.Position, token: vscode.CancellationToken): Promise<void>;
}

type Result = vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined;

/** The LSP request the middleware wraps (vscode-languageclient's next()). */
type Next = (
  document: vscode.TextDocument,
  position: vscode.Position,
  context: vscode.InlineCompletionContext,
  token: vscode.CancellationToken,
) => vscode.ProviderResult<vscode.InlineCompletionItem[] | vscode.InlineCompletionList>;

export class CompletionPolicy {
  private readonly debounce = new AdaptiveDebounce();
  private readonly typing = new TypingTracker();
  private readonly latest = new LatestOnly();

  constructor(private readonly host: CompletionHost) {}

  /** Feed every document change here (vscode.workspace.onDidChangeTextDocument). */
  documentChanged(e: vscode.TextDocumentChangeEvent): void {
    if (e.contentChanges.length === 0) return;
    const uri = e.document.uri.toString();
    const typed = e.reason !== REASON_UNDO && e.reason !== REASON_REDO;
    const edits: EditInfo[] = e.contentChanges.map((c) => ({ start: c.range.start, text: c.text }));
    this.typing.change(uri, e.document.version, edits, typed);
    if (typed) this.debounce.keystroke(this.host.now());
  }

  documentClosed(uri: string): void {
    this.typing.forget(uri);
  }

  /** Stops whatever is in flight (completions turned off, server restarting). */
  cancelAll(): void {
    this.latest.cancelAll();
  }

  /** The middleware: decides whether and when `next` (the LSP request) runs. */
  async provide(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
    next: Next,
  ): Promise<Result> {
    const settings = this.host.settings();
    const invoked = (context.triggerKind as number) === TRIGGER_INVOKE;
    if (!invoked) {
      if (!settings.enabled || settings.disabledLanguages.includes(document.languageId)) return null;
      if (!this.typing.isTypingAt(document.uri.toString(), document.version, position)) return null;
    }
    const request = this.latest.begin(token);
    try {
      if (!invoked && !(await cancellableWait(this.debounce.delay(settings.debounceMs), request.token))) return null;
      // A provider that fails leaves the server its own context (ring and snippets).
      await this.host.context?.(document, position, request.token as vscode.CancellationToken).catch(() => undefined);
      if (request.token.isCancellationRequested) return null;
      this.host.thinking(true);
      let result: Result;
      try {
        result = await next(document, position, context, request.token as vscode.CancellationToken);
      } finally {
        this.host.thinking(false);
      }
      if (request.token.isCancellationRequested || !result) return null;
      // An accept tells the server, which computes the next suggestion ahead (warmup.ts).
      return settings.warmup ? withAcceptCommand(result) : result;
    } finally {
      this.latest.end(request);
    }
  }
}
