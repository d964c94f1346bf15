// apiKey.ts - the remote backend's API key: kept in SecretStorage only (never in settings or
// the log), read when a server starts, and handed to a running server that uses the remote
// backend whenever it changes (here or in another window), which checks the remote server
// again with it. A server that cannot take it is restarted with it instead.
import type * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { RemoteApiKeyRequest } from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import { REMOTE_API_KEY_SECRET, type Settings } from './settings';

export interface ApiKeyHost {
  readonly output: vscode.LogOutputChannel;
  settings(): Settings;
  client(): LanguageClient | undefined;
  /** Asks the server for its status again. */
  refreshStatus(): Promise<void>;
  restart(title: string): Promise<void>;
  /** A new key may change the problem shown: the next one is shown even if it is the same. */
  forgetProblem(): void;
}

export class RemoteApiKey {
  constructor(
    private readonly secrets: vscode.SecretStorage,
    private readonly host: ApiKeyHost,
  ) {}

  /** The remote backend's API key from SecretStorage (undefined when none is set). */
  async get(): Promise<string | undefined> {
    try {
      return (await this.secrets.get(REMOTE_API_KEY_SECRET)) || undefined;
    } catch (e) {
      this.host.output.warn(`Reading the remote API key from the secret storage failed: ${String(e)}`);
      return undefined;
    }
  }

  /**
   * Keeps `key` in SecretStorage (empty: removes it) and hands it to a running server that
   * uses the remote backend, which checks the server again with it. The key itself is never
   * logged.
   */
  async set(key: string): Promise<void> {
    if (key) await this.secrets.store(REMOTE_API_KEY_SECRET, key);
    else await this.secrets.delete(REMOTE_API_KEY_SECRET);
    await this.push();
  }

  /** Hands the stored key to a running server that uses the remote backend. */
  async push(): Promise<void> {
    this.host.forgetProblem();
    const client = this.host.client();
    if (this.host.settings().backend !== 'remote' || !client?.isRunning()) return;
    try {
      await client.sendRequest(RemoteApiKeyRequest.type, { apiKey: (await this.get()) ?? '' });
      await this.host.refreshStatus();
    } catch (e) {
      this.host.output.warn(`k3/remote/setApiKey failed: ${describeRequestError(e)}; restarting the engine with the new key`);
      await this.host.restart('K3: connecting to the remote server');
    }
  }
}
