// handlers.ts - the LSP surface as one table: each standard or k3/* method and the context
// call that answers it. Failures leave through errors.ts (a code, a message and data with
// the kind and action). Model loads report work-done progress ($/progress) next to the
// k3/didChangeStatus notifications. No feature logic lives here.
import {
  type CancellationToken,
  type Connection,
  type InitializeParams,
  type InitializeResult,
  InlineCompletionRequest,
  TextDocumentSyncKind,
  type WorkDoneProgressReporter,
} from 'vscode-languageserver';
import type { ServerCtx } from './ctx';
import { loadAddon } from './engine/addon';
import type { EngineHost, LoadOptions } from './engine/host';
import { invalidRequest, toResponseError } from './errors';
import {
  ChatBudgetRequest,
  ChatSendRequest,
  ChatStopRequest,
  CompletionDidAcceptNotification,
  ContextDefinitionsNotification,
  ContextDidChangeNotification,
  ConversationClearRequest,
  ConversationGetRequest,
  ConversationListRequest,
  EditStartRequest,
  type LoadProgress,
  type ModelLoadResult,
  ModelLoadRequest,
  ModelUnloadRequest,
  PresetsListRequest,
  PresetsSetRequest,
  RemoteApiKeyRequest,
  StateClearRequest,
  StatusRequest,
} from '../protocol/lsp';

/** What the preset list says with a remote backend. */
const LOCAL_ONLY_PRESETS = 'Memory presets apply to the local engine only; completions and chat now go to the remote server (k3.completions.backend, k3.chat.backend).';

/** Runs a handler body, turning whatever it throws into the protocol's error. */
function answer<P, R>(body: (params: P, token: CancellationToken) => R | Promise<R>) {
  return async (params: P, token: CancellationToken): Promise<R> => {
    try {
      return await body(params, token);
    } catch (e) {
      throw toResponseError(e);
    }
  };
}

/** answer() for requests without params. */
function answer0<R>(body: (token: CancellationToken) => R | Promise<R>) {
  return async (token: CancellationToken): Promise<R> => {
    try {
      return await body(token);
    } catch (e) {
      throw toResponseError(e);
    }
  };
}

function describeLoad(p: LoadProgress): { message: string; percentage?: number } {
  const mb = (b: number): string => `${(b / 1e6).toFixed(0)} MB`;
  const s = (ms: number): string => `${Math.round(ms / 1000)} s`;
  const parts: string[] = [p.phase];
  if (p.bytesLoaded !== undefined) parts.push(`${mb(p.bytesLoaded)} of ${mb(p.bytesTotal)}`);
  parts.push(p.estimateMs !== undefined ? `${s(p.elapsedMs)} of about ${s(p.estimateMs)}` : `${s(p.elapsedMs)}`);
  let percentage: number | undefined;
  if (p.bytesLoaded !== undefined && p.bytesTotal > 0) percentage = Math.min(99, Math.floor((100 * p.bytesLoaded) / p.bytesTotal));
  else if (p.estimateMs) percentage = Math.min(99, Math.floor((100 * p.elapsedMs) / p.estimateMs));
  const out: { message: string; percentage?: number } = { message: parts.join(', ') };
  if (percentage !== undefined) out.percentage = percentage;
  return out;
}

/** Loads a model with `preset`, reporting through `progress` (a work-done reporter, or the
 * promise of one) when given. The load starts at once, so the status says `loading` before
 * the reporter is there. */
async function loadModel(
  ctx: ServerCtx,
  modelPath: string,
  preset: string,
  progress: WorkDoneProgressReporter | undefined | Promise<WorkDoneProgressReporter | undefined>,
  host: EngineHost = ctx.host,
  options: LoadOptions = {},
): Promise<ModelLoadResult> {
  const t0 = Date.now();
  const loading = host.load(modelPath, preset, options);
  loading.catch(() => undefined); // handled below; not an unhandled rejection while the reporter comes
  let reporter: WorkDoneProgressReporter | undefined;
  try {
    reporter = await progress;
  } catch {
    reporter = undefined;
  }
  reporter?.begin(host === ctx.host ? 'Loading the K3 model' : 'Loading the chat model', 0, modelPath, true);
  ctx.loadProgressSink = (p) => {
    const d = describeLoad(p);
    reporter?.report(d.percentage ?? 0, d.message);
  };
  try {
    const loaded = await loading;
    ctx.log(`model loaded from ${loaded.modelPath} in ${Date.now() - t0} ms (preset ${preset})`);
    return { modelPath: loaded.modelPath, vocabSize: loaded.model.vocabSize, loadMs: Date.now() - t0 };
  } finally {
    ctx.loadProgressSink = undefined;
    reporter?.done();
  }
}

