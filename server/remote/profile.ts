// profile.ts - what the remote backend knows about each OpenAI-compatible server it may
// talk to, read from their sources (docs/REMOTE.md's table, with the versions read): how
// `GET /v1/models` tells which server answers and its context size, and which route checks
// the API key without a generation. Everything a server says is checked before use: a
// listing that is not the API's shape lists no model. It sends nothing (backend.ts does).
import type { RemoteServerKind } from '../../protocol/lsp';

/** A model `GET /v1/models` lists. */
export interface ListedModel {
  id: string;
  /** Other names the server answers to (llama-server's `aliases`). */
  aliases: string[];
  /** Tokens a prompt and its reply may take together, when the server says. */
  contextTokens?: number;
  /** The size of the model's vocabulary, when the server publishes it (llama-server:
   * `meta.n_vocab`); tokenizer-check.ts compares it with the local tokenizer's. */
  vocabSize?: number;
}

export interface ModelListing {
  /** Which server answered, from the listing's `owned_by`; undefined when unknown. */
  server: RemoteServerKind | undefined;
  models: ListedModel[];
}

/**
 * How the API key is checked on a server without costing a generation:
 * - `models`: `GET /v1/models` itself needs the key there;
 * - `root-get`: a GET of `path` at the server's root needs it (llama-server exempts
 *   `/v1/models` and `/health` from `--api-key`, not `/props`, which runs no inference);
 * - `probe`: nothing cheaper is known to be protected: `GET /v1/models` without the key
 *   tells whether the listing is protected; only where it is not, a one-token completion
 *   with the key answers.
 */
export type KeyCheck = { how: 'models' } | { how: 'root-get'; path: string } | { how: 'probe' };

export interface ServerProfile {
  /** As the user reads it. */
  name: string;
  keyCheck: KeyCheck;
}

export const PROFILES: Record<RemoteServerKind | 'unknown', ServerProfile> = {
  'llama-server': { name: 'llama-server', keyCheck: { how: 'root-get', path: 'props' } },
  vllm: { name: 'vLLM', keyCheck: { how: 'models' } },
  sglang: { name: 'SGLang', keyCheck: { how: 'models' } },
  'k3-serve': { name: 'k3 serve', keyCheck: { how: 'models' } },
  unknown: { name: 'the server', keyCheck: { how: 'probe' } },
};

/** `owned_by` of each server's model cards. */
const OWNERS: Record<string, RemoteServerKind> = { llamacpp: 'llama-server', vllm: 'vllm', sglang: 'sglang', k3: 'k3-serve' };

const positive = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);

/**
 * Reads a `GET /v1/models` answer: model ids, aliases, context sizes (vLLM, SGLang and k3
 * serve: `max_model_len`; llama-server: `meta.n_ctx`, the context of one slot) and the
 * vocabulary size where published (llama-server: `meta.n_vocab`).
 */
export function readModelListing(value: unknown): ModelListing {
  const data = (value as { data?: unknown } | null)?.data;
  const cards = Array.isArray(data) ? data : [];
  let server: RemoteServerKind | undefined;
  const models: ListedModel[] = [];
  for (const card of cards) {
    const c = card as { id?: unknown; aliases?: unknown; owned_by?: unknown; max_model_len?: unknown; meta?: { n_ctx?: unknown; n_vocab?: unknown } | null } | null;
    if (typeof c?.id !== 'string') continue;
    if (typeof c.owned_by === 'string' && OWNERS[c.owned_by]) server ??= OWNERS[c.owned_by];
    const aliases = Array.isArray(c.aliases) ? c.aliases.filter((a): a is string => typeof a === 'string') : [];
    const contextTokens = positive(c.max_model_len) ?? positive(c.meta?.n_ctx);
    const vocabSize = positive(c.meta?.n_vocab);
    models.push({ id: c.id, aliases, ...(contextTokens ? { contextTokens } : {}), ...(vocabSize ? { vocabSize } : {}) });
  }
  return { server, models };
}

/** The listed model `wanted` names (by id or alias), or the first one when none is wanted. */
export function findModel(listing: ModelListing, wanted: string | undefined): ListedModel | undefined {
  if (!wanted) return listing.models[0];
  return listing.models.find((m) => m.id === wanted) ?? listing.models.find((m) => m.aliases.includes(wanted));
}

/** llama-server's `/props`: the context of one slot. */
export function propsContext(value: unknown): number | undefined {
  return positive((value as { default_generation_settings?: { n_ctx?: unknown } | null } | null)?.default_generation_settings?.n_ctx);
}
