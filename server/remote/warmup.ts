// warmup.ts - a prompt-only request to a remote server (k3.completions.warmup), so its
// prefix cache holds the prompt the next completion will send (server/completion/warmup.ts
// decides when). The prompt goes exactly as a completion's would (ids or text, the same
// k3_checkpoints), to /v1/completions:
// - llama-server: `max_tokens: 0` (its n_predict) with `cache_prompt`: it processes the prompt
//   and stops after one token (server-context.cpp stops on the budget only once n_gen > 0);
//   the slot keeps the prompt for the next request.
// - k3 serve: `max_tokens: 0` prefills only and stores the checkpoints named.
// - vLLM, SGLang and others: `max_tokens: 1` (they refuse 0); their automatic prefix caching
//   keeps the prompt.
// It streams like a completion, so a cancel (a user request arrived) closes the connection.
import type { WarmResult } from '../completion/backend';
import type { Layout } from '../completion/layout';
import type { Job } from '../scheduler';
import type { RemoteBackend } from './backend';
import { COMPLETION_DEADLINE_TIMEOUTS } from './budget';
import type { TextEstimate } from './completion';

interface UsageChunk {
  usage?: { prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null };
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);

/** The body of the prompt-only request for `layout` (`estimate`: prompts go as text). */
export function warmBody(remote: Pick<RemoteBackend, 'serverKind'>, layout: Layout, estimate: TextEstimate | undefined): Record<string, unknown> {
  const kind = remote.serverKind;
  const checkpoints = [layout.contextEnd, layout.stableEnd].filter((b) => b > 0 && b < layout.ids.length);
  return {
    prompt: estimate ? estimate.decode(Array.from(layout.ids)) : Array.from(layout.ids),
    max_tokens: kind === 'llama-server' || kind === 'k3-serve' ? 0 : 1,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
    ...(kind === 'llama-server' ? { cache_prompt: true } : {}),
    ...(estimate ? {} : { k3_checkpoints: [...new Set(checkpoints)] }),
  };
}

/** Sends the prompt-only request for `layout` as `job`; resolves with the tokens the server
 * says it reused and computed (all computed when it does not say). */
export async function remoteWarm(remote: RemoteBackend, job: Job, layout: Layout, estimate: TextEstimate | undefined): Promise<WarmResult> {
  const result: WarmResult = { reused: 0, prefilled: layout.ids.length };
  job.stage = 'prefill';
  job.tokens = 0;
  await remote.stream(job, 'completions', warmBody(remote, layout, estimate), COMPLETION_DEADLINE_TIMEOUTS, (data) => {
    const u = (data as UsageChunk).usage;
    const prompt = count(u?.prompt_tokens);
    if (prompt !== undefined) {
      result.reused = Math.min(count(u?.prompt_tokens_details?.cached_tokens) ?? 0, prompt);
      result.prefilled = prompt - result.reused;
    }
    return undefined;
  });
  return result;
}
