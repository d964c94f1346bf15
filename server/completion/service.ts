// service.ts - textDocument/inlineCompletion: cache first (type-through), else lay out the
// prompt (layout.ts) and hand it to the backend (backend.ts: the local engine prefills it
// with checkpoints at its stable boundaries and generates greedily with the text after the
// cursor and the extra context as drafting material; or a remote server), stop as soon as
// post-processing says more text cannot matter, and remember the result.
// A new request cancels the previous one (cancel-previous); $/cancelRequest cancels in the
// engine. A request that arrives while the model loads waits for the load (at most
// LOAD_WAIT_MS, cancellable, superseded by a newer request) instead of answering nothing,
// so the first keystrokes after a window opens are not wasted. The prompt carries snippets
// of the other open documents that share the most identifiers with the lines above the
// cursor (snippets.ts, snippetIndex.ts). Each request's numbers (reused, prefilled,
// generated tokens, snippets and their cost) go to the status.
import * as crypto from 'node:crypto';
import type { CancellationToken, InlineCompletionList, InlineCompletionParams } from 'vscode-languageserver';
import type { Documents } from '../documents';
import type { EngineHost } from '../engine/host';
import { Cancelled, engineFailure, invalidRequest } from '../errors';
import type { CompletionSettings, CompletionStats, ContextDefinition, ServerSettings } from '../../protocol/lsp';
import type { RemoteBackend } from '../remote/backend';
import { Job, type Scheduler } from '../scheduler';
import type { StatusReporter } from '../status';
import { type CompletionBackend, localCompletionBackend } from './backend';
import { CompletionCache } from './cache';
import type { ContextRing } from './context';
import { type ContextChunk, type Layout, layoutPrompt, splitLines } from './layout';
import { maxLineLength, nonAsciiShare } from './filters';
import { postprocess, type PostprocessInput, type PostprocessResult } from './postprocess';
import { mergeClosers } from './range';
import { SnippetIndex } from './snippetIndex';
import { Warmup } from './warmup';

/** A file whose nearby text has fewer characters outside ASCII than this is "ASCII": a
 * completion made mostly of others there is not code (filters.ts, non-code). */
const ASCII_FILE_SHARE = 0.02;

/** Documents whose definitions from the editor are kept. */
const DEFINITION_DOCUMENTS = 16;

/** Longest a completion waits for a model that is loading before it answers nothing. */
export const LOAD_WAIT_MS = 60_000;

/** Positions the completion session may reach beyond the prompt budget and generation. */
export const COMPLETION_MARGIN = 64;

/** The positions the completion session is opened with at load: the prompt budget, the
 * generation and the margin. A budget set later cannot use more (provide() clamps it). */
export function completionContext(settings: CompletionSettings): number {
  return settings.maxPromptTokens + settings.maxTokens + COMPLETION_MARGIN;
}

/** What the completion service uses of the server that holds it (ServerCtx implements it).
 * Read on every request: the settings, the backend and the loaded model change. */
export interface CompletionServiceHost {
  readonly settings: ServerSettings;
  readonly documents: Pick<Documents, 'get' | 'all'>;
  readonly ring: Pick<ContextRing, 'snapshot' | 'displayPath' | 'id'>;
  readonly scheduler: Pick<Scheduler, 'run' | 'promote'>;
  readonly host: Pick<EngineHost, 'phase' | 'loaded' | 'whenLoadEnds'>;
  /** The completions role's remote server; undefined: the local engine serves it. */
  readonly completionRemote: Pick<RemoteBackend, 'completionBackend'> | undefined;
  /** Where each request's numbers go. */
  readonly status: Pick<StatusReporter, 'lastCompletion' | 'warmup' | 'changed'>;
  debug(message: string): void;
  log(message: string): void;
}

/** A completion laid out and ready to run (CompletionService.prepare). */
export interface Prepared {
  backend: CompletionBackend;
  layout: Layout;
  /** The cache key but the text before the cursor, and that text. */
  base: string;
  before: string;
  ppInput: PostprocessInput;
  snippetCount: number;
  definitionCount: number;
  contextMs: number;
  /** What the editor is sent for a post-processed result. */
  item(result: PostprocessResult): InlineCompletionList;
}

export class CompletionService {
  private current: Job | undefined;
  /** Counts requests: a request still waiting for the load when a newer one came is superseded. */
  private seq = 0;
  readonly cache = new CompletionCache();
  private readonly snippetIndex: SnippetIndex;
  /** The latest definitions the editor sent per document (k3/context/definitions). */
  private readonly definitionsOf = new Map<string, ContextChunk[]>();

  /** Prompt-only prefills on context changes and suggestions computed after an accept. */
  readonly warmup: Warmup;

