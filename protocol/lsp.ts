// lsp.ts - the one typed description of every custom LSP method (`k3/*`) between the
// extension and the server. The extension imports its types; the server implements them;
// it imports nothing of either side (test/tidy.test.ts holds that). The chat and inline-edit
// methods are in ./chat.ts (re-exported here); the chat page's messages are in ./webview.ts. Standard LSP (initialize, text sync,
// textDocument/inlineCompletion, $/progress, $/cancelRequest) is not repeated here. Documented for humans, with every error and action, in docs/PROTOCOL.md.
import { NotificationType, RequestType, RequestType0 } from 'vscode-languageserver-protocol';

// ---- Initialization and settings ------------------------------------------------------

/** Options the client passes in `initialize.initializationOptions`. */
export interface InitializationOptions {
  /** Model folder (config.json, shards, tiktoken.model). Empty or absent: no model is
   * loaded until `k3/model/load` names one (status phase `no-model`). */
  modelPath?: string;
  /** Per-workspace folder for chat history, saved engine state and the chosen preset,
   * shared by every window of the workspace (the server locks it for each write).
   * Absent: nothing is kept between runs. */
  storagePath?: string;
  /** Folders where an older k3-code kept this workspace's state; their contents move to
   * storagePath once. */
  legacyStoragePaths?: string[];
  /** What identifies the workspace (its folder URIs, or its workspace file), recorded in
   * storagePath for people looking at it. */
  workspace?: string[];
  /** Memory preset name (`auto`, `laptop`, ...); absent: the workspace's saved choice, else `auto`. */
  preset?: string;
  /** The `k3` settings section (the same shape `workspace/didChangeConfiguration` sends). */
  settings?: SettingsSection;
  /** What serves each role (ghost text, chat). Absent, or a role absent: the older single
   * choice below decides for that role. */
  roles?: { completions?: RoleOptions; chat?: RoleOptions };
  /** The older single choice for both roles, still read when `roles` does not name a role.
   * `local` (default): the engine runs in this process. `remote`: completions and chat go to
   * an OpenAI-compatible server (`remote`); modelPath then only supplies the tokenizer. */
  backend?: BackendKind;
  /** The remote server, when `backend` is `remote`. */
  remote?: RemoteOptions;
}

export type BackendKind = 'local' | 'remote';

/** The two things the extension asks a model for; each may be served by its own backend. */
export type Role = 'completions' | 'chat';

/** `embedded`: the model shipped inside the extension (k3-mini); `local`: the checkpoint at
 * `k3.modelPath`; `remote`: an OpenAI-compatible server. */
export type RoleBackend = 'embedded' | 'local' | 'remote';

export interface RoleOptions {
  backend: RoleBackend;
  /** The model folder of an `embedded` or `local` role; absent: `modelPath`. */
  modelPath?: string;
  /** The server of a `remote` role. */
  remote?: RemoteOptions;
}

export interface RemoteOptions {
  /** Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8080` or `https://host/v1`
   * (`/v1` is added when the path does not end with it). */
  endpoint: string;
  /** The model id to ask for; empty or absent: the first one `GET /v1/models` lists. */
  model?: string;
  /** Sent as `Authorization: Bearer <apiKey>`; never logged. */
  apiKey?: string;
  /** Most milliseconds to wait for a connection, for the response to start, or between two
   * streamed events (default 60000). */
  timeoutMs?: number;
}

/** When a completion may run over several lines (`k3.completions.multiline`): `auto` at an
 * empty line and after a block opener, `always` wherever nothing follows the cursor on its
 * line, `never` the cursor's line only (or the next line, when the cursor's is complete). */
export type MultilineMode = 'auto' | 'always' | 'never';

