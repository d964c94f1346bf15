// infill.ts - ghost text through llama-server's `/infill` (tools/server, server-context.cpp
// post_infill and server-common.cpp format_prompt_infill): the server lays out the prompt
// with the FIM tokens its GGUF names (`[FIM_REP]myproject [FIM_SEP]file chunk … [FIM_PRE]
// input_prefix prompt [FIM_SUF]input_suffix [FIM_MID]`, or the suffix first with
// `--spm-infill`), so any FIM model served there completes with its own training format,
// whatever tokenizer we have here. The completion service still chooses the context: the
// ring's chunks and the snippets go as `input_extra` in the layout's order (stable first,
// so the server's prefix cache keeps them), the file above the cursor's line as
// `input_prefix`, the cursor's line as `prompt` (so typing on it leaves the prefix's tokens
// alone), and the rest of the line and the lines below as `input_suffix`. Replies stream as
// `{content, stop}` events; the last (`stop: true`) carries the counts and `timings` (no
// [DONE]). Which route serves completions is decided here too (chooseRoute), from the
// setting, the server, the prompt verdict and a probe of /infill; an /infill refusal (the
// model has no FIM tokens: HTTP 501, or no such route: 404) is remembered and the request
// goes to /v1/completions instead. It does not post-process (the service does).
import type { CompletionBackend } from '../completion/backend';
import { type Encoder, FIM_SUFFIX_LINES, FIM_SUFFIX_TOKENS } from '../completion/layout';
import type { RemoteRoute, RemoteServerKind } from '../../protocol/lsp';
import type { RemoteBackend } from './backend';
import { COMPLETION_DEADLINE_TIMEOUTS } from './budget';
import { CompletionStream } from './completion-stream';
import { CHARS_PER_TOKEN, remoteCompletionBackend, TextEstimate } from './completion';
import { RemoteError } from './http';
import type { PromptVerdict } from './tokenizer-check';

/** The route, relative to the API base (`…/v1/`): /infill is at the server's root. */
export const INFILL_ROUTE = '../infill';

/** Tokens llama-server adds around our parts: BOS where the vocabulary adds one, FIM_PRE,
 * FIM_SUF, FIM_MID, and a FIM_SEP line naming the file where the model has FIM_SEP. */
const INFILL_OVERHEAD_TOKENS = 8;

/** Whether the server answers /infill, as its probe (or a refusal since) said. */
export type InfillSupport = { state: 'unknown'; reason: string } | { state: 'yes' } | { state: 'no'; reason: string };

export interface RouteChoice {
  route: 'completions' | 'infill';
  reason: string;
}

/** An /infill request the server refused for good (no FIM tokens, no such route): the
 * request goes to /v1/completions instead. */
export class InfillRefused extends Error {}

/** The server's refusal of /infill, in words, when `e` is one (501 not supported, 404). */
export function infillRefusal(e: RemoteError): string | undefined {
  const said = e.serverMessage?.trim();
  if (e.httpStatus === 501) return `HTTP 501${said ? `: ${said}` : ''}`;
  if (e.httpStatus === 404 && !/model/i.test(said ?? '')) return `no /infill route (HTTP 404${said ? `: ${said}` : ''})`;
  return undefined;
}

/**
 * Asks /infill whether the model has FIM tokens, without a generation: llama-server checks
 * the three FIM tokens before it reads the request (501 when one is missing), then refuses
 * an `input_extra` that is not an array (400 naming it). So that answer means yes, and
 * nothing runs on the server. Never throws: a refusal is `no`, any other failure `unknown`
 * (asked again at the next check).
 */
export async function probeInfill(ask: (path: string, body: unknown) => Promise<unknown>): Promise<InfillSupport> {
  try {
    await ask(INFILL_ROUTE, { input_prefix: '', input_suffix: '', input_extra: 'not an array: a probe' });
    return { state: 'yes' };
  } catch (e) {
    if (!(e instanceof RemoteError)) return { state: 'unknown', reason: `the /infill probe failed (${(e as Error).message})` };
    if (e.httpStatus === 400 && /input_extra/.test(e.serverMessage ?? '')) return { state: 'yes' };
    const refusal = infillRefusal(e);
    if (refusal) return { state: 'no', reason: refusal };
    return { state: 'unknown', reason: `the /infill probe failed (${e.message})` };
  }
}

