// protocol.ts - the one typed description of every custom LSP method (`k3/*`) between the
// extension and the server. The extension and the webview import its types; the server
// implements them. Standard LSP (initialize, inline completion, progress, cancellation)
// is not repeated here. Documented for humans in docs/PROTOCOL.md.
import { RequestType0 } from 'vscode-languageserver-protocol';

/** Options the client passes in `initialize.initializationOptions`. */
export interface InitializationOptions {
  /** Model folder (config.json, shards, tiktoken.model); empty: the embedded default. */
  modelPath?: string;
  /** Per-workspace folder for chat history, saved engine state and the chosen preset. */
  storagePath?: string;
  /** Memory preset name (`auto`, `laptop`, ...). */
  preset?: string;
}

export type EnginePhase = 'no-model' | 'loading' | 'ready' | 'busy' | 'error';

export interface StatusResult {
  /** Version of the native engine the server loaded. */
  engineVersion: string;
  phase: EnginePhase;
}

/** `k3/status`: what the engine is doing now. Answered promptly even while it works. */
export namespace StatusRequest {
  export const method = 'k3/status' as const;
  export const type = new RequestType0<StatusResult, void>(method);
}
