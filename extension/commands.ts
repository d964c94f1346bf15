// commands.ts - the extension's commands as one table: id -> handler. package.json
// declares the same ids (a test checks that the two agree).
import * as vscode from 'vscode';
import type { Ctx } from './ctx';

export const commands: Record<string, (ctx: Ctx) => unknown> = {
  'k3.showLogs': (ctx) => ctx.output.show(),
};

export function registerCommands(ctx: Ctx): void {
  for (const [id, handler] of Object.entries(commands)) {
    ctx.extension.subscriptions.push(vscode.commands.registerCommand(id, () => handler(ctx)));
  }
}