export interface CompletionSettings {
  /** Several lines (default `auto`; docs/PROMPTS.md, "Post-processing"). */
  multiline: MultilineMode;
  /** Most lines of a multi-line completion (default 8). */
  maxLines: number;
  /** Most tokens generated per completion (default 128). */
  maxTokens: number;
  /** Most prompt tokens: extra context plus the document prefix (default 2048). */
  maxPromptTokens: number;
  /** Of which extra context from other documents (default 512). */
  maxContextTokens: number;
  /** And of which, besides, snippets of other open documents that share the most identifiers
   * with the lines above the cursor (default 192; 0: none; server/completion/snippets.ts). */
  snippetTokens: number;
  /** Token healing where the backend supports it (default true; docs/PROMPTS.md). Off only
   * to measure what it does (npm run bench -- quality). */
  heal: boolean;
  /** The junk filter (default true; server/completion/filters.ts). Off only to measure it, or
   * for tests that need the raw output of a random-weight model. */
  filter: boolean;
  /** Fill in the middle when the model has FIM tokens (default true). Off only to measure it. */
  fim: boolean;
  /** Hide the model's latency (default true; `k3.completions.warmup`): prefill the prompt
   * of the next completion when the editor's context changes, and compute the next
   * suggestion after one is accepted, both in idle time (server/completion/warmup.ts). */
  warmup: boolean;
  /** Which route of a remote completions server serves ghost text (`k3.completions.remote.route`,
   * default `auto`; docs/REMOTE.md, "A FIM coder on llama-server"). */
  remoteRoute: RemoteRoute;
}

/** `completions`: `/v1/completions` with our own prompt layout; `infill`: llama-server's
 * `/infill`, which lays out the model's own FIM tokens from its GGUF; `auto`: `/infill` when
 * the server is llama-server, prompts go as text and it answers `/infill`. */
export type RemoteRoute = 'auto' | 'completions' | 'infill';

export interface ChatSettings {
  /** Most tokens of one reply, reasoning included (default 4096; `k3.chat.maxTokens`). A
   * model not trained for chat answers with at most 128. */
  maxTokens: number;
  /** New conversations think first (default true). */
  thinking: boolean;
  /** Positions a conversation may reach (default 32768). */
  maxContext: number;
}

export interface StateSettings {
  /** Bytes of saved engine state kept for the workspace; oldest evicted first (default 4 GiB). */
  maxBytes: number;
  /** Conversations kept; oldest evicted first (default 100). */
  maxConversations: number;
}

export interface EngineSettings {
  /** Worker threads per forward pass; 0 (default): one per core but one. */
  threads: number;
  /** Draft up to this many tokens per forward pass (0..16, default 8), in completions and
   * chat; drafts are verified, so this changes speed, never the text. */
  speculation: number;
}

export interface ServerSettings {
  completions: CompletionSettings;
  chat: ChatSettings;
  state: StateSettings;
  engine: EngineSettings;
}

/** Any subset of ServerSettings; other keys of the `k3` section are ignored. */
export interface SettingsSection {
  completions?: Partial<CompletionSettings>;
  chat?: Partial<ChatSettings>;
  state?: Partial<StateSettings>;
  engine?: Partial<EngineSettings>;
}

// ---- Errors ------------------------------------------------------------------------------

/** JSON-RPC error codes of `k3` failures (the server-defined range). Malformed params are
 * the standard InvalidParams (-32602); cancelled requests RequestCancelled (-32800). */
export const K3ErrorCodes = {
  /** The model folder does not exist or holds no config.json. */
  ModelMissing: -32001,
  /** The model folder's files are broken (truncated shard, bad config, wrong tensor). */
  ModelInvalid: -32002,
  /** The model or a context does not fit in memory. */
  OutOfMemory: -32003,
  /** The prompt or conversation outgrew the context. */
  ContextFull: -32004,
  /** No model is loaded (or it is still loading). */
  NoModel: -32005,
  /** The engine failed in a way the user cannot fix (a bug; see the logs). */
  EngineFailed: -32006,
  /** The conversation is answering already. */
  Busy: -32007,
  /** No conversation has that id. */
  UnknownConversation: -32008,
} as const;

