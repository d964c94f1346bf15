// completion.ts - completions through a remote server's /v1/completions: the prompt the
// completion service laid out (the same stable-first layout as the local engine) goes as
// token ids when the model's tokenizer is known here, so the server reads exactly the ids
// the local engine would and can reuse its prefix cache, with `k3_checkpoints` naming the
// layout's stable boundaries for `k3 serve` (other servers ignore the field), and `k3_heal`
// the healed end of the cursor's line (k3 serve only: token healing, docs/PROMPTS.md);
// without a tokenizer it goes as text, its budgets estimated at CHARS_PER_TOKEN characters a
// token.
// Greedy (temperature 0), streamed; job.stop() and job.cancel() close the stream, which
// ends generation on the server; so does a reply past its budget or its deadline (budget.ts).
import type { CompletionBackend } from '../completion/backend';
import type { Encoder } from '../completion/layout';
import type { RemoteBackend } from './backend';
import { COMPLETION_DEADLINE_TIMEOUTS } from './budget';
import { CompletionStream } from './completion-stream';
import { remoteWarm } from './warmup';

/** Characters a token is assumed to hold when no tokenizer is known (code averages more). */
export const CHARS_PER_TOKEN = 3;

/**
 * An Encoder for budgets without the model's tokenizer: text is cut into pieces of up to
 * CHARS_PER_TOKEN characters, each piece an id in this estimate's table, so the laid-out ids
 * decode back to exactly the laid-out text. One estimate per prompt.
 */
export class TextEstimate implements Encoder {
  private readonly pieces: string[] = [];
  private readonly ids = new Map<string, number>();

  encode(text: string): Int32Array {
    const chars = Array.from(text);
    const out = new Int32Array(Math.ceil(chars.length / CHARS_PER_TOKEN));
    for (let i = 0, k = 0; i < chars.length; i += CHARS_PER_TOKEN, k++) {
      const piece = chars.slice(i, i + CHARS_PER_TOKEN).join('');
      let id = this.ids.get(piece);
      if (id === undefined) {
        id = this.pieces.length;
        this.pieces.push(piece);
        this.ids.set(piece, id);
      }
      out[k] = id;
    }
    return out;
  }

  decode(ids: readonly number[]): string {
    return ids.map((id) => this.pieces[id]).join('');
  }
}

interface CompletionChunk {
  choices?: Array<{ text?: unknown; finish_reason?: unknown }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null };
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);

/** `laidOutWith`: the encoder a layout was already made with (a request /infill refused
 * comes here with its layout): its ids are decoded by the same estimate, or sent as ids
 * when it is the tokenizer. */
export function remoteCompletionBackend(remote: RemoteBackend, laidOutWith?: Encoder): CompletionBackend {
  const tokenizer: Encoder | undefined = laidOutWith ? (laidOutWith instanceof TextEstimate ? undefined : laidOutWith) : remote.tokenizer;
  const estimate = tokenizer ? undefined : laidOutWith instanceof TextEstimate ? laidOutWith : new TextEstimate();
  return {
    encoder: tokenizer ?? (estimate as TextEstimate),
    heals: remote.heals,
    fingerprint: `remote ${remote.where} ${remote.model ?? ''} ${tokenizer ? 'ids' : 'text'}`,
    maxContext: remote.maxContext,
    warm: (job, layout) => remoteWarm(remote, job, layout, estimate),
    async run(job, request, stats) {
      const { layout } = request;
      const prompt = estimate ? estimate.decode(layout.ids) : layout.ids;
      const checkpoints = [layout.contextEnd, layout.stableEnd].filter((b) => b > 0 && b < layout.ids.length);
      const stream = new CompletionStream(job, request);
      const end = await remote.stream(
        job,
        'completions',
        {
          prompt,
          max_tokens: request.maxTokens,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true, continuous_usage_stats: true },
          ...(estimate ? {} : { k3_checkpoints: [...new Set(checkpoints)] }),
          // k3 serve spells the healed text first and leaves it out of the answer.
          ...(layout.heal ? { k3_heal: layout.heal } : {}),
        },
        COMPLETION_DEADLINE_TIMEOUTS,
        (data) => {
          const chunk = data as CompletionChunk;
          const close = stream.take(chunk.choices?.[0]?.text);
          const u = chunk.usage;
          if (u) {
            const promptTokens = count(u.prompt_tokens);
            const cached = count(u.prompt_tokens_details?.cached_tokens) ?? 0;
            if (promptTokens !== undefined) {
              stats.promptTokens = promptTokens;
              stats.reusedTokens = Math.min(cached, promptTokens);
              stats.prefilledTokens = promptTokens - stats.reusedTokens;
            }
            const generated = count(u.completion_tokens);
            if (generated !== undefined) stats.generatedTokens = generated;
          }
          return close;
        },
      );
      stream.finish(end, stats, (m) => remote.log(m));
    },
  };
}
