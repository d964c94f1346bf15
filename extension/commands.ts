// commands.ts - the extension's commands as one table: id -> handler. package.json
// declares the same ids with their titles (a test checks that the two agree); the status
// bar menu lists them from package.json, so titles are written once.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { PresetsListRequest, StateClearRequest, type PresetInfo } from '../protocol/lsp';
import { describeRequestError } from './chatBackend';
import { chooseBackend } from './chooseBackend';
import type { Ctx } from './ctx';
import { checkModelFolder } from './modelFolder';
import { describeRole } from './status';
import { useDefaultModel } from './notices';
import { ACCEPTED_COMMAND } from './warmup';
import { availableMemoryBytes, formatBytes, presetItems, wholeModelNote, type PresetFacts } from './presets';

export const commands: Record<string, (ctx: Ctx) => unknown> = {
  'k3.selectPreset': selectPreset,
  'k3.selectModelFolder': selectModelFolder,
  'k3.newChat': (ctx) => ctx.chat.newChat(),
  'k3.addSelectionToChat': (ctx) => ctx.chat.addSelection(),
  'k3.clearWorkspaceState': clearWorkspaceState,
  'k3.toggleCompletions': toggleCompletions,
  'k3.showLogs': (ctx) => ctx.output.show(),
  'k3.showMenu': showMenu,
  'k3.restartEngine': (ctx) => ctx.lifecycle.restart('K3: restarting the engine'),
  'k3.setRemoteApiKey': setRemoteApiKey,
  'k3.openRemoteSettings': () => vscode.commands.executeCommand('workbench.action.openSettings', 'k3.remote'),
  'k3.chooseCompletionBackend': (ctx) => chooseBackend(ctx, 'completions'),
  'k3.chooseChatBackend': (ctx) => chooseBackend(ctx, 'chat'),
  'k3.inlineEdit': (ctx) => ctx.edits.start(),
  'k3.inlineEdit.acceptAll': (ctx) => ctx.edits.decideAll(true),
  'k3.inlineEdit.rejectAll': (ctx) => ctx.edits.decideAll(false),
  // Run by VS Code when a ghost-text suggestion is accepted (extension/warmup.ts); not in the palette.
  'k3.completionAccepted': (ctx) => ctx.warmup.accepted(),
};

export function registerCommands(ctx: Ctx): void {
  for (const [id, handler] of Object.entries(commands)) {
    ctx.extension.subscriptions.push(vscode.commands.registerCommand(id, () => handler(ctx)));
  }
}

interface ManifestCommand {
  command: string;
  title: string;
}

interface Manifest {
  contributes: {
    commands: ManifestCommand[];
  };
}

function manifest(ctx: Ctx): Manifest {
  return ctx.extension.extension.packageJSON as Manifest;
}

/** Where a setting is written: the narrowest scope that already sets it, else the user's settings. */
function targetOf(key: string): vscode.ConfigurationTarget {
  const i = vscode.workspace.getConfiguration('k3').inspect(key);
  if (i?.workspaceFolderValue !== undefined) return vscode.ConfigurationTarget.WorkspaceFolder;
  if (i?.workspaceValue !== undefined) return vscode.ConfigurationTarget.Workspace;
  return vscode.ConfigurationTarget.Global;
}

/** The picker lists what the server's engine knows (k3/presets/list): the server ships in
 * this package, so there is no other list to fall back on; without a running server it says
 * so instead of guessing. */
