// client.ts - builds the LanguageClient: the server bundle over Node IPC, the settings, each
// role's backend (with its remote API key) and the workspace's state folder (storage.ts) as
// initializationOptions, the ghost-text middleware, and an error handler that restarts after a crash but hands the decision to the user after an
// out-of-memory, a missing model or a crash loop (the default handler's four silent
// restarts of a multi-minute model load would look like a hang).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  TransportKind,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';
import type { InitializationOptions, Role, RoleOptions } from '../protocol/lsp';
import type { CompletionPolicy } from './completions';
import type { CrashDecision } from './restart';
import { serverSection, type Settings } from './settings';
import { serverModelPath } from './model-path';

export interface ClientHooks {
  output: vscode.LogOutputChannel;
  completions: CompletionPolicy;
  /** The server process died; decide (and show) what happens next. */
  crashed(): CrashDecision;
}

/** Where the server keeps the workspace's state (storage.ts). */
export interface StorageLocation {
  path: string;
  /** Folders an older k3-code used; the server moves their contents once. */
  legacy: string[];
  /** The URIs that identify the workspace. */
  workspace: string[];
}

/** `keys`: each remote role's key from SecretStorage; they go to the server in
 * initializationOptions and nowhere else (never to settings or the log). */
export function createClient(
  extension: vscode.ExtensionContext,
  settings: Settings,
  hooks: ClientHooks,
  storage: StorageLocation,
  keys: Partial<Record<Role, string>> = {},
): LanguageClient {
  const serverModule = extension.asAbsolutePath(path.join('dist', 'server.js'));
  const serverOptions: ServerOptions = {
    run: { module: serverModule, transport: TransportKind.ipc },
    debug: { module: serverModule, transport: TransportKind.ipc },
  };
  const initializationOptions: InitializationOptions = {
    // The folder of the older single-backend options, and the tokenizer a remote role may send
    // token ids with: never the embedded k3-mini while any role is remote (the roles below
    // name k3-mini themselves where they run it).
    modelPath: serverModelPath(
      settings.roles.completions.backend === 'remote' || settings.roles.chat.backend === 'remote' ? 'remote' : 'local',
      settings.modelPath,
      embeddedModelPath(extension),
    ),
    storagePath: storage.path,
    legacyStoragePaths: storage.legacy,
    workspace: storage.workspace,
    // Unset: the server uses the preset this workspace chose last (K3: Select Memory Preset).
    ...(settings.presetExplicit ? { preset: settings.preset } : {}),
    settings: serverSection(settings),
    roles: {
      completions: roleOptions(extension, settings, 'completions', keys.completions),
      chat: roleOptions(extension, settings, 'chat', keys.chat),
    },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
    outputChannel: hooks.output,
    initializationOptions,
    // One failed start is reported once (lifecycle.ts shows the action), not retried in a loop.
    initializationFailedHandler: () => false,
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue, handled: true }),
      closed: () => {
        const decision = hooks.crashed();
        return decision.restart
          ? { action: CloseAction.Restart, handled: true }
          : { action: CloseAction.DoNotRestart, handled: true };
      },
    },
    middleware: {
      provideInlineCompletionItems: (document, position, context, token, next) =>
        hooks.completions.provide(document, position, context, token, next),
    },
  };
  return new LanguageClient('k3', 'K3', serverOptions, clientOptions);
}

/** What the server is told serves `role`: the embedded model's folder, k3.modelPath, or
 * the role's server with its key. */
export function roleOptions(extension: vscode.ExtensionContext, settings: Settings, role: Role, apiKey?: string): RoleOptions {
  const r = settings.roles[role];
  switch (r.backend) {
    case 'embedded':
      return { backend: 'embedded', modelPath: embeddedModelPath(extension) };
    case 'local':
      return { backend: 'local', modelPath: settings.modelPath };
    case 'remote':
      return {
        backend: 'remote',
        remote: { endpoint: r.remote.endpoint, model: r.remote.model, timeoutMs: r.remote.timeoutMs, ...(apiKey ? { apiKey } : {}) },
      };
  }
}

/**
 * The embedded default model's folder inside the extension (media/models/k3-mini: a small
 * K3-architecture code model trained by the project, see its MODEL_CARD.md), or '' if the
 * package was built without it, in which case an empty k3.modelPath means "no model" and
 * the server says so.
 */
export function embeddedModelPath(extension: vscode.ExtensionContext): string {
  const dir = extension.asAbsolutePath(path.join('media', 'models', 'k3-mini'));
  return fs.existsSync(path.join(dir, 'config.json')) ? dir : '';
}