/** Which route serves completions, and why (the status and the log say it). */
export function chooseRoute(setting: RemoteRoute, server: RemoteServerKind | undefined, verdict: PromptVerdict, infill: InfillSupport): RouteChoice {
  if (setting === 'completions') return { route: 'completions', reason: 'k3.completions.remote.route is completions' };
  if (infill.state === 'no') {
    return { route: 'completions', reason: `${setting === 'infill' ? 'k3.completions.remote.route is infill, but ' : ''}the server refused /infill: ${infill.reason}` };
  }
  if (setting === 'infill') return { route: 'infill', reason: 'k3.completions.remote.route is infill' };
  if (server !== 'llama-server') return { route: 'completions', reason: `auto: /infill is llama-server's, and this server is ${server ?? 'not known'}` };
  if (verdict.prompts === 'ids') {
    return { route: 'completions', reason: "auto: the local tokenizer is the server's, so /v1/completions gets our own layout as token ids" };
  }
  if (infill.state === 'unknown') return { route: 'completions', reason: `auto: /infill has not answered yet (${infill.reason})` };
  return { route: 'infill', reason: `auto: llama-server answers /infill with the model's own FIM tokens, and prompts would go as text (${verdict.reason})` };
}

/** The text after the cursor: the rest of its line and at most FIM_SUFFIX_LINES lines
 * below, in at most FIM_SUFFIX_TOKENS tokens (whole lines dropped from the end until it
 * fits, the first line alone cut), as layout.ts's FIM suffix. */
export function infillSuffix(enc: Encoder, lineSuffix: string, below: readonly string[]): string {
  let lines = [lineSuffix, ...below.slice(0, FIM_SUFFIX_LINES)];
  while (lines.length > 1 && enc.encode(lines.join('\n'), false).length > FIM_SUFFIX_TOKENS) lines = lines.slice(0, -1);
  const text = lines.join('\n');
  return enc.encode(text, false).length > FIM_SUFFIX_TOKENS ? Array.from(text).slice(0, FIM_SUFFIX_TOKENS * CHARS_PER_TOKEN).join('') : text;
}

interface InfillChunk {
  content?: unknown;
  stop?: unknown;
  tokens_predicted?: unknown;
  tokens_evaluated?: unknown;
  timings?: { cache_n?: unknown; prompt_n?: unknown; predicted_n?: unknown } | null;
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);

export function remoteInfillBackend(remote: RemoteBackend): CompletionBackend {
  // Budgets only: the server tokenizes. The local tokenizer where it is the server's.
  const encoder: Encoder = remote.tokenizer ?? new TextEstimate();
  const reserve = FIM_SUFFIX_TOKENS + INFILL_OVERHEAD_TOKENS;
  return {
    encoder,
    heals: false,
    fingerprint: `remote infill ${remote.where} ${remote.model ?? ''}`,
    maxContext: remote.maxContext === Number.MAX_SAFE_INTEGER ? remote.maxContext : Math.max(0, remote.maxContext - reserve),
    async run(job, request, stats) {
      const { layout } = request;
      const stream = new CompletionStream(job, request);
      const body = {
        input_extra: layout.chunks.map((c) => ({ filename: c.path, text: c.text })),
        input_prefix: layout.fileText,
        prompt: layout.linePrefix,
        input_suffix: infillSuffix(encoder, layout.lineSuffix, layout.nextLines),
        n_predict: request.maxTokens,
        temperature: 0,
        cache_prompt: true,
        stream: true,
      };
      let end: 'done' | 'stopped';
      try {
        end = await remote.stream(
          job,
          INFILL_ROUTE,
          body,
          COMPLETION_DEADLINE_TIMEOUTS,
          (data) => {
            const chunk = data as InfillChunk;
            const close = stream.take(chunk.content);
            const evaluated = count(chunk.tokens_evaluated);
            if (evaluated !== undefined) stats.promptTokens = evaluated;
            const generated = count(chunk.tokens_predicted) ?? count(chunk.timings?.predicted_n);
            if (generated !== undefined) stats.generatedTokens = generated;
            const cached = count(chunk.timings?.cache_n);
            const prefilled = count(chunk.timings?.prompt_n);
            if (cached !== undefined) stats.reusedTokens = cached;
            if (prefilled !== undefined) stats.prefilledTokens = prefilled;
            // The last event says stop: llama-server sends no [DONE] on this route.
            if (chunk.stop === true) return 'close';
            return close;
          },
          (e) => {
            const refusal = infillRefusal(e);
            if (refusal === undefined) return undefined;
            remote.refuseInfill(refusal);
            return new InfillRefused(refusal);
          },
        );
      } catch (e) {
        if (!(e instanceof InfillRefused)) throw e;
        // Refused for good: this request, and the next ones, go to /v1/completions.
        return remoteCompletionBackend(remote, encoder).run(job, request, stats);
      }
      stream.finish(end, stats, (m) => remote.log(m));
    },
  };
}
