// chatView.ts - hosts the chat page: the webview view in K3's activity-bar container, its
// HTML with a strict Content-Security-Policy (a fresh nonce per page, no remote resources,
// scripts and styles only from dist/webview), and the glue between the page's messages and
// ChatController, and the editor's side of attachments (K3: Add Selection to Chat, the open
// editors as suggestions). The conversation logic is in chat.ts, the files in chatFiles.ts;
// the page itself in webview/.
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import type { ChatActionView, ToWebview } from '../protocol/webview';
import { ChatController, parseFromWebview, type ChatBackend } from './chat';
import { EditorChatFiles, selectionAttachment } from './chatFiles';

export const CHAT_VIEW_ID = 'k3.chat';

export interface ChatViewHooks {
  log(message: string): void;
  thinking(active: boolean): void;
  speed(tokensPerSecond: number): void;
  /** The editor the Insert button writes into (the last one that had focus). */
  lastEditor(): vscode.TextEditor | undefined;
  /** A button of the panel's notice. */
  runAction(action: ChatActionView): void;
  /** A code block's Apply: the diff flow of inline edit (edit/inlineEdit.ts). */
  apply(code: string, path: string | undefined): Promise<void>;
}

export class ChatViewProvider implements vscode.WebviewViewProvider, vscode.Disposable {
  readonly controller: ChatController;
  private view: vscode.WebviewView | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    backend: ChatBackend,
    private readonly hooks: ChatViewHooks,
  ) {
    this.controller = new ChatController({
      backend,
      files: new EditorChatFiles(),
      post: (m) => this.post(m),
      copy: (text) => Promise.resolve(vscode.env.clipboard.writeText(text)),
      insert: (text) => insertAtCursor(hooks.lastEditor(), text),
      apply: (text, path) => hooks.apply(text, path),
      inform: (message) => void vscode.window.showInformationMessage(message),
      thinking: hooks.thinking,
      speed: hooks.speed,
      runAction: hooks.runAction,
      newId: () => crypto.randomUUID(),
      now: () => Date.now(),
    });
  }

  /** Listens for the editors the suggestion chips name. */
  watchEditors(): vscode.Disposable {
    const changed = () => this.controller.editorsChanged();
    return vscode.Disposable.from(
      vscode.window.onDidChangeActiveTextEditor(changed),
      vscode.window.tabGroups.onDidChangeTabs(changed),
    );
  }

  /** K3: Add Selection to Chat: the active editor's selection (its whole lines; the
   * cursor's line when nothing is selected) becomes an attachment of the next message. */
  async addSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor ?? this.hooks.lastEditor();
    if (!editor) {
      void vscode.window.showInformationMessage('K3: open a file and select code to add it to the chat.');
      return;
    }
    const attachment = selectionAttachment(editor);
    await vscode.commands.executeCommand(`${CHAT_VIEW_ID}.focus`);
    await this.controller.attach(attachment);
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const root = vscode.Uri.joinPath(this.extensionUri, 'dist', 'webview');
    view.webview.options = { enableScripts: true, localResourceRoots: [root] };
    view.webview.html = chatHtml(view.webview.cspSource, view.webview.asWebviewUri(root).toString(), nonce());
    this.disposables.push(
      view.webview.onDidReceiveMessage((raw: unknown) => {
        const message = parseFromWebview(raw);
        if (!message) return this.hooks.log(`chat: ignored a malformed message from the page: ${JSON.stringify(raw)}`);
        this.controller.handle(message).catch((e: unknown) => this.hooks.log(`chat: ${message.type} failed: ${String(e)}`));
      }),
      view.onDidDispose(() => {
        this.view = undefined;
      }),
      // Another window of the workspace may have added conversations meanwhile.
      view.onDidChangeVisibility(() => {
        if (view.visible) void this.controller.refresh();
      }),
    );
  }

  /** Shows the view and starts a new conversation with the input focused. */
  async newChat(): Promise<void> {
    await vscode.commands.executeCommand(`${CHAT_VIEW_ID}.focus`);
    this.controller.newChat();
  }

  private post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

function nonce(): string {
  return crypto.randomBytes(18).toString('base64');
}

/**
 * The page. Nothing inline but the nonce'd script tag's attribute; `default-src 'none'`
 * blocks every fetch, frame and remote font; images only from the extension or data URIs.
 */
export function chatHtml(cspSource: string, assetRoot: string, nonceValue: string): string {
  const csp = [
    "default-src 'none'",
    `style-src ${cspSource}`,
    `font-src ${cspSource}`,
    `img-src ${cspSource} data:`,
    `script-src 'nonce-${nonceValue}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${assetRoot}/main.css">
<title>K3 Chat</title>
</head>
<body>
<div id="app"></div>
<script nonce="${nonceValue}" src="${assetRoot}/main.js"></script>
</body>
</html>`;
}

async function insertAtCursor(editor: vscode.TextEditor | undefined, text: string): Promise<boolean> {
  if (!editor || editor.document.isClosed) return false;
  const shown = await vscode.window.showTextDocument(editor.document, editor.viewColumn);
  return shown.edit((b) => {
    for (const s of shown.selections) b.replace(s, text);
  });
}