async function selectPreset(ctx: Ctx): Promise<void> {
  const client = ctx.client;
  if (!client?.isRunning()) {
    const pick = await vscode.window.showWarningMessage('K3: the engine is not running; its presets are listed once it is.', 'Restart Engine');
    if (pick) await vscode.commands.executeCommand('k3.restartEngine');
    return;
  }
  const listed = await client.sendRequest(PresetsListRequest.type).catch((e: unknown) => {
    ctx.output.error(`k3/presets/list: ${describeRequestError(e)}`);
    void vscode.window.showErrorMessage(`K3: could not list the memory presets: ${describeRequestError(e)}`);
    return undefined;
  });
  if (!listed) return;
  const presets: PresetInfo[] = listed.presets;
  const current = listed.current || (ctx.serverPreset ?? ctx.settings.preset);
  const note = listed.note;
  const available = availableMemoryBytes();
  const facts = new Map<string, PresetFacts>();
  for (const p of presets) {
    if (p.trunkBytes !== undefined && p.expertCacheBytes !== undefined && p.peakBytes !== undefined) {
      facts.set(p.id, {
        trunkBytes: p.trunkBytes,
        expertCacheBytes: p.expertCacheBytes,
        peakBytes: p.peakBytes,
        secondsPerToken: p.secondsPerToken,
        forecastCheck: p.forecastCheck,
        firstTokenSeconds: p.firstTokenSeconds,
      });
    }
  }
  const roles = ctx.settings.roles;
  const model = roles.completions.backend !== 'remote' || roles.chat.backend !== 'remote' ? ctx.model : undefined;
  const items = presetItems(presets, current, available, facts, 'auto', model).map((item) => ({
    ...item,
    alwaysShow: true,
  }));
  const pick = await vscode.window.showQuickPick(items, {
    title: `K3: Select Memory Preset (${formatBytes(available)} available)`,
    placeHolder: note ?? wholeModelNote(model, facts) ?? 'How much memory the engine may use; choosing one reloads the engine',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!pick || pick.preset === current) return;
  // A preset the user set in settings.json stays the one place it is chosen (the change
  // listener in ctx.ts applies it); otherwise the server keeps this workspace's choice.
  if (ctx.settings.presetExplicit) await vscode.workspace.getConfiguration('k3').update('preset', pick.preset, targetOf('preset'));
  else await ctx.presets.choose(pick.preset);
}

async function selectModelFolder(ctx: Ctx): Promise<void> {
  const choose = { label: '$(folder-opened) Choose a folder…', detail: 'A Kimi K3 checkpoint as released: config.json, the safetensors shards, tiktoken.model' };
  const useDefault = { label: '$(package) Use the embedded default model', detail: 'Clears k3.modelPath' };
  const how = await vscode.window.showQuickPick([choose, useDefault], {
    title: 'K3: Select Model Folder',
    placeHolder: ctx.settings.modelPath ? `Now: ${ctx.settings.modelPath}` : 'Now: the embedded default model',
  });
  if (how === useDefault) return useDefaultModel();
  if (how !== choose) return;
  for (;;) {
    const picked = await vscode.window.showOpenDialog({
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      openLabel: 'Use this model folder',
      title: 'K3: Select Model Folder',
    });
    const dir = picked?.[0]?.fsPath;
    if (!dir) return;
    const check = checkModelFolder(dir);
    if (check.ok) {
      await vscode.workspace.getConfiguration('k3').update('modelPath', dir, vscode.ConfigurationTarget.Global);
      return;
    }
    const again = await vscode.window.showErrorMessage(`K3: ${check.problem}.`, 'Choose Another Folder');
    if (again !== 'Choose Another Folder') return;
  }
}

async function clearWorkspaceState(ctx: Ctx): Promise<void> {
  const yes = 'Delete';
  const remote = ctx.settings.roles.completions.backend === 'remote' && ctx.settings.roles.chat.backend === 'remote';
  const pick = await vscode.window.showWarningMessage(
    'Delete K3’s chat history and saved engine state for this workspace?',
    {
      modal: true,
      detail: remote
        ? `Folder: ${ctx.storagePath}\n\nSaved engine state belongs to the local engine only; with both roles on remote servers only the chat history is kept here.`
        : `Folder: ${ctx.storagePath}`,
    },
    yes,
  );
  if (pick !== yes) return;
  // Through k3/state/clear when the server runs, else by removing the storage folder.
  ctx.chat.controller.reset();
  if (ctx.client?.isRunning()) {
    await ctx.client.sendRequest(StateClearRequest.type);
    await ctx.lifecycle.refreshStatus();
  } else {
    await fs.promises.rm(ctx.storagePath, { recursive: true, force: true });
  }
  await ctx.chat.controller.refresh();
  void vscode.window.showInformationMessage('K3: workspace state cleared.');
}

/** Asks for the remote backend's API key and keeps it in SecretStorage, never in settings. */
async function setRemoteApiKey(ctx: Ctx): Promise<void> {
  const key = await vscode.window.showInputBox({
    title: 'K3: Set Remote API Key',
    prompt: `The API key for ${ctx.settings.remote.endpoint}, sent as "Authorization: Bearer …". Kept in VS Code's secret storage; leave empty to remove it.`,
    password: true,
    ignoreFocusOut: true,
  });
  if (key === undefined) return;
  await ctx.apiKey.set(key.trim());
  void vscode.window.showInformationMessage(key.trim() ? 'K3: remote API key saved.' : 'K3: remote API key removed.');
}

async function toggleCompletions(ctx: Ctx): Promise<void> {
  const enabled = !ctx.settings.completions.enabled;
  await vscode.workspace.getConfiguration('k3').update('completions.enabled', enabled, targetOf('completions.enabled'));
}

/** The menu: who serves each role first (picking one chooses its backend), then every command. */
async function showMenu(ctx: Ctx): Promise<void> {
  const roles = ctx.roles
    ? [
        { label: describeRole('completions', ctx.roles.completions), command: 'k3.chooseCompletionBackend' },
        { label: describeRole('chat', ctx.roles.chat), command: 'k3.chooseChatBackend' },
        { label: '', kind: vscode.QuickPickItemKind.Separator, command: '' },
      ]
    : [];
  const items = [
    ...roles,
    ...manifest(ctx)
      .contributes.commands.filter((c) => c.command !== 'k3.showMenu' && c.command !== ACCEPTED_COMMAND)
      .map((c) => ({ label: c.title, command: c.command })),
  ];
  const pick = await vscode.window.showQuickPick(items, { title: 'K3', placeHolder: ctx.statusBar.item.accessibilityInformation?.label });
  if (pick) await vscode.commands.executeCommand(pick.command);
}
