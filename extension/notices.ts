// notices.ts - the notifications that report a problem with a way out: a problem the server
// reports, with its action as a button; a missing or broken model folder, with the ways to
// choose another; each shown once until another one comes. The buttons run commands (or
// clear k3.modelPath to use the embedded default model); what caused the problem is not
// decided here.
import * as vscode from 'vscode';
import type { K3Action } from '../protocol/lsp';

export class Notices {
  private reportedProblem: string | undefined;

  /** Shows a problem once (not again until another one), with its action as a button. */
  offerAction(message: string, action: K3Action | undefined, isError: boolean): void {
    if (this.reportedProblem === message) return;
    this.reportedProblem = message;
    const commandOf: Record<K3Action['kind'], string | undefined> = {
      'choose-model-folder': 'k3.selectModelFolder',
      'choose-smaller-preset': 'k3.selectPreset',
      'load-model': 'k3.restartEngine',
      'show-logs': 'k3.showLogs',
      'set-api-key': 'k3.setRemoteApiKey',
      'open-remote-settings': 'k3.openRemoteSettings',
      'choose-chat-backend': 'k3.chooseChatBackend',
      none: undefined,
    };
    const command = action ? commandOf[action.kind] : undefined;
    const buttons = command && action ? [action.title] : [];
    if (action?.kind !== 'show-logs') buttons.push('Show Logs');
    const show = isError ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    void show(`K3: ${message}`, ...buttons).then((pick) => {
      if (pick && action && pick === action.title && command) void vscode.commands.executeCommand(command);
      else this.runPick(pick);
    });
  }

  /** A missing or broken model folder: say what is wrong once and offer the ways out. */
  offerModelActions(problem: string): void {
    if (this.reportedProblem === problem) return;
    this.reportedProblem = problem;
    void vscode.window
      .showWarningMessage(`K3: ${problem}.`, 'Select Model Folder', 'Use Default Model', 'Open Settings')
      .then((pick) => this.runPick(pick));
  }

  /** The next problem is shown even if it is the one shown last (something that may fix it
   * changed, such as the API key). */
  forget(): void {
    this.reportedProblem = undefined;
  }

  /** Runs the command behind a notification button. */
  runPick(pick: string | undefined): void {
    const commands: Record<string, string> = {
      'Show Logs': 'k3.showLogs',
      'Restart Engine': 'k3.restartEngine',
      'Select Memory Preset': 'k3.selectPreset',
      'Select Model Folder': 'k3.selectModelFolder',
    };
    if (pick === 'Use Default Model') void useDefaultModel();
    else if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'k3.modelPath');
    else if (pick && commands[pick]) void vscode.commands.executeCommand(commands[pick]);
  }
}

/** Clears k3.modelPath wherever it is set, so the embedded default model is used. */
export async function useDefaultModel(): Promise<void> {
  const config = vscode.workspace.getConfiguration('k3');
  const i = config.inspect('modelPath');
  if (i?.workspaceFolderValue !== undefined && vscode.workspace.workspaceFolders?.[0]) {
    await vscode.workspace
      .getConfiguration('k3', vscode.workspace.workspaceFolders[0].uri)
      .update('modelPath', undefined, vscode.ConfigurationTarget.WorkspaceFolder);
  }
  if (i?.workspaceValue !== undefined) await config.update('modelPath', undefined, vscode.ConfigurationTarget.Workspace);
  if (i?.globalValue !== undefined) await config.update('modelPath', undefined, vscode.ConfigurationTarget.Global);
}
