// presetSwitch.ts - makes a memory preset this workspace's preset: k3/presets/set saves it
// in the server and reloads a loaded model, under the load notification until the engine
// is ready again; a failure is shown with the logs a click away. Which preset to offer is
// presets.ts's (the quick pick's items) and commands.ts's (the picker).
import * as vscode from 'vscode';
import { ErrorCodes, ResponseError, type LanguageClient } from 'vscode-languageclient/node';
import { PresetsSetRequest } from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import type { Notices } from './notices';
import type { LoadNotification } from './progress';

export interface PresetSwitchHost {
  readonly output: vscode.LogOutputChannel;
  client(): LanguageClient | undefined;
  /** The preset the server now says is in use. */
  presetChanged(preset: string): void;
  /** Asks the server for its status again. */
  refreshStatus(): Promise<void>;
  restart(title: string): Promise<void>;
}

export class PresetSwitch {
  constructor(
    private readonly host: PresetSwitchHost,
    private readonly loadNotice: LoadNotification,
    private readonly notices: Notices,
  ) {}

  /**
   * Makes `preset` this workspace's preset: k3/presets/set saves it and reloads a loaded
   * model, with a progress notification until the engine is ready again. A server without
   * that method gets the preset at its next start instead: `restart` restarts it now (the
   * setting already holds the preset), `setting` writes the user setting, whose change
   * comes back here with `restart`.
   */
  async choose(preset: string, unsupported: 'restart' | 'setting'): Promise<void> {
    const fallback = async () => {
      if (unsupported === 'restart') await this.host.restart(`K3: reloading the engine with preset ${preset}`);
      else await vscode.workspace.getConfiguration('k3').update('preset', preset, vscode.ConfigurationTarget.Global);
    };
    const client = this.host.client();
    if (!client?.isRunning()) return fallback();
    this.loadNotice.show(`K3: reloading the engine with preset ${preset}`, true);
    try {
      const result = await client.sendRequest(PresetsSetRequest.type, { preset });
      this.host.presetChanged(result.preset);
      await this.host.refreshStatus();
    } catch (e) {
      if (e instanceof ResponseError && e.code === ErrorCodes.MethodNotFound) {
        this.loadNotice.presetSwitching = false;
        await fallback();
        return;
      }
      this.host.output.error(`k3/presets/set ${preset}: ${describeRequestError(e)}`);
      void vscode.window
        .showErrorMessage(`K3: could not switch to preset ${preset}: ${describeRequestError(e)}`, 'Show Logs')
        .then((pick) => this.notices.runPick(pick));
    } finally {
      this.loadNotice.presetSwitching = false;
      this.loadNotice.update();
    }
  }
}
