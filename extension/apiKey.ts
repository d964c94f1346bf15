// apiKey.ts - the remote backends' API keys: the shared server's, and a role's own for a role
// with its own endpoint (k3.chat.remote.endpoint, k3.completions.remote.endpoint), kept in
// SecretStorage only (never in settings or the log), read when a server starts, and handed
// to a running server for each remote role whenever one changes (here or in another window), which checks the remote server
// again with it. A server that cannot take it is restarted with it instead.
import type * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { RemoteApiKeyRequest, type Role } from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import { REMOTE_API_KEY_SECRET, roleApiKeySecret, type Settings } from './settings';

const ROLES: readonly Role[] = ['completions', 'chat'];

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

  /** The API key a role's server gets: the role's own when it has one, else the shared
   * server's; without `role`, the shared one (undefined when none is set). */
  async get(role?: Role): Promise<string | undefined> {
    try {
      const own = role ? await this.secrets.get(roleApiKeySecret(role)) : undefined;
      return own || (await this.secrets.get(REMOTE_API_KEY_SECRET)) || undefined;
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
  async set(key: string, role?: Role): Promise<void> {
    const secret = role ? roleApiKeySecret(role) : REMOTE_API_KEY_SECRET;
    if (key) await this.secrets.store(secret, key);
    else await this.secrets.delete(secret);
    await this.push();
  }

  /** Each remote role's key, for the server's initializationOptions. */
  async keys(): Promise<Partial<Record<Role, string>>> {
    const out: Partial<Record<Role, string>> = {};
    for (const role of ROLES) {
      if (this.host.settings().roles[role].backend !== 'remote') continue;
      const key = await this.get(role);
      if (key) out[role] = key;
    }
    return out;
  }

  /** Hands the stored keys to a running server, one for each remote role. */
  async push(): Promise<void> {
    this.host.forgetProblem();
    const client = this.host.client();
    const remote = ROLES.filter((r) => this.host.settings().roles[r].backend === 'remote');
    if (remote.length === 0 || !client?.isRunning()) return;
    try {
      for (const role of remote) await client.sendRequest(RemoteApiKeyRequest.type, { apiKey: (await this.get(role)) ?? '', role });
      await this.host.refreshStatus();
    } catch (e) {
      this.host.output.warn(`k3/remote/setApiKey failed: ${describeRequestError(e)}; restarting the engine with the new key`);
      await this.host.restart('K3: connecting to the remote server');
    }
  }
}