/** Loads the local models the roles use: the completions role's folder (`modelPath`, or the
 * one folder both local roles share), then chat's own when it differs, after the first so
 * that its memory check sees the first one's plan (ServerCtx.chatAdmission). Resolves with
 * the first load's result; the second's failure is the chat role's status. */
async function loadModels(ctx: ServerCtx, modelPath: string, preset: string, progress?: WorkDoneProgressReporter): Promise<ModelLoadResult> {
  const first = loadModel(ctx, modelPath, preset, progress ?? serverProgress(ctx));
  // A context change that came while no model was there is warmed now.
  first.then(() => ctx.completions.warmup.backendReady()).catch(() => undefined);
  const chatPath = ctx.plan.chatEnginePath;
  if (ctx.chatEngine && chatPath) {
    loadModel(ctx, chatPath, preset, serverProgress(ctx), ctx.chatEngine, { after: first, admit: ctx.chatAdmission(chatPath) }).catch((e: Error) =>
      ctx.log(`chat model load failed: ${e.message}`),
    );
  }
  return first;
}

/** A work-done reporter for a load the server starts itself, when the client shows them. */
async function serverProgress(ctx: ServerCtx): Promise<WorkDoneProgressReporter | undefined> {
  if (!ctx.clientProgress) return undefined;
  try {
    const p = await ctx.connection.window.createWorkDoneProgress();
    p.token.onCancellationRequested(() => ctx.engineHosts.forEach((h) => h.cancelLoad()));
    return p;
  } catch {
    return undefined;
  }
}