export type K3ErrorKind =
  | 'model-missing'
  | 'model-invalid'
  | 'out-of-memory'
  | 'context-full'
  | 'no-model'
  | 'engine-failed'
  | 'busy'
  | 'unknown-conversation'
  | 'invalid-request'
  | 'state-incompatible'
  | 'file-corrupt'
  | 'remote-unreachable'
  | 'remote-unauthorized'
  | 'remote-model-missing'
  | 'remote-timeout'
  | 'remote-loading'
  | 'remote-failed'
  | 'storage-unavailable'
  | 'conversation-changed'
  /** An inline edit asked of a model not trained for chat (k3-mini): it cannot follow an
   * instruction, so nothing is generated. */
  | 'model-cannot-chat'
  /** The API key would go in clear text (http://) to another machine. */
  | 'remote-insecure';

/** What the user can do about a failure; the extension shows it as a button. */
export interface K3Action {
  kind: 'choose-model-folder' | 'choose-smaller-preset' | 'load-model' | 'show-logs' | 'set-api-key' | 'open-remote-settings' | 'choose-chat-backend' | 'none';
  title: string;
}

/** `data` of every k3 error response, and the body of problem reports. */
export interface K3ErrorData {
  kind: K3ErrorKind;
  action: K3Action;
  /** The engine's status name (`io`, `out-of-memory`, ...) when the engine reported it. */
  status?: string;
  /** The engine's or the server's detail: file, field, numbers. */
  detail?: string;
}

/** A problem the server handled without failing a request: a file set aside, a saved
 * state that could not be used. Sent as `k3/didReportProblem` and in results' `warnings`. */
export interface K3Problem extends K3ErrorData {
  message: string;
}

// ---- Status ------------------------------------------------------------------------------

export type EnginePhase = 'no-model' | 'loading' | 'ready' | 'busy' | 'error';

export interface LoadProgress {
  modelPath: string;
  /** `opening`: the engine reads and checks the checkpoint; `sessions`: contexts allocated. */
  phase: 'opening' | 'tokenizer' | 'sessions';
  /** Bytes read so far; absent until the engine reports it. */
  bytesLoaded?: number;
  /** Bytes of the checkpoint's shards. */
  bytesTotal: number;
  elapsedMs: number;
  /** Expected total, from the last load on this machine scaled by size; absent the first time. */
  estimateMs?: number;
}

/** The model loaded or loading, as its folder describes it. */
export interface ModelInfo {
  /** What the user calls it: `k3-mini` for the embedded default model, else the folder's name. */
  name: string;
  /** The folder. */
  path: string;
  /** Bytes of its weights (every shard). */
  bytes: number;
  /** Trained for chat: config.json's `k3_code.chat` (absent: true; the released K3 is). A
   * model that is not (k3-mini, a code completer) still answers a chat message, as a short
   * plain continuation labelled as coming from a completion model. */
  chat: boolean;
}

/** Where the workspace's state is kept, and whether it can be now. */
export interface StorageStatus {
  /** The folder; absent when nothing is kept between runs. */
  path?: string;
  /** Why chat history and choices cannot be saved now (the window keeps them in memory). */
  problem?: K3Problem;
}

/** What the engine runs right now. */
export interface JobStatus {
  kind: 'completion' | 'chat';
  stage: 'prefill' | 'generate' | 'save';
  /** Tokens prefilled (prefill) or generated (generate) so far by this job. */
  tokens: number;
  /** Milliseconds since the job started. */
  elapsedMs: number;
}

