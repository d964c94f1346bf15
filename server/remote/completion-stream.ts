// completion-stream.ts - what one streamed remote completion keeps, whichever route serves
// it (/v1/completions, completion.ts; llama-server's /infill, infill.ts): the reply budget
// (budget.ts), the time of the first piece, the pieces shown on the job, and the stats a
// stream leaves when it ends (prefill until the first piece, generation after it; the
// pieces themselves when the server sent no counts or the budget cut the reply). The routes
// read their own counts from their own chunk shapes.
import type { CompletionRequest } from '../completion/backend';
import type { CompletionStats } from '../../protocol/lsp';
import type { Job } from '../scheduler';
import { ReplyBudget } from './budget';

export class CompletionStream {
  private readonly t0 = Date.now();
  private first: number | undefined;
  private pieces = 0;
  private readonly budget: ReplyBudget;

  constructor(
    private readonly job: Job,
    private readonly request: CompletionRequest,
  ) {
    this.budget = new ReplyBudget(request.maxTokens);
    job.stage = 'prefill';
    job.tokens = 0;
  }

  /** A piece of text the server sent (anything else is ignored): what the budget holds goes
   * on to the request. Returns 'close' once the budget is spent (the stream is then closed). */
  take(sent: unknown): 'close' | undefined {
    const [text] = typeof sent === 'string' && sent !== '' ? this.budget.take(sent) : [''];
    if (text !== '') {
      if (this.first === undefined) {
        this.first = Date.now();
        this.job.stage = 'generate';
      }
      this.pieces++;
      this.job.tokens = this.pieces;
      this.request.onText(text);
    }
    return this.budget.exceeded === undefined ? undefined : 'close';
  }

  /** Fills the times and what the server's counts left out, once the stream ended
   * (`stopped`: closed by us before the server finished). */
  finish(end: 'done' | 'stopped', stats: CompletionStats, log: (message: string) => void): void {
    const { budget } = this;
    // A server that ignores the token limit: the completion is what the budget held.
    if (budget.exceeded !== undefined) log(`remote backend: a completion was cut: ${budget.exceeded}; the stream was closed after ${budget.pieces} pieces and ${budget.bytes} bytes`);
    const done = Date.now();
    stats.prefillMs = (this.first ?? done) - this.t0;
    stats.generateMs = this.first === undefined ? 0 : done - this.first;
    // Without counts (a stopped stream, or a server that does not send them): the pieces.
    if (budget.exceeded !== undefined) stats.generatedTokens = this.pieces;
    else if (end === 'stopped' || stats.generatedTokens === 0) stats.generatedTokens = Math.max(stats.generatedTokens, this.pieces);
    if (stats.prefilledTokens === 0 && stats.reusedTokens === 0) stats.prefilledTokens = stats.promptTokens;
  }
}