  constructor(private readonly ctx: CompletionServiceHost) {
    this.warmup = new Warmup(this, ctx);
    this.snippetIndex = new SnippetIndex(() => ctx.documents.all(), (uri) => ctx.ring.displayPath(uri));
  }

  /** k3/context/definitions: the definitions near the cursor in `uri`, kept for its next
   * completions (the latest DEFINITION_DOCUMENTS documents). Malformed params are refused
   * with a log line: the shape is the protocol's, nothing is guessed. */
  definitions(params: unknown): void {
    const p = params as { uri?: unknown; definitions?: unknown } | null;
    const ok = (d: unknown): d is ContextDefinition => {
      const x = d as Record<string, unknown> | null;
      return !!x && typeof x.uri === 'string' && typeof x.languageId === 'string' && typeof x.text === 'string' && Number.isInteger(x.line);
    };
    if (typeof p?.uri !== 'string' || !Array.isArray(p.definitions) || !p.definitions.every(ok)) {
      this.ctx.log('k3/context/definitions refused: it needs { uri, version, definitions: [{ uri, languageId, line, text }] }');
      return;
    }
    const chunks = p.definitions.map((d) => ({ key: `definition:${d.uri}#${d.line}`, path: this.ctx.ring.displayPath(d.uri), languageId: d.languageId, text: d.text }));
    this.definitionsOf.delete(p.uri);
    this.definitionsOf.set(p.uri, chunks);
    for (const uri of this.definitionsOf.keys()) if (this.definitionsOf.size > DEFINITION_DOCUMENTS) this.definitionsOf.delete(uri);
  }

  /** Stops the request in flight and any warm-up (settings changed, model replaced). */
  cancel(): void {
    this.current?.cancel('superseded');
    this.warmup.cancel();
  }

  async provide(params: InlineCompletionParams, token: CancellationToken): Promise<InlineCompletionList> {
    const t0 = Date.now();
    const uri = params?.textDocument?.uri;
    const pos = params?.position;
    if (typeof uri !== 'string' || !pos || !Number.isInteger(pos.line) || !Number.isInteger(pos.character)) {
      throw invalidRequest('textDocument/inlineCompletion needs textDocument.uri and an integer position');
    }
    const seq = ++this.seq;
    if (!this.backend() && !this.ctx.completionRemote && this.ctx.host.phase === 'loading') {
      await this.waitForLoad(token);
      if (seq !== this.seq) throw new Cancelled('superseded');
    }
    const p = this.prepare(uri, pos, t0);
    // Nothing to complete: an empty list, not an error (the status says why).
    if (!p) return { items: [] };

    // The suggestion computed ahead for this very text (after an accept) is joined, not
    // cancelled: it becomes this request's work.
    const ahead = this.warmup.join(p.base, p.before);
    if (ahead) {
      await ahead.catch(() => undefined);
      if (seq !== this.seq) throw new Cancelled('superseded');
    }
    if (token.isCancellationRequested) throw new Cancelled('cancelled');

    const cached = this.cache.get(p.base, p.before);
    if (cached !== undefined) {
      this.current?.cancel('superseded');
      // Shaped when it was computed: the rest of a block accepted in part is still that block,
      // though the lines left would not open one where the cursor is now.
      const result: PostprocessResult = { text: cached, final: true };
      this.record({ ...emptyStats('cache'), snippets: p.snippetCount, definitions: p.definitionCount, contextMs: p.contextMs, promptTokens: p.layout.ids.length, reusedTokens: p.layout.ids.length, totalMs: Date.now() - t0 });
      this.warmup.answeredFromCache(p.base, p.before, ahead !== undefined);
      const list = p.item(result);
      this.explain('cache', p.layout.heal, cached, result, list);
      return list;
    }

    // A suggestion computed ahead for other text is of no use now.
    this.warmup.supersede();
    this.current?.cancel('superseded');
    const job = new Job('completion');
    this.current = job;
    const onCancel = token.onCancellationRequested(() => job.cancel('cancelled'));
    const stats = emptyStats('engine');
    try {
      const { raw, result } = await this.compute(p, job, stats, t0);
      this.record(stats);
      const list = p.item(result);
      this.explain('engine', p.layout.heal, raw, result, list);
      return list;
    } catch (e) {
      this.record(stats);
      throw e;
    } finally {
      onCancel.dispose();
      if (this.current === job) this.current = undefined;
    }
  }