/** One completion request, as measured. */
export interface CompletionStats {
  /** `cache`: served from earlier output the user typed into (no engine work). */
  source: 'engine' | 'cache';
  outcome: 'done' | 'cancelled' | 'superseded' | 'failed';
  promptTokens: number;
  /** Prompt tokens restored from the sequence or a checkpoint, not recomputed. */
  reusedTokens: number;
  /** Prompt tokens run through the model. */
  prefilledTokens: number;
  generatedTokens: number;
  /** Tokens the engine still emitted after the cancellation reached it. */
  tokensAfterCancel?: number;
  draftedTokens: number;
  acceptedTokens: number;
  /** Token healing: the text the prompt left out at the cursor (see docs/PROMPTS.md), and
   * the generated tokens that spelled it again. */
  healedText?: string;
  healedTokens?: number;
  /** `fim`: the text after the cursor went in as a fill-in-the-middle suffix (a model
   * whose tokenizer names the FIM tokens); `plain`: a continuation (K3 itself). */
  layout?: 'fim' | 'plain';
  /** The junk filter's verdict, when it acted (server/completion/filters.ts). */
  filtered?: { rule: string; action: 'cut' | 'dropped' };
  /** Snippets the prompt carried (server/completion/snippets.ts), and the time spent finding
   * them (a cached answer costs about nothing). */
  snippets?: number;
  /** Of those, the definitions the editor sent (k3/context/definitions). */
  definitions?: number;
  contextMs?: number;
  prefillMs: number;
  generateMs: number;
  totalMs: number;
}

export interface ChatTurnStats {
  conversationId: string;
  /** Where the turn resumed from: the context already held it, the saved state, or nothing. */
  resumedFrom: 'context' | 'saved-state' | 'none';
  promptTokens: number;
  reusedTokens: number;
  prefilledTokens: number;
  generatedTokens: number;
  draftedTokens: number;
  acceptedTokens: number;
  prefillMs: number;
  generateMs: number;
  /** Generated tokens per second. */
  tokensPerSecond: number;
}

export interface StatusResult {
  /** Version of the native engine the server loaded. */
  engineVersion: string;
  phase: EnginePhase;
  /** The model folder loaded or loading. */
  modelPath?: string;
  /** What that model is (absent with no model, and with the remote backend). */
  model?: ModelInfo;
  /** The per-workspace state folder. */
  storage: StorageStatus;
  /** The memory preset in use. */
  preset: string;
  /** While `phase` is `loading`. */
  load?: LoadProgress;
  /** Why there is no model (`no-model`) or what failed (`error`). */
  error?: K3Problem;
  /** What the engine runs now (`busy`). */
  job?: JobStatus;
  /** Requests waiting for the engine, per kind. */
  queued: { completion: number; chat: number };
  lastCompletion?: CompletionStats;
  /** What warm-up did since the server started (absent before the first). */
  warmup?: WarmupStats;
  lastChat?: ChatTurnStats;
  /** What the completion session's prefix checkpoints hold now, and the most they may
   * (sized from the model and the completion context); absent while it runs. */
  completionCheckpoints?: { count: number; bytes: number; limit: number };
  /** Present when a role goes to a remote server: the completions role's, else the chat
   * role's (`roles` has each). */
  remote?: RemoteStatus;
  /** Who serves each role: the top-level fields above describe the local engine when a role
   * uses it, else the remote server. */
  roles: { completions: RoleStatus; chat: RoleStatus };
}

/** One role's backend as the status bar shows it: model, where, state. */
export interface RoleStatus {
  backend: RoleBackend;
  /** The model's name (the folder's, k3-mini for the embedded one, or the remote model id);
   * absent while unknown. */
  model?: string;
  /** The model folder, or the remote endpoint. */
  where: string;
  /** This role's state: the local engine's, or its remote server's. */
  phase: EnginePhase;
  /** Why this role cannot answer now. */
  error?: K3Problem;
  /** Whether the model was trained for chat (absent while unknown). */
  chats?: boolean;
  /** A local role's model in memory by its plan (weights and budgets, its sessions'
   * contexts), in bytes, once loaded; the same figure for both roles when they share it. */
  memoryBytes?: number;
  /** The role's remote server, for a `remote` role. */
  remote?: RemoteStatus;
}

/** The servers whose behaviour the remote backend knows (docs/REMOTE.md's table). */
export type RemoteServerKind = 'llama-server' | 'vllm' | 'sglang' | 'k3-serve';