export function registerHandlers(ctx: ServerCtx, connection: Connection): void {
  connection.onInitialize(async (params: InitializeParams): Promise<InitializeResult> => {
    ctx.initialize(params);
    // The store's first writes (legacy state moved here) come before any listing; a lock
    // another window holds is waited for without blocking this process.
    await ctx.store.ready();
    return {
      capabilities: {
        textDocumentSync: TextDocumentSyncKind.Incremental,
        inlineCompletionProvider: {},
      },
      serverInfo: { name: 'k3-code', version: loadAddon().version() },
    };
  });

  connection.onInitialized(() => {
    for (const remote of ctx.remoteBackends) {
      void remote
        .start()
        .then(() => {
          if (remote === ctx.completionRemote) ctx.completions.warmup.backendReady();
        })
        .catch((e: Error) => ctx.log(`remote backend: ${e.message}`));
    }
    if (!ctx.usesEngine) {
      ctx.status.enable();
      return;
    }
    const modelPath = ctx.init.modelPath;
    if (!modelPath) {
      ctx.host.problem = { kind: 'no-model', action: { kind: 'choose-model-folder', title: 'Choose Model Folder…' }, message: 'No model folder is set.' };
      ctx.status.enable();
      return;
    }
    // The load starts (phase `loading`) before the first status goes out: no `no-model` flash.
    loadModels(ctx, modelPath, ctx.preset).catch((e: Error) => ctx.log(`model load failed: ${e.message}`));
    ctx.status.enable();
  });

  ctx.documents.listen(connection, {
    opened: (uri) => ctx.ring.opened(uri),
    edited: (uri, line) => {
      ctx.ring.edited(uri, line);
      ctx.completions.warmup.edited(uri);
    },
    closed: (uri) => ctx.ring.closed(uri),
    refused: (message) => ctx.log(message),
  });

  connection.onDidChangeConfiguration((p) => {
    const k3 = (p?.settings as { k3?: unknown } | undefined)?.k3;
    if (k3 !== undefined) ctx.updateSettings(k3);
  });

  // Registered as a plain request: the library's inlineCompletion.on() reads
  // params.workDoneToken before any handler runs, so `"params": null` became an internal
  // error instead of InvalidParams.
  connection.onRequest(InlineCompletionRequest.type, answer((params, token) => ctx.completions.provide(params, token)));
  connection.onNotification(ContextDefinitionsNotification.type, (params) => ctx.completions.definitions(params));
  connection.onNotification(ContextDidChangeNotification.type, (params) => void ctx.completions.warmup.contextChanged(params));
  connection.onNotification(CompletionDidAcceptNotification.type, (params) => void ctx.completions.warmup.accepted(params));

  connection.onRequest(StatusRequest.type, () => ctx.status.snapshot());

  connection.onRequest(
    PresetsListRequest.type,
    answer0(() => ({ presets: ctx.presets(), current: ctx.preset, ...(!ctx.usesEngine ? { note: LOCAL_ONLY_PRESETS } : {}) })),
  );

  connection.onRequest(
    PresetsSetRequest.type,
    answer(async (params) => {
      const preset = ctx.checkPreset(params?.preset);
      await ctx.store.updateWorkspace({ preset });
      // With a remote backend the choice is kept for when the local engine is used again.
      const reload = ctx.usesEngine ? ctx.host.loaded?.modelPath : undefined;
      if (reload) await loadModels(ctx, reload, preset, await serverProgress(ctx));
      return { preset, reloaded: reload !== undefined };
    }),
  );

  connection.onRequest(
    ModelLoadRequest.type,
    answer(async (params, token) => {
      const p = params ?? {};
      if (!ctx.usesEngine) throw invalidRequest('k3/model/load applies to the local engine only; both roles use a remote server (k3.completions.backend, k3.chat.backend)');
      if (p.modelPath !== undefined && typeof p.modelPath !== 'string') throw invalidRequest('k3/model/load: modelPath must be a string');
      const modelPath = p.modelPath || ctx.init.modelPath;
      if (!modelPath) throw invalidRequest('k3/model/load: no modelPath given and none in initializationOptions');
      token.onCancellationRequested(() => ctx.engineHosts.forEach((h) => h.cancelLoad()));
      const progress =
        p.workDoneToken !== undefined ? connection.window.attachWorkDoneProgress(p.workDoneToken) : await serverProgress(ctx);
      return loadModels(ctx, modelPath, ctx.preset, progress);
    }),
  );

  connection.onRequest(
    ModelUnloadRequest.type,
    answer0(async () => {
      for (const h of ctx.engineHosts) await h.unload();
      return null;
    }),
  );

  connection.onRequest(
    RemoteApiKeyRequest.type,
    answer(async (params) => {
      if (typeof params?.apiKey !== 'string') throw invalidRequest('k3/remote/setApiKey: apiKey must be a string');
      const role = params.role;
      if (role !== undefined && role !== 'completions' && role !== 'chat') throw invalidRequest(`k3/remote/setApiKey: role must be "completions" or "chat", not ${JSON.stringify(role)}`);
      const targets = role ? [ctx.remotes[role]].filter((r) => r !== undefined) : ctx.remoteBackends;
      if (targets.length === 0) {
        throw invalidRequest(`k3/remote/setApiKey: ${role ? `the ${role} role uses` : 'both roles use'} the local engine (k3.${role ?? 'completions'}.backend is not remote)`);
      }
      const phases = await Promise.all(targets.map((r) => r.setApiKey(params.apiKey)));
      return { phase: phases.find((p) => p !== 'ready') ?? 'ready' };
    }),
  );

  connection.onRequest(ChatSendRequest.type, answer((params, token) => ctx.chat.send(params, token)));
  connection.onRequest(ChatStopRequest.type, answer((params) => ({ stopped: ctx.chat.stop(params?.conversationId) })));
  connection.onRequest(ChatBudgetRequest.type, answer((params) => ctx.chat.budget(params)));
  connection.onRequest(ConversationListRequest.type, answer0(() => ({ conversations: ctx.chat.list() })));
  connection.onRequest(ConversationGetRequest.type, answer((params) => ctx.chat.get(params?.conversationId)));
  connection.onRequest(ConversationClearRequest.type, answer(async (params) => ({ removed: await ctx.chat.clear(params) })));
  connection.onRequest(EditStartRequest.type, answer((params, token) => ctx.edit.start(params, token)));

  connection.onRequest(
    StateClearRequest.type,
    answer0(async () => {
      ctx.chat.cancelAll();
      for (const h of ctx.engineHosts) h.chatHeld = undefined;
      ctx.completions.cache.clear();
      return { removedFiles: await ctx.store.clear() };
    }),
  );

  connection.onShutdown(() => {
    for (const remote of ctx.remoteBackends) remote.dispose();
    ctx.status.dispose();
    ctx.scheduler.cancelAll();
  });
}
