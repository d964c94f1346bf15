// presetSwitch.ts - makes a memory preset this workspace's preset: k3/presets/set saves it
// in the server and reloads a loaded model, under the load notification until the engine
// is ready again; a failure is shown with the logs a click away. Which preset to offer is
// presets.ts's (the quick pick's items) and commands.ts's (the picker).
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
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
   * model with it, with a progress notification until the engine is ready again. The server
   * ships in this package, so it always has that method: there is no other route. With no
   * server running, the next start takes the preset from the setting (which holds it when
   * the setting changed): `restart` starts one now.
   */
  async choose(preset: string): Promise<void> {
    const client = this.host.client();
    if (!client?.isRunning()) return this.host.restart(`K3: reloading the engine with preset ${preset}`);
    this.loadNotice.show(`K3: reloading the engine with preset ${preset}`, true);
    try {
      const result = await client.sendRequest(PresetsSetRequest.type, { preset });
      this.host.presetChanged(result.preset);
      await this.host.refreshStatus();
    } catch (e) {
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
