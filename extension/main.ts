// main.ts - the extension's entry point: creates the context, registers the commands and
// starts the language server. Wiring only; behaviour lives in the parts ctx.ts wires and in
// commands.ts.
import type * as vscode from 'vscode';
import { registerCommands } from './commands';
import { Ctx } from './ctx';

let ctx: Ctx | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  ctx = new Ctx(context);
  registerCommands(ctx);
  void ctx.lifecycle.start(); // not awaited: a model load can take minutes, and activation must not wait for it
}

export async function deactivate(): Promise<void> {
  await ctx?.lifecycle.stop();
  ctx = undefined;
}
