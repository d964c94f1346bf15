// chooseBackend.ts - "K3: Choose Completion Backend" and "K3: Choose Chat Backend": a quick
// pick of embedded / local / remote for one role; for remote, the endpoint (its
// /v1/models asked first, endpointCheck.ts: nothing is saved when it does not answer), the
// model among those it lists, and the role's API key when it has its own server. The
// choice is written to k3.<role>.backend and k3.<role>.remote.*; ctx.ts restarts the
// server when those change. It decides nothing about which backend is good for a role
// beyond saying it in the picker.
import * as vscode from 'vscode';
import type { Role, RoleBackend } from '../protocol/lsp';
import type { Ctx } from './ctx';
import { checkEndpoint } from './endpointCheck';

const TITLES: Record<Role, string> = { completions: 'K3: Choose Completion Backend', chat: 'K3: Choose Chat Backend' };

/** The picker's rows, with what each means for this role. */
function items(role: Role, current: RoleBackend, modelPath: string): (vscode.QuickPickItem & { backend: RoleBackend })[] {
  const mark = (b: RoleBackend): string => (b === current ? ' (current)' : '');
  return [
    {
      backend: 'embedded',
      label: `Embedded k3-mini${mark('embedded')}`,
      detail:
        role === 'completions'
          ? 'The small code model shipped with the extension: ghost text in about 100 ms, on any machine.'
          : 'k3-mini is a code-completion model: it cannot chat, and the panel says so.',
    },
    {
      backend: 'local',
      label: `Local K3 checkpoint${mark('local')}`,
      detail: modelPath
        ? `The model at k3.modelPath (${modelPath}) with this workspace's memory preset.`
        : 'A Kimi K3 checkpoint folder on this machine (you choose it next).',
    },
    {
      backend: 'remote',
      label: `Remote server${mark('remote')}`,
      detail: 'An OpenAI-compatible server (vLLM, SGLang, llama-server, k3 serve) running K3 or another model.',
    },
  ];
}

async function update(role: Role, key: string, value: unknown): Promise<void> {
  await vscode.workspace.getConfiguration('k3').update(`${role}.${key}`, value, vscode.ConfigurationTarget.Global);
}

export async function chooseBackend(ctx: Ctx, role: Role): Promise<void> {
  const title = TITLES[role];
  const settings = ctx.settings;
  const pick = await vscode.window.showQuickPick(items(role, settings.roles[role].backend, settings.modelPath), { title, ignoreFocusOut: true });
  if (!pick) return;
  if (pick.backend === 'local' && !settings.modelPath) {
    await vscode.commands.executeCommand('k3.selectModelFolder');
    if (!ctx.readSettings().modelPath) return;
  }
  if (pick.backend !== 'remote') {
    await update(role, 'backend', pick.backend);
    return;
  }
  const endpoint = await vscode.window.showInputBox({
    title,
    prompt: 'The server\'s base URL (/v1 is added unless it ends with it), e.g. http://127.0.0.1:8080 or https://gpu.example.com/v1',
    value: settings.roles[role].remote.endpoint,
    ignoreFocusOut: true,
  });
  if (endpoint === undefined || endpoint.trim() === '') return;
  let key = await ctx.apiKey.get(role);
  let check = await checkEndpoint(endpoint, key, settings.remote.timeoutMs);
  if (!check.ok && /refused the API key/.test(check.message)) {
    const typed = await vscode.window.showInputBox({
      title,
      prompt: `${endpoint.trim()} asks for an API key. Kept in VS Code's secret storage, sent as "Authorization: Bearer …".`,
      password: true,
      ignoreFocusOut: true,
    });
    if (typed === undefined || typed.trim() === '') return;
    key = typed.trim();
    check = await checkEndpoint(endpoint, key, settings.remote.timeoutMs);
    if (check.ok) await ctx.apiKey.set(key, role);
  }
  if (!check.ok) {
    void vscode.window.showErrorMessage(`K3: ${check.message}. Nothing was saved.`);
    return;
  }
  let model = check.models[0];
  if (check.models.length > 1) {
    const chosen = await vscode.window.showQuickPick(check.models, { title, placeHolder: `The model for ${role === 'chat' ? 'chat' : 'ghost text'}` });
    if (!chosen) return;
    model = chosen;
  }
  await update(role, 'remote.endpoint', endpoint.trim());
  await update(role, 'remote.model', model);
  await update(role, 'backend', 'remote');
  void vscode.window.showInformationMessage(`K3: ${role === 'chat' ? 'chat' : 'ghost text'} now goes to ${model} at ${endpoint.trim()}.`);
}
