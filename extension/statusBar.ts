// statusBar.ts - the K3 status bar item: painted from the extension's state (status.ts words
// it) whenever that changes, with the thinking mark while the engine computes for ghost text
// or chat, shown only once that has lasted QUIET_THINKING_MS so quick answers do not
// flicker. It reads the state and decides nothing about the engine.
import * as vscode from 'vscode';
import { describeStatus, type StatusInput } from './status';

/** A thinking state shorter than this is not painted, so quick answers do not flicker. */
const QUIET_THINKING_MS = 300;

export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private thinkingCount = 0;
  private thinkingShown = false;
  private thinkingTimer: ReturnType<typeof setTimeout> | undefined;

  /** `state`: what the item shows now, but for the thinking mark and the time. */
  constructor(private readonly state: () => Omit<StatusInput, 'thinking' | 'now'>) {
    this.item = vscode.window.createStatusBarItem('k3.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'K3';
    this.item.command = 'k3.showMenu';
  }

  /** Called by the ghost-text policy and the chat while the engine computes for them. */
  thinking(active: boolean): void {
    this.thinkingCount = Math.max(0, this.thinkingCount + (active ? 1 : -1));
    if (this.thinkingCount > 0 && !this.thinkingShown && !this.thinkingTimer) {
      this.thinkingTimer = setTimeout(() => {
        this.thinkingTimer = undefined;
        this.thinkingShown = this.thinkingCount > 0;
        this.paint();
      }, QUIET_THINKING_MS);
    } else if (this.thinkingCount === 0) {
      clearTimeout(this.thinkingTimer);
      this.thinkingTimer = undefined;
      if (this.thinkingShown) {
        this.thinkingShown = false;
        this.paint();
      }
    }
  }

  /** Repaints the status bar item from the current state. */
  paint(): void {
    const view = describeStatus({ ...this.state(), thinking: this.thinkingShown, now: Date.now() });
    this.item.text = view.text;
    this.item.tooltip = new vscode.MarkdownString(view.tooltip, true);
    this.item.accessibilityInformation = { label: view.ariaLabel };
    this.item.backgroundColor =
      view.severity === 'normal' ? undefined : new vscode.ThemeColor(`statusBarItem.${view.severity}Background`);
  }

  dispose(): void {
    clearTimeout(this.thinkingTimer);
    this.item.dispose();
  }
}
