// roles.ts - which backend serves each role (ghost text, chat), from the initialize
// request's options: `roles` when the client names them, else the older single
// `backend`/`remote` for both. It decides, and checks, the plan the server runs: the model
// folder the local engine loads (both local roles on one folder share it, loaded once; two
// different folders load one model each, when memory holds both), and the remote servers
// (two roles naming the same server, model and key share one). It opens nothing and starts
// nothing; ctx.ts does.
import type { InitializationOptions, RemoteOptions, Role, RoleBackend } from '../protocol/lsp';

export const ROLES: readonly Role[] = ['completions', 'chat'];

/** One role's backend, checked. */
export interface RolePlan {
  backend: RoleBackend;
  /** The model folder of an `embedded` or `local` role ('' when none is set). */
  modelPath: string;
  /** The server of a `remote` role. */
  remote?: RemoteOptions;
}

export interface RolesPlan {
  completions: RolePlan;
  chat: RolePlan;
  /** The folder the local engine loads: the local roles' ('' when no role is local); the
   * completions role's when both are local. */
  enginePath: string;
  /** Set when the two roles name different local folders: the chat role's, loaded as a
   * second model after the first (ctx.ts checks that memory holds both). */
  chatEnginePath?: string;
}

const BACKENDS: readonly RoleBackend[] = ['embedded', 'local', 'remote'];

/** A remote server's options with every field checked (a wrong type is dropped). */
export function checkRemote(r: unknown): RemoteOptions {
  const v = r !== null && typeof r === 'object' ? (r as Record<string, unknown>) : {};
  return {
    endpoint: typeof v.endpoint === 'string' ? v.endpoint : '',
    ...(typeof v.model === 'string' && v.model ? { model: v.model } : {}),
    ...(typeof v.apiKey === 'string' && v.apiKey ? { apiKey: v.apiKey } : {}),
    ...(typeof v.timeoutMs === 'number' && Number.isFinite(v.timeoutMs) && v.timeoutMs > 0 ? { timeoutMs: v.timeoutMs } : {}),
  };
}

/** One role: what `roles` names for it, else the older single choice. */
function rolePlan(opts: InitializationOptions, role: Role, modelPath: string): RolePlan {
  const named = opts.roles?.[role] as unknown;
  const r = named !== null && typeof named === 'object' ? (named as Record<string, unknown>) : undefined;
  if (r && BACKENDS.includes(r.backend as RoleBackend)) {
    const backend = r.backend as RoleBackend;
    if (backend === 'remote') return { backend, modelPath, remote: checkRemote(r.remote) };
    return { backend, modelPath: typeof r.modelPath === 'string' && r.modelPath ? r.modelPath : modelPath };
  }
  if (opts.backend === 'remote') return { backend: 'remote', modelPath, remote: checkRemote(opts.remote) };
  return { backend: 'local', modelPath };
}

/** The plan for `opts`. `modelPath` is the one folder the older options name: with a remote
 * role it only supplies the tokenizer. */
export function planRoles(opts: InitializationOptions): RolesPlan {
  const modelPath = typeof opts.modelPath === 'string' ? opts.modelPath : '';
  const completions = rolePlan(opts, 'completions', modelPath);
  const chat = rolePlan(opts, 'chat', modelPath);
  const local = [completions, chat].filter((p) => p.backend !== 'remote');
  const plan: RolesPlan = { completions, chat, enginePath: local[0]?.modelPath ?? '' };
  if (local.length === 2 && completions.modelPath !== chat.modelPath) {
    plan.chatEnginePath = chat.modelPath;
  }
  return plan;
}

/** Whether two remote roles talk to the same server as the same client (one connection
 * state, one check, one status). */
export function sameRemote(a: RemoteOptions | undefined, b: RemoteOptions | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.endpoint.trim() === b.endpoint.trim() &&
    (a.model ?? '') === (b.model ?? '') &&
    (a.apiKey ?? '') === (b.apiKey ?? '') &&
    (a.timeoutMs ?? 0) === (b.timeoutMs ?? 0)
  );
}
