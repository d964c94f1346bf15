// backend.ts - the seam between the completion service and what runs a completion prompt:
// the local engine (prefill with checkpoints at the layout's stable boundaries, then
// greedy generation in scheduler slices, drafting from the text after the cursor), or a
// remote OpenAI-compatible server (server/remote/completion.ts). The service lays out the
// prompt with the backend's encoder, keeps the cache and post-processes the text; a
// backend only turns a laid-out prompt into generated text, filling the request's numbers.
import type { LoadedEngine } from '../engine/host';
import type { CompletionStats } from '../../protocol/lsp';
import type { Job } from '../scheduler';
import { type Encoder, FIM_NAMES, type FimTokens, type Layout } from './layout';

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
  /** True when run() honours layout.heal (token healing); the layout heals only then. */
  readonly heals: boolean;
  /** The model's fill-in-the-middle tokens, when its tokenizer names them. */
  readonly fim?: FimTokens;
  /** Runs the prompt for `job`, filling stats (reused, prefilled, generated, drafted,
   * accepted tokens, times) as it goes. Resolves when generation ends (a stop id, the token
   * limit, or job.stop()); rejects with Cancelled, or a failure errors.ts can classify. */
  run(job: Job, request: CompletionRequest, stats: CompletionStats): Promise<void>;
  /** Runs the prompt only, so a later run() of a prompt that shares its prefix reuses it
   * (warmup.ts): the local engine prefills it with checkpoints at the layout's boundaries, a
   * remote server fills its prefix cache. Resolves with the tokens reused and computed.
   * Absent: the backend is not warmed (llama-server's /infill route, whose prompt the
   * server lays out: not yet). */
  warm?(job: Job, layout: Layout): Promise<WarmResult>;
}

export interface WarmResult {
  reused: number;
  prefilled: number;
}

/** Where the local engine checkpoints a completion prompt: each stable boundary, and its end. */
function checkpointsOf(layout: Layout): number[] {
  return [layout.contextEnd, layout.suffixEnd, layout.stableEnd, layout.ids.length];
}

/** The local engine's completion session as a CompletionBackend. */
export function localCompletionBackend(engine: LoadedEngine): CompletionBackend {
  const es = engine.completion;
  if (!es) throw new Error(`the model at ${engine.modelPath} was loaded for chat only; it has no completion session`);
  return {
    encoder: engine.tokenizer,
    fingerprint: engine.fingerprint,
    maxContext: es.maxContext,
    heals: true,
    fim: fimTokens(engine.tokenizer),
    async warm(job, layout) {
      const r = await es.prefill(job, layout.ids, checkpointsOf(layout));
      return { reused: r.reused, prefilled: r.prefilled };
    },
    async run(job, request, stats) {
      const { layout } = request;
      const prefill = await es.prefill(job, layout.ids, checkpointsOf(layout));
      stats.reusedTokens = prefill.reused;
      stats.prefilledTokens = prefill.prefilled;
      stats.prefillMs = prefill.ms;
      const stopIds = engine.tokenizer.stopIds();
      const stops = new Set(stopIds);
      const stream = engine.tokenizer.stream();
      const healed = new HealedText(layout.heal);
      const gen = await es.generate(job, layout.ids, {
        maxTokens: request.maxTokens,
        // The healed piece is spelled again, so the text after the cursor still works as
        // drafting material; the tokens must add up to the bytes for the constraint.
        specMax: request.specMax,
        stopIds,
        contextIds: layout.draftIds,
        heal: layout.heal ? { bytes: Buffer.from(layout.heal, 'utf8'), tokenizer: engine.tokenizer } : undefined,
        onTokens: (ids) => {
          let text = '';
          for (const id of ids) if (!stops.has(id)) text += stream.push(id);
          request.onText(healed.strip(text));
        },
      });
      request.onText(healed.strip(stream.end()));
      stats.healedTokens = gen.healed;
      stats.generatedTokens = gen.ids.length;
      stats.draftedTokens = gen.drafted;
      stats.acceptedTokens = gen.accepted;
      stats.generateMs = gen.ms;
    },
  };
}

/** The FIM tokens a tokenizer names, or undefined unless it names all three. */
export function fimTokens(tok: { specialId(name: string): number | undefined }): FimTokens | undefined {
  const prefix = tok.specialId(FIM_NAMES.prefix);
  const suffix = tok.specialId(FIM_NAMES.suffix);
  const middle = tok.specialId(FIM_NAMES.middle);
  return prefix !== undefined && suffix !== undefined && middle !== undefined ? { prefix, suffix, middle } : undefined;
}

/** Drops the healed text from the front of the generated text: the engine spells it again
 * (the user already typed it), and what follows is the completion at the cursor. */
export class HealedText {
  constructor(private left: string) {}

  strip(text: string): string {
    if (this.left === '') return text;
    const n = Math.min(this.left.length, text.length);
    if (text.slice(0, n) !== this.left.slice(0, n)) {
      throw new Error(`token healing: the engine wrote ${JSON.stringify(text.slice(0, n))} where the prompt had ${JSON.stringify(this.left.slice(0, n))}`);
    }
    this.left = this.left.slice(n);
    return text.slice(n);
  }
}