  /** Lays out the prompt a completion at `pos` in `uri` would use, with all a request needs
   * around it; undefined when there is no such document or nothing runs completions. The
   * warm-ups (warmup.ts) use it too, so what they prefill is exactly the request's prefix. */
  prepare(uri: string, pos: { line: number; character: number }, t0: number): Prepared | undefined {
    const doc = this.ctx.documents.get(uri);
    if (doc && (pos.line < 0 || pos.line >= doc.lineCount || pos.character < 0)) {
      throw invalidRequest(`textDocument/inlineCompletion: position ${pos.line}:${pos.character} is outside ${uri}, which has ${doc.lineCount} lines`);
    }
    const backend = this.backend();
    if (!doc || !backend) return undefined;
    const settings = this.ctx.settings.completions;
    const offset = doc.offsetAt(pos);
    // A character past the end of its line means the end of the line (LSP 3.17, Position).
    const at = doc.positionAt(offset);
    const chunks = this.ctx.ring.snapshot(uri, t0);
    const c0 = performance.now();
    const snippets = this.snippetIndex.snippets({
      target: uri,
      line: at.line,
      textAbove: doc.getText({ start: { line: 0, character: 0 }, end: { line: at.line, character: 0 } }),
      budget: settings.snippetTokens,
      tokens: (text) => backend.encoder.encode(text, false).length,
      now: t0,
      definitions: this.definitionsOf.get(uri),
    });
    // Synchronous and cached (milliseconds on a first ranking, nothing after): a cancel finds
    // the request in the engine, which stops within a forward pass.
    const contextMs = performance.now() - c0;
    const layout = layoutPrompt(backend.encoder, {
      path: this.ctx.ring.displayPath(uri),
      languageId: doc.languageId,
      text: doc.getText(),
      offset,
      chunks,
      snippets,
      // The session was sized at load; a larger budget set since cannot use more.
      maxPromptTokens: Math.max(
        COMPLETION_MARGIN,
        Math.min(settings.maxPromptTokens, backend.maxContext - settings.maxTokens - COMPLETION_MARGIN),
      ),
      maxContextTokens: settings.maxContextTokens,
      heal: backend.heals && settings.heal,
      fim: settings.fim ? backend.fim : undefined,
    });
    const snippetCount = layout.chunkKeys.filter((k) => k.startsWith('snippet:') || k.startsWith('definition:')).length;
    const definitionCount = layout.chunkKeys.filter((k) => k.startsWith('definition:')).length;
    const fileLines = splitLines(layout.fileText);
    const ppInput: PostprocessInput = {
      linePrefix: layout.linePrefix,
      lineSuffix: layout.lineSuffix,
      nextLines: layout.nextLines,
      languageId: doc.languageId,
      multiline: settings.multiline,
      maxLines: settings.maxLines,
      lineAbove: [...fileLines].reverse().find((l) => l.trim() !== '') ?? '',
      maxLineLength: maxLineLength([...fileLines, layout.linePrefix + layout.lineSuffix, ...layout.nextLines]),
      asciiFile: nonAsciiShare(layout.fileText + layout.nextLines.join('\n')) < ASCII_FILE_SHARE,
      filter: settings.filter,
    };
    // The cache's key: all the completion depends on but the text before the cursor, which
    // entries remember, so a suggestion accepted in part serves its rest (cache.ts). The
    // warm-up setting is left out: it changes when work is done, never its result.
    const base = crypto
      .createHash('sha1')
      .update(JSON.stringify([backend.fingerprint, layout.chunkKeys, snippets.map((s) => s.text), this.ctx.ring.id, layout.lineSuffix, layout.nextLines, { ...settings, warmup: undefined }]))
      .digest('hex');
    // What is shown: the post-processed text, merged with closers after the cursor, at the
    // cursor (clamped to the end of its line, as LSP says).
    const item = (result: PostprocessResult): InlineCompletionList => {
      if (!result.text) return { items: [] };
      const m = mergeClosers(result.text, layout.linePrefix, layout.lineSuffix);
      const end = m.coversSuffix ? { line: at.line, character: at.character + layout.lineSuffix.length } : at;
      return { items: [{ insertText: m.insertText, range: { start: at, end } }] };
    };
    return { backend, layout, base, before: layout.fileText + layout.linePrefix, ppInput, snippetCount, definitionCount, contextMs, item };
  }

