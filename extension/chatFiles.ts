// chatFiles.ts - the editor's side of chat context: a selection or a workspace file made
// into an attachment (a binary or huge file refused with its size), the open editors as
// one-click suggestions (the current one first), workspace files found for the page's `@`
// popup (vscode.workspace.findFiles, then a fuzzy match on the path), and whether an
// attachment's file changed or is gone since it was sent. chat.ts uses it through
// ChatFiles; this is the only part of the chat that reads files.
import * as vscode from 'vscode';
import type { ChatAttachment, SentAttachment } from '../protocol/lsp';
import type { SuggestionView } from '../protocol/webview';
import type { ChatFiles } from './chat';
import { fuzzyRank } from './fuzzy';

/** Largest file attached whole (the selection of a bigger one still can be). */
export const MAX_FILE_BYTES = 1024 * 1024;
/** Bytes looked at for a NUL to call a file binary. */
const BINARY_PROBE = 8192;
/** Files the `@` popup lists, and files it asks the workspace for. */
const MATCHES = 20;
const SCANNED = 2000;

const bytesText = (n: number): string => `${n.toLocaleString('en-US')} bytes`;

/** A document's path as the user knows it: relative to its workspace folder. */
function shownPath(uri: vscode.Uri): string {
  return vscode.workspace.asRelativePath(uri, vscode.workspace.workspaceFolders !== undefined && vscode.workspace.workspaceFolders.length > 1);
}

/** The lines of a text: how many an attachment of it covers. */
function lineCount(text: string): number {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  return lines.length > 1 && lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
}

/** The editor's selection (whole lines, from the first selected line to the last) as an
 * attachment; the cursor's line when nothing is selected. */
export function selectionAttachment(editor: vscode.TextEditor): ChatAttachment {
  const doc = editor.document;
  const sel = editor.selection;
  let end = sel.end.line;
  // A selection that ends at the start of a line does not take that line.
  if (end > sel.start.line && sel.end.character === 0) end--;
  const start = sel.start.line;
  const text = doc.getText(new vscode.Range(start, 0, end, doc.lineAt(end).text.length));
  return { kind: 'selection', path: shownPath(doc.uri), uri: doc.uri.toString(), lines: { start: start + 1, end: end + 1 }, languageId: doc.languageId, text };
}

/** A document's whole text as an attachment, or why it is refused (binary, too big). */
function fileAttachment(uri: vscode.Uri, bytes: Uint8Array, languageId: string | undefined): ChatAttachment | string {
  const name = shownPath(uri);
  if (bytes.subarray(0, BINARY_PROBE).includes(0)) return `${name} was not attached: it is a binary file (${bytesText(bytes.length)}).`;
  if (bytes.length > MAX_FILE_BYTES)
    return `${name} was not attached: it is ${bytesText(bytes.length)}, more than the ${bytesText(MAX_FILE_BYTES)} a file may have (attach a selection of it instead).`;
  const text = new TextDecoder('utf-8').decode(bytes);
  const out: ChatAttachment = { kind: 'file', path: name, uri: uri.toString(), lines: { start: 1, end: lineCount(text) }, text };
  if (languageId) out.languageId = languageId;
  return out;
}

export class EditorChatFiles implements ChatFiles {
  async attachFile(uriText: string): Promise<ChatAttachment | string> {
    const uri = vscode.Uri.parse(uriText);
    const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uriText);
    if (open) return fileAttachment(uri, new TextEncoder().encode(open.getText()), open.languageId);
    try {
      const stat = await vscode.workspace.fs.stat(uri);
      if (stat.size > MAX_FILE_BYTES)
        return `${shownPath(uri)} was not attached: it is ${bytesText(stat.size)}, more than the ${bytesText(MAX_FILE_BYTES)} a file may have (attach a selection of it instead).`;
      return fileAttachment(uri, await vscode.workspace.fs.readFile(uri), undefined);
    } catch (e) {
      return `${shownPath(uri)} was not attached: ${e instanceof Error ? e.message : String(e)}.`;
    }
  }

  suggestions(): SuggestionView[] {
    const active = vscode.window.activeTextEditor?.document;
    const seen = new Set<string>();
    const out: SuggestionView[] = [];
    const add = (doc: vscode.TextDocument | undefined, current: boolean): void => {
      if (!doc || doc.isUntitled || (doc.uri.scheme !== 'file' && doc.uri.scheme !== 'vscode-remote')) return;
      const key = doc.uri.toString();
      if (seen.has(key)) return;
      seen.add(key);
      out.push({ uri: key, path: shownPath(doc.uri), current });
    };
    add(active, true);
    for (const group of vscode.window.tabGroups.all) {
      for (const tab of group.tabs) {
        const input = tab.input;
        if (input instanceof vscode.TabInputText) add(vscode.workspace.textDocuments.find((d) => d.uri.toString() === input.uri.toString()), false);
      }
    }
    for (const e of vscode.window.visibleTextEditors) add(e.document, false);
    return out;
  }

  async find(query: string): Promise<{ uri: string; path: string }[]> {
    const files = await vscode.workspace.findFiles('**/*', undefined, SCANNED);
    const all = files.map((u) => ({ uri: u.toString(), path: shownPath(u) }));
    return fuzzyRank(query, all, (f) => f.path).slice(0, MATCHES);
  }

  async status(a: SentAttachment): Promise<'stale' | 'deleted' | undefined> {
    if (a.fate === 'left-out') return undefined;
    const uri = vscode.Uri.parse(a.uri);
    let text: string;
    const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === a.uri);
    if (open) text = open.getText();
    else {
      try {
        text = new TextDecoder('utf-8').decode(await vscode.workspace.fs.readFile(uri));
      } catch {
        return 'deleted';
      }
    }
    const lines = text.replace(/\r\n?/g, '\n').split('\n');
    const sentLines = a.text.replace(/\r\n?/g, '\n').split('\n');
    const now = lines.slice(a.lines.start - 1, a.lines.start - 1 + sentLines.length);
    return now.join('\n') === sentLines.join('\n') ? undefined : 'stale';
  }
}
