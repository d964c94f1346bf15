// backend.ts - the seam between the completion service and what runs a completion prompt:
// the local engine (prefill with checkpoints at the layout's stable boundaries, then
// greedy generation in scheduler slices, drafting from the text after the cursor), or a
// remote OpenAI-compatible server (server/remote/completion.ts). The service lays out the
// prompt with the backend's encoder, keeps the cache and post-processes the text; a
// backend only turns a laid-out prompt into generated text, filling the request's numbers.
import type { LoadedEngine } from '../engine/host';
import type { CompletionStats } from '../protocol';
import type { Job } from '../scheduler';
import type { Encoder, Layout } from './layout';

export interface CompletionRequest {
  layout: Layout;
  maxTokens: number;
  /** Draft up to this many tokens per forward pass (the local engine only). */
  specMax: number;
  /** The generated text grew by `text` (stop ids excluded); may call job.stop() to end it. */
  onText(text: string): void;
}

export interface CompletionBackend {
  /** Encodes the layout's parts (the model's tokenizer, or an estimate of it). */
  readonly encoder: Encoder;
  /** Identifies the model in cache keys. */
  readonly fingerprint: string;
  /** Positions a prompt and its generation may take together. */
  readonly maxContext: number;
  /** Runs the prompt for `job`, filling stats (reused, prefilled, generated, drafted,
   * accepted tokens, times) as it goes. Resolves when generation ends (a stop id, the token
   * limit, or job.stop()); rejects with Cancelled, or a failure errors.ts can classify. */
  run(job: Job, request: CompletionRequest, stats: CompletionStats): Promise<void>;
}

/** The local engine's completion session as a CompletionBackend. */
export function localCompletionBackend(engine: LoadedEngine): CompletionBackend {
  return {
    encoder: engine.tokenizer,
    fingerprint: engine.fingerprint,
    maxContext: engine.completion.maxContext,
    async run(job, request, stats) {
      const { layout } = request;
      const es = engine.completion;
      const prefill = await es.prefill(job, layout.ids, [layout.contextEnd, layout.stableEnd, layout.ids.length]);
      stats.reusedTokens = prefill.reused;
      stats.prefilledTokens = prefill.prefilled;
      stats.prefillMs = prefill.ms;
      const stops = new Set(engine.renderer.stopIds);
      const stream = engine.tokenizer.stream();
      const gen = await es.generate(job, layout.ids, {
        maxTokens: request.maxTokens,
        specMax: request.specMax,
        stopIds: engine.renderer.stopIds,
        contextIds: layout.draftIds,
        onTokens: (ids) => {
          let text = '';
          for (const id of ids) if (!stops.has(id)) text += stream.push(id);
          request.onText(text);
        },
      });
      request.onText(stream.end());
      stats.generatedTokens = gen.ids.length;
      stats.draftedTokens = gen.drafted;
      stats.acceptedTokens = gen.accepted;
      stats.generateMs = gen.ms;
    },
  };
}