export interface RemoteStatus {
  /** The API's base URL (credentials in it removed). */
  endpoint: string;
  /** The model id in use (the configured one, or the first the server lists). */
  model?: string;
  /** Whether completion prompts go as token ids (a local tokenizer the check proved to be
   * the server's) or as text. Text until the check finished. */
  prompts: 'ids' | 'text';
  /** With `prompts: 'text'`: why (no local tokenizer, the vocabulary sizes or a probe's
   * tokens differ, nothing the server publishes can prove it, not checked yet). */
  promptsReason?: string;
  /** Which server answers, as its `GET /v1/models` tells; absent when unknown. */
  server?: RemoteServerKind;
  /** The model's context in tokens, when the server said (completions are laid out to fit). */
  contextTokens?: number;
  /** While `phase` is `loading`: `connecting` until the server first answers, `model` while
   * the server answers that it is loading its model. */
  loading?: 'connecting' | 'model';
  /** For the server of the completions role: the route ghost text goes to, and why. */
  completionRoute?: 'completions' | 'infill';
  completionRouteReason?: string;
}

/** `k3/status`: what the engine is doing now. Answered at once, even while it works. */
export namespace StatusRequest {
  export const method = 'k3/status' as const;
  export const type = new RequestType0<StatusResult, void>(method);
}

/** `k3/didChangeStatus` (server -> client): the status, sent when the phase or job changes
 * and at most every 250 ms while a job or load progresses. */
export namespace DidChangeStatusNotification {
  export const method = 'k3/didChangeStatus' as const;
  export const type = new NotificationType<StatusResult>(method);
}

/** Counts of the work done ahead of need (k3.completions.warmup): prompt-only prefills on a
 * context change, suggestions computed after an accept, how many of each were cancelled (a
 * user request, a newer context, an edit), the requests answered with one computed ahead,
 * and the tokens the last prefill reused and computed. */
export interface WarmupStats {
  prefills: number;
  prefillsCancelled: number;
  ahead: number;
  aheadCancelled: number;
  aheadServed: number;
  lastReusedTokens?: number;
  lastPrefilledTokens?: number;
}

/** The cursor in `uri` at `version`, for a warm-up. */
export interface CompletionPositionParams {
  uri: string;
  version: number;
  position: { line: number; character: number };
}

/** `k3/context/didChange` (client -> server, debounced; not sent with warm-up off): a document
 * was opened or switched to; the server prefills the prompt of a completion at `position`. */
export namespace ContextDidChangeNotification {
  export const method = 'k3/context/didChange' as const;
  export const type = new NotificationType<CompletionPositionParams>(method);
}

/** `k3/completion/didAccept` (client -> server): a suggestion was accepted, the cursor is
 * after it; the server computes the next suggestion there into its cache. */
export namespace CompletionDidAcceptNotification {
  export const method = 'k3/completion/didAccept' as const;
  export const type = new NotificationType<CompletionPositionParams>(method);
}

/** One definition the editor's language features found for an identifier near the cursor. */
export interface ContextDefinition {
  /** The document that holds it (another than the cursor's). */
  uri: string;
  languageId: string;
  /** Its first line (0-based) and the lines from there (the signature and what follows). */
  line: number;
  text: string;
}

export interface ContextDefinitionsParams {
  /** The document the cursor is in, and its version when they were gathered. */
  uri: string;
  version: number;
  definitions: ContextDefinition[];
}

/** `k3/context/definitions` (client -> server): the definitions of the identifiers near the
 * cursor, gathered by the extension (vscode.executeDefinitionProvider) before it asks for a
 * completion; the server lays them out with the snippets (docs/PROMPTS.md, "Snippets the
 * cursor uses"). Sent only when they changed; a gathering cancelled with its request sends
 * nothing. */
export namespace ContextDefinitionsNotification {
  export const method = 'k3/context/definitions' as const;
  export const type = new NotificationType<ContextDefinitionsParams>(method);
}

