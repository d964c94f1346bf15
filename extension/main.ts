// main.ts - the extension's entry point: creates the context (which starts the language
// server) and registers the commands. Wiring only; behaviour lives in ctx.ts and commands.ts.
import type * as vscode from 'vscode';
import { registerCommands } from './commands';
import { Ctx } from './ctx';

let ctx: Ctx | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  ctx = new Ctx(context);
  registerCommands(ctx);
  await ctx.start();
}

export async function deactivate(): Promise<void> {
  await ctx?.stop();
  ctx = undefined;
}
