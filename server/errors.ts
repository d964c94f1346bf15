// errors.ts - how failures leave the server: a K3Failure carries the protocol's error kind,
// code and action (protocol/lsp.ts); engine errors are classified here, in one table;
// toResponseError() turns anything thrown by a handler into the JSON-RPC error the client
// sees. Nothing here logs or decides retries.
import { ErrorCodes, LSPErrorCodes, ResponseError } from 'vscode-languageserver';
import { EngineError } from './engine/engine';
import {
  type K3Action,
  type K3ErrorData,
  K3ErrorCodes,
  type K3ErrorKind,
  type K3Problem,
} from '../protocol/lsp';

const ACTIONS: Record<K3Action['kind'], string> = {
  'choose-model-folder': 'Choose Model Folder…',
  'choose-smaller-preset': 'Choose a Smaller Preset…',
  'load-model': 'Load the Model',
  'show-logs': 'Show Logs',
  'set-api-key': 'Set Remote API Key…',
  'open-remote-settings': 'Open Remote Settings',
  'choose-chat-backend': 'Choose Chat Backend…',
  none: '',
};

export function action(kind: K3Action['kind']): K3Action {
  return { kind, title: ACTIONS[kind] };
}

const KINDS: Record<K3ErrorKind, { code: number; action: K3Action['kind'] }> = {
  'model-missing': { code: K3ErrorCodes.ModelMissing, action: 'choose-model-folder' },
  'model-invalid': { code: K3ErrorCodes.ModelInvalid, action: 'choose-model-folder' },
  'out-of-memory': { code: K3ErrorCodes.OutOfMemory, action: 'choose-smaller-preset' },
  'context-full': { code: K3ErrorCodes.ContextFull, action: 'none' },
  'no-model': { code: K3ErrorCodes.NoModel, action: 'load-model' },
  'engine-failed': { code: K3ErrorCodes.EngineFailed, action: 'show-logs' },
  busy: { code: K3ErrorCodes.Busy, action: 'none' },
  'unknown-conversation': { code: K3ErrorCodes.UnknownConversation, action: 'none' },
  'invalid-request': { code: ErrorCodes.InvalidParams, action: 'none' },
  'state-incompatible': { code: K3ErrorCodes.EngineFailed, action: 'none' },
  'file-corrupt': { code: K3ErrorCodes.EngineFailed, action: 'none' },
  // The remote backend's failures use the local engine's codes: no engine to answer, a
  // missing model, a failure.
  'remote-unreachable': { code: K3ErrorCodes.NoModel, action: 'open-remote-settings' },
  'remote-unauthorized': { code: K3ErrorCodes.NoModel, action: 'set-api-key' },
  'remote-model-missing': { code: K3ErrorCodes.ModelMissing, action: 'open-remote-settings' },
  'remote-timeout': { code: K3ErrorCodes.EngineFailed, action: 'open-remote-settings' },
  // Like the local engine while it loads: no model to answer yet, and nothing to do but wait.
  'remote-loading': { code: K3ErrorCodes.NoModel, action: 'none' },
  'remote-failed': { code: K3ErrorCodes.EngineFailed, action: 'show-logs' },
  // Reported as problems and warnings, not as failed requests, except k3/state/clear.
  'storage-unavailable': { code: K3ErrorCodes.EngineFailed, action: 'none' },
  'conversation-changed': { code: K3ErrorCodes.EngineFailed, action: 'none' },
  'remote-insecure': { code: K3ErrorCodes.EngineFailed, action: 'open-remote-settings' },
  'model-cannot-chat': { code: K3ErrorCodes.NoModel, action: 'choose-model-folder' },
};

/** A failure the user can act on: what happened, and the action that helps. */
export class K3Failure extends Error {
  constructor(
    readonly kind: K3ErrorKind,
    message: string,
    readonly status?: string,
    readonly detail?: string,
    /** Overrides the kind's usual action. */
    readonly actionKind?: K3Action['kind'],
  ) {
    super(message);
    this.name = 'K3Failure';
  }

  get data(): K3ErrorData {
    const d: K3ErrorData = { kind: this.kind, action: action(this.actionKind ?? KINDS[this.kind].action) };
    if (this.status !== undefined) d.status = this.status;
    if (this.detail !== undefined) d.detail = this.detail;
    return d;
  }

  get code(): number {
    return KINDS[this.kind].code;
  }

  problem(): K3Problem {
    return { ...this.data, message: this.message };
  }
}

/** The request was cancelled ($/cancelRequest) or superseded by a newer one. */
export class Cancelled extends Error {
  constructor(readonly reason: 'cancelled' | 'superseded' = 'cancelled') {
    super(reason === 'superseded' ? 'superseded by a newer request' : 'cancelled');
    this.name = 'Cancelled';
  }
}

export function invalidRequest(message: string): K3Failure {
  return new K3Failure('invalid-request', message);
}

/** Classifies an engine error met while loading the model in `dir`. */
export function modelLoadFailure(e: unknown, dir: string): K3Failure {
  if (e instanceof K3Failure) return e;
  if (e instanceof EngineError) {
    switch (e.code) {
      case 'out-of-memory':
      case 'budget':
        return new K3Failure('out-of-memory', `The model in ${dir} does not fit in memory with this preset: ${e.detail}`, e.code, e.detail);
      case 'io':
      case 'format':
      case 'config':
      case 'tensor':
      case 'tokenizer':
        return new K3Failure('model-invalid', `The model in ${dir} cannot be used: ${e.detail}`, e.code, e.detail);
      default:
        return new K3Failure('engine-failed', `Loading the model failed: ${e.detail}`, e.code, e.detail);
    }
  }
  return new K3Failure('engine-failed', `Loading the model failed: ${(e as Error).message}`);
}

/** Classifies an engine error met while completing or chatting. */
export function engineFailure(e: unknown): unknown {
  if (!(e instanceof EngineError)) return e;
  switch (e.code) {
    case 'cancelled':
      return new Cancelled();
    case 'out-of-memory':
    case 'budget':
      return new K3Failure('out-of-memory', `The engine ran out of memory: ${e.detail}`, e.code, e.detail);
    case 'context-full':
      return new K3Failure('context-full', `The text is longer than the context: ${e.detail}`, e.code, e.detail);
    default:
      return new K3Failure('engine-failed', `The engine failed: ${e.detail}`, e.code, e.detail);
  }
}

/** What a request handler's failure becomes on the wire. */
export function toResponseError(e: unknown): ResponseError<K3ErrorData | undefined> {
  if (e instanceof ResponseError) return e as ResponseError<K3ErrorData | undefined>;
  if (e instanceof Cancelled) {
    return new ResponseError(e.reason === 'superseded' ? LSPErrorCodes.ServerCancelled : LSPErrorCodes.RequestCancelled, e.message);
  }
  const f = engineFailure(e);
  if (f instanceof K3Failure) return new ResponseError(f.code, f.message, f.data);
  if (f instanceof Cancelled) return toResponseError(f);
  const err = f as Error;
  return new ResponseError(K3ErrorCodes.EngineFailed, `internal error: ${err?.message ?? String(f)}`, {
    kind: 'engine-failed',
    action: action('show-logs'),
    detail: err?.stack ?? String(f),
  });
}