/** `k3/didReportProblem` (server -> client): a problem handled without failing a request. */
export namespace DidReportProblemNotification {
  export const method = 'k3/didReportProblem' as const;
  export const type = new NotificationType<K3Problem>(method);
}

// ---- Presets -----------------------------------------------------------------------------

export interface PresetInfo {
  id: string;
  label: string;
  description: string;
  /** The engine's budgets for this preset, bytes (absent for `auto` and `mapped`, which
   * size themselves). */
  trunkBytes?: number;
  expertCacheBytes?: number;
  /** The peak memory the preset needs with the released K3 (full scale), bytes. */
  peakBytes?: number;
  /** The engine's forecast of seconds per token for the released K3 with this preset on this
   * machine (its measured memory bandwidth and disk speed); absent until the machine has
   * been measured (`npm run bench -- scale`). */
  secondsPerToken?: number;
  /** The engine's forecast of the time to first token for the released K3 with this preset
   * on this machine: seconds to prefill a 512- and a 2,048-token prompt, in passes of the
   * batch its memory plan allows here. Absent with secondsPerToken. */
  firstTokenSeconds?: { tokens: number; seconds: number }[];
  /** How the forecast did where this machine was measured: forecast against measured on
   * `configurations` configurations of a K3-width slice, `within` of them within 15 %, the
   * largest miss `worst` (a fraction). Absent with the forecast, or when none was recorded. */
  forecastCheck?: { configurations: number; within: number; worst: number };
}

export interface PresetsListResult {
  presets: PresetInfo[];
  /** The preset in use (the workspace's saved choice). */
  current: string;
  /** Said to the user with the list: with a remote backend, that presets apply to the local
   * engine only. */
  note?: string;
}

/** `k3/presets/list`. */
export namespace PresetsListRequest {
  export const method = 'k3/presets/list' as const;
  export const type = new RequestType0<PresetsListResult, void>(method);
}

export interface PresetsSetParams {
  preset: string;
}

export interface PresetsSetResult {
  preset: string;
  /** True when a loaded model was reloaded with the new preset. */
  reloaded: boolean;
}

/** `k3/presets/set`: chooses the preset for this workspace (saved) and reloads the model
 * if one is loaded. */
export namespace PresetsSetRequest {
  export const method = 'k3/presets/set' as const;
  export const type = new RequestType<PresetsSetParams, PresetsSetResult, K3ErrorData>(method);
}

// ---- Remote backend ------------------------------------------------------------------------

export interface RemoteApiKeyParams {
  /** The new key; empty: none. */
  apiKey: string;
  /** The role whose server takes it; absent: every remote role. */
  role?: Role;
}

/** `k3/remote/setApiKey`: replaces the API key of the remote backend (the extension keeps it in
 * SecretStorage) and checks the server again. Resolves with the phase after the check. */
export namespace RemoteApiKeyRequest {
  export const method = 'k3/remote/setApiKey' as const;
  export const type = new RequestType<RemoteApiKeyParams, { phase: EnginePhase }, K3ErrorData>(method);
}

// ---- Model ---------------------------------------------------------------------------------

export interface ModelLoadParams {
  /** Absent: the folder from initializationOptions. */
  modelPath?: string;
  /** `$/progress` token for this load (work-done progress, cancellable). */
  workDoneToken?: string | number;
}

export interface ModelLoadResult {
  modelPath: string;
  vocabSize: number;
  loadMs: number;
}

/** `k3/model/load`: opens the model (replacing any loaded one). Resolves when it is ready;
 * cancelling the request or its progress abandons the load. */
export namespace ModelLoadRequest {
  export const method = 'k3/model/load' as const;
  export const type = new RequestType<ModelLoadParams, ModelLoadResult, K3ErrorData>(method);
}

/** `k3/model/unload`: stops every job and frees the model. */
export namespace ModelUnloadRequest {
  export const method = 'k3/model/unload' as const;
  export const type = new RequestType0<null, void>(method);
}

// ---- Chat and inline edit: ./chat.ts ---------------------------------------------------------

export * from './chat';
