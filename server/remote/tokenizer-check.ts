// tokenizer-check.ts - whether completion prompts may go to a remote server as token ids:
// only when the local tokenizer is proven to be the server's own. Ids from another
// tokenizer (the embedded k3-mini's 8,448 tokens sent to a K3 server) are read as other
// text, and the server answers fluent garbage with nothing saying why; text is always
// right, ids only faster. So the verdict is `text`, with the reason, on any mismatch or
// doubt, and `ids` only when something the server says confirms the tokenizer and nothing
// contradicts it:
// - the vocabulary size it publishes: llama-server's `GET /v1/models` `meta.n_vocab`; k3
//   serve names its own in the refusal of an id past it (one 400, nothing generated);
//   vLLM and SGLang publish none;
// - a probe text tokenized by its tokenize route: llama-server `POST /tokenize {content}`,
//   vLLM `POST /tokenize {model, prompt}`, SGLang `POST /v1/tokenize {model, prompt}`
//   (serving_tokenize.py), each answering `{tokens: [...]}`; k3 serve has none.
// It sends through the caller's `ask` and keeps no state (backend.ts keeps the verdict).
import type { RemoteServerKind } from '../../protocol/lsp';
import type { Encoder } from '../completion/layout';

/** Code, prose, digits, runs of spaces and non-ASCII text: tokenizers that differ at all
 * differ on this. */
export const PROBE_TEXT = 'def greet(name):\n    return f"Hello, {name}!"  # 1 + 22 != 333 \u2014 na\u00efve \u65e5\u672c\u8a9e\n\n\tend';

export type PromptVerdict = { prompts: 'ids'; evidence: string } | { prompts: 'text'; reason: string };

/** A JSON request to the server (`path` relative to the API base, `../x` for its root);
 * rejects when it fails. */
export type Ask = (path: string, method: 'GET' | 'POST', body?: unknown) => Promise<unknown>;

/** The local tokenizer, as far as the check needs it. */
export interface LocalTokenizer extends Encoder {
  readonly vocabSize: number;
}

/** The tokenize route of each server, and how it is asked. */
function tokenizeRequest(server: RemoteServerKind | undefined, model: string | undefined): { path: string; body: unknown } | undefined {
  switch (server) {
    case 'llama-server':
      return { path: '../tokenize', body: { content: PROBE_TEXT, add_special: false } };
    case 'vllm':
      return { path: '../tokenize', body: { ...(model ? { model } : {}), prompt: PROBE_TEXT, add_special_tokens: false } };
    case 'sglang':
      return { path: 'tokenize', body: { ...(model ? { model } : {}), prompt: PROBE_TEXT, add_special_tokens: false } };
    default:
      return undefined;
  }
}

/** k3 serve's refusal of a prompt id past its vocabulary names the vocabulary. */
async function k3ServeVocab(ask: Ask, model: string | undefined): Promise<number | undefined> {
  try {
    await ask('completions', 'POST', { ...(model ? { model } : {}), prompt: [2147483647], max_tokens: 1, stream: false });
  } catch (e) {
    const m = /not a token id \(an integer in 0\.\.(\d+)\)/.exec(String((e as { serverMessage?: unknown }).serverMessage ?? (e as Error).message));
    if (m) return Number(m[1]) + 1;
  }
  return undefined;
}

const ids = (v: unknown): number[] | undefined =>
  Array.isArray(v) && v.every((x) => Number.isInteger(x)) ? (v as number[]) : undefined;

const shown = (a: readonly number[]): string => (a.length > 12 ? `[${a.slice(0, 12).join(', ')}, …] (${a.length} ids)` : `[${a.join(', ')}]`);

/**
 * The verdict for `local` against the server that answered the check (`server`, its
 * listed `model`, and the `n_vocab` its listing published, if any). Never throws: a route
 * that fails is no evidence either way.
 */
export async function checkTokenizer(
  local: LocalTokenizer | undefined,
  server: RemoteServerKind | undefined,
  model: string | undefined,
  listedVocab: number | undefined,
  ask: Ask,
): Promise<PromptVerdict> {
  if (!local) return { prompts: 'text', reason: 'no K3 tokenizer is known here (k3.modelPath names no folder with tiktoken.model)' };
  const evidence: string[] = [];
  const vocab = listedVocab ?? (server === 'k3-serve' ? await k3ServeVocab(ask, model) : undefined);
  if (vocab !== undefined) {
    if (vocab !== local.vocabSize) {
      return { prompts: 'text', reason: `the server's vocabulary has ${vocab} tokens, the local tokenizer's ${local.vocabSize}: they are not the same tokenizer` };
    }
    evidence.push(`its vocabulary has ${vocab} tokens, as the local tokenizer's`);
  }
  const probe = tokenizeRequest(server, model);
  if (probe) {
    let theirs: number[] | undefined;
    try {
      theirs = ids(((await ask(probe.path, 'POST', probe.body)) as { tokens?: unknown } | null)?.tokens);
    } catch {
      theirs = undefined; // no such route (an older server, a proxy in front): no evidence
    }
    if (theirs) {
      const ours = Array.from(local.encode(PROBE_TEXT, false));
      if (theirs.length !== ours.length || theirs.some((id, i) => id !== ours[i])) {
        return { prompts: 'text', reason: `the server tokenizes a probe text as ${shown(theirs)}, the local tokenizer as ${shown(ours)}: they are not the same tokenizer` };
      }
      evidence.push(`it tokenizes a probe text as the local tokenizer does (${ours.length} ids)`);
    }
  }
  if (evidence.length === 0) {
    return { prompts: 'text', reason: 'the server publishes neither its vocabulary size nor a tokenize route, so the local tokenizer cannot be proven to be its own' };
  }
  return { prompts: 'ids', evidence: evidence.join('; ') };
}
