// ctx.ts - the extension's one context object: owns the language client, the output
// channel and the status bar item. Everything that needs extension state receives this.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { LanguageClient, TransportKind, type LanguageClientOptions, type ServerOptions } from 'vscode-languageclient/node';
import type { InitializationOptions } from '../server/protocol';
import { readSettings } from './settings';

export class Ctx {
  readonly output: vscode.LogOutputChannel;
  readonly statusItem: vscode.StatusBarItem;
  client: LanguageClient | undefined;

  constructor(readonly extension: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel('K3', { log: true });
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
    extension.subscriptions.push(this.output, this.statusItem);
  }

  /** Starts the server over Node IPC with the settings and this workspace's storage folder. */
  async start(): Promise<void> {
    const serverModule = this.extension.asAbsolutePath(path.join('dist', 'server.js'));
    const serverOptions: ServerOptions = {
      run: { module: serverModule, transport: TransportKind.ipc },
      debug: { module: serverModule, transport: TransportKind.ipc },
    };
    const settings = readSettings();
    const initializationOptions: InitializationOptions = {
      modelPath: settings.modelPath,
      storagePath: (this.extension.storageUri ?? this.extension.globalStorageUri).fsPath,
      preset: settings.preset,
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.output,
      initializationOptions,
    };
    this.client = new LanguageClient('k3', 'K3', serverOptions, clientOptions);
    this.statusItem.text = '$(loading~spin) K3';
    this.statusItem.show();
    await this.client.start();
    this.statusItem.text = '$(sparkle) K3';
  }

  async stop(): Promise<void> {
    await this.client?.stop();
    this.client = undefined;
  }
}