  /** Runs a prepared completion as `job` (a user request, or one computed ahead), fills
   * `stats` (its outcome too, also when it throws) and remembers a result that is not junk.
   * Rejects with Cancelled ('superseded' or 'cancelled') or the classified failure. */
  async compute(p: Prepared, job: Job, stats: CompletionStats, t0: number): Promise<{ raw: string; result: PostprocessResult }> {
    const settings = this.ctx.settings.completions;
    const { backend, layout, ppInput } = p;
    stats.promptTokens = layout.ids.length;
    if (layout.heal) stats.healedText = layout.heal;
    stats.layout = layout.fim ? 'fim' : 'plain';
    stats.snippets = p.snippetCount;
    stats.definitions = p.definitionCount;
    stats.contextMs = p.contextMs;
    let raw = '';
    try {
      const result = await this.ctx.scheduler.run(job, async () => {
        await backend.run(
          job,
          {
            layout,
            maxTokens: settings.maxTokens,
            specMax: this.ctx.settings.engine.speculation,
            onText: (t) => {
              raw += t;
              if (postprocess(raw, ppInput).final) job.stop();
            },
          },
          stats,
        );
        return postprocess(raw, ppInput);
      });
      stats.outcome = 'done';
      stats.totalMs = Date.now() - t0;
      if (result.note) stats.filtered = { rule: result.note.rule, action: result.note.action };
      // Junk is not remembered: the next keystroke asks the model again.
      if (result.text && !result.note) this.cache.put(p.base, p.before, result.text);
      return { raw, result };
    } catch (e) {
      const f = engineFailure(e);
      stats.totalMs = Date.now() - t0;
      stats.generatedTokens = job.stage === 'generate' ? job.tokens : 0;
      if (f instanceof Cancelled) {
        stats.outcome = (job.cancelReason ?? f.reason) === 'superseded' ? 'superseded' : 'cancelled';
        if (job.tokensAtCancel !== undefined && job.stage === 'generate') stats.tokensAfterCancel = job.tokens - job.tokensAtCancel;
        throw new Cancelled(stats.outcome === 'superseded' ? 'superseded' : 'cancelled');
      }
      stats.outcome = 'failed';
      throw f;
    }
  }

  /** Resolves when the load ends or LOAD_WAIT_MS passes; rejects with Cancelled when the
   * request is cancelled first. */
  private waitForLoad(token: CancellationToken): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(finish, LOAD_WAIT_MS);
      const onCancel = token.onCancellationRequested(() => finish(new Cancelled()));
      function finish(e?: Cancelled): void {
        clearTimeout(timer);
        onCancel.dispose();
        if (e) reject(e);
        else resolve();
      }
      if (token.isCancellationRequested) finish(new Cancelled());
      else void this.ctx.host.whenLoadEnds().then(() => finish());
    });
  }

  /** What runs completions now: the remote server, or the loaded local engine (none while
   * it loads). */
  private backend(): CompletionBackend | undefined {
    if (this.ctx.completionRemote) return this.ctx.completionRemote.completionBackend();
    return this.ctx.host.loaded ? localCompletionBackend(this.ctx.host.loaded) : undefined;
  }

  /** The debug-level account of one completion (K3: Show Logs with the level at Debug):
   * what was healed, what the model wrote, what the filter did and why, what is shown. */
  private explain(source: string, heal: string, raw: string, result: PostprocessResult, list: InlineCompletionList): void {
    const shown = list.items[0];
    const range = shown?.range && (shown.range.end.character !== shown.range.start.character ? `, replacing ${shown.range.end.character - shown.range.start.character} characters after the cursor` : '');
    this.ctx.debug(
      `completion (${source}): healed ${JSON.stringify(heal)}; model wrote ${JSON.stringify(clip(raw))}` +
        (result.note ? `; filter ${result.note.rule} ${result.note.action} it: ${result.note.detail}` : '; filter: nothing to do') +
        `; shown ${shown ? JSON.stringify(clip(typeof shown.insertText === 'string' ? shown.insertText : shown.insertText.value)) : 'nothing'}${range ?? ''}`,
    );
  }

  /** Logs one completion's numbers and makes them the status's last completion. */
  record(stats: CompletionStats): void {
    this.ctx.status.lastCompletion = stats;
    this.ctx.log(
      `completion (${stats.source}, ${stats.outcome}): prompt ${stats.promptTokens} tokens, reused ${stats.reusedTokens}, ` +
        `prefilled ${stats.prefilledTokens}, generated ${stats.generatedTokens}` +
        (stats.snippets ? `, ${stats.snippets} snippets found in ${(stats.contextMs ?? 0).toFixed(1)} ms` : '') +
        (stats.healedText ? `, healed ${Buffer.byteLength(stats.healedText)} bytes in ${stats.healedTokens ?? 0} tokens` : '') +
        ` (prefill ${stats.prefillMs} ms, generation ${stats.generateMs} ms)` +
        (stats.tokensAfterCancel !== undefined ? `, ${stats.tokensAfterCancel} after the cancel` : '') +
        ` in ${stats.totalMs} ms`,
    );
    this.ctx.status.changed();
  }
}

export function emptyStats(source: CompletionStats['source']): CompletionStats {
  return {
    source,
    outcome: 'done',
    promptTokens: 0,
    reusedTokens: 0,
    prefilledTokens: 0,
    generatedTokens: 0,
    draftedTokens: 0,
    acceptedTokens: 0,
    prefillMs: 0,
    generateMs: 0,
    totalMs: 0,
  };
}

/** A long text cut for a log line. */
function clip(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
