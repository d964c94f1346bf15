// service.ts - chat turns and conversations. A turn plans what it sends (plan.ts: the kept
// turns, the oldest left out once the conversation outgrows the context, those a regenerate
// or an edit replaces gone; the new message with its attachments, cut by the stated rule),
// renders that (render.ts), resumes the engine from what the chat session holds or from the
// conversation's saved state (a file the engine wrote after the previous turn), prefills
// only what is new, streams the reply as k3/chat/didStream, closes the turn's structure
// if the reply was cut, decodes it to its end and saves the state, so the next turn, even
// after a restart, costs only its new message. History and state files go through
// state/store.ts. A saved state that cannot be used is set aside and the turn goes on from
// the history, saying so in its warnings; storage that cannot be written costs the
// history, never the reply (a warning says so). Reasoning stays reasoning only when the
// model closed it: a reply whose thinking never ended is shown as its answer. A model not
// trained for chat (k3-mini, a code completer; server/engine/modelInfo.ts) continues the
// message as plain text instead (no chat format, a short cap), labelled with its name, and
// shows only what passes ghost text's junk rules (completion/filters.ts). With a remote
// backend a turn goes to the remote server instead (server/remote/chat.ts) and is recorded
// the same way, without engine state.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CancellationToken, Connection } from 'vscode-languageserver';
import { EngineError } from '../engine/engine';
import { action, Cancelled, K3Failure, engineFailure, invalidRequest } from '../errors';
import {
  ChatStreamNotification,
  type ChatBudget,
  type ChatSendParams,
  type ChatSendResult,
  type ChatStopReason,
  type ChatTurnStats,
  type Conversation,
  type ConversationSummary,
  type K3Problem,
  type ServerSettings,
} from '../../protocol/lsp';
import { Job, type Scheduler } from '../scheduler';
import type { RemoteBackend } from '../remote/backend';
import { remoteTurn } from '../remote/chat';
import type { EngineHost, LoadedEngine } from '../engine/host';
import type { EngineSession, GenerateResult, PrefillResult } from '../engine/runner';
import type { StatusReporter } from '../status';
import type { SavedStateRef, StoredConversation, StoredMessage, WorkspaceStore } from '../state/store';
import { entryKind } from '../state/files';
import { ChatRenderer, type ChatTokenizer } from './render';
import { filterJunk, maxLineLength, nonAsciiShare, type FilterResult } from '../completion/filters';
import { checkAttachments, planTurn, remoteCounter, renderable, rendererCounter, type TurnCounter, type TurnPlan } from './plan';
import { userContent } from './budget';

/** Drafting material: the last this many tokens of the conversation. */
const DRAFT_WINDOW = 8192;
const TITLE_CHARS = 60;
/** Most tokens of a reply from a model not trained for chat: a glimpse of what it
 * continues, not 2,048 tokens of it. */
export const COMPLETION_MODEL_REPLY_TOKENS = 128;
/** A message with less than this share of characters outside ASCII is read as an ASCII file
 * by the junk filter's non-code rule. */
const ASCII_FILE_SHARE = 0.02;

/** What a turn generated, local or remote. */
export interface Reply {
  reasoning: string;
  content: string;
  stopReason: ChatStopReason;
}

/** A reply as the history keeps it, the one place an assistant message is made. Its
 * channels as shown: reasoning only when the model closed its thinking; a reply whose
 * thinking never ended (cut by the limit or a stop, or a model that never writes the
 * closing tag) is its answer. `ids`: the tokens the local engine decoded for it, which the
 * next turn renders instead of encoding the text again. */
export function assistantMessage(id: string, reply: Reply, thinkingClosed: boolean, ids?: number[]): StoredMessage {
  const shown = thinkingClosed || reply.content !== '' ? reply : { reasoning: '', content: reply.reasoning };
  return {
    id,
    role: 'assistant',
    content: shown.content,
    reasoning: shown.reasoning,
    createdAt: Date.now(),
    stopReason: reply.stopReason,
    ...(ids ? { ids } : {}),
  };
}

/** A local turn's numbers, from its prefill and generation. */
function turnStats(
  conversationId: string,
  resumedFrom: ChatTurnStats['resumedFrom'],
  promptTokens: number,
  prefill: PrefillResult,
  gen: GenerateResult,
): ChatTurnStats {
  return {
    conversationId,
    resumedFrom,
    promptTokens,
    reusedTokens: prefill.reused,
    prefilledTokens: prefill.prefilled,
    generatedTokens: gen.ids.length,
    draftedTokens: gen.drafted,
    acceptedTokens: gen.accepted,
    prefillMs: prefill.ms,
    generateMs: gen.ms,
    tokensPerSecond: gen.ms > 0 ? (gen.ids.length * 1000) / gen.ms : 0,
  };
}

function summary(c: StoredConversation): ConversationSummary {
  return {
    id: c.id,
    title: c.title,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    messageCount: c.messages.length,
    thinking: c.thinking,
    savedTokens: c.state?.tokens ?? 0,
  };
}

/** A reply's token limit: the one asked for, but short from a model not trained for chat. */
function replyLimit(requested: number, completionModel: boolean | undefined): number {
  return completionModel ? Math.min(requested, COMPLETION_MODEL_REPLY_TOKENS) : requested;
}

/** Records a turn: the kept messages, the new message and its reply. */
function keepTurn(conv: StoredConversation, plan: TurnPlan, assistant: StoredMessage): void {
  conv.messages = [...plan.kept, plan.userMessage, assistant];
  if (plan.notSent > 0) conv.notSent = plan.notSent;
  else delete conv.notSent;
  conv.updatedAt = Date.now();
}

function publicMessage(m: StoredMessage): Conversation['messages'][number] {
  const { ids: _ids, ...rest } = m;
  return rest;
}

/** k3/conversation/clear's params: `{ conversationId }` or `{ all: true }`, nothing else. */
function checkClearParams(p: unknown): { conversationId: string } | { all: true } {
  const usage = 'k3/conversation/clear needs { "conversationId": "<id>" } or { "all": true }';
  if (!p || typeof p !== 'object' || Array.isArray(p)) throw invalidRequest(`${usage}; got ${JSON.stringify(p) ?? 'nothing'}`);
  const v = p as Record<string, unknown>;
  const keys = Object.keys(v);
  if (keys.length === 1 && typeof v.conversationId === 'string' && v.conversationId !== '') return { conversationId: v.conversationId };
  if (keys.length === 1 && v.all === true) return { all: true };
  throw invalidRequest(`${usage}; got ${JSON.stringify(p)}`);
}

function checkSendParams(p: unknown): ChatSendParams {
  const v = p as Record<string, unknown> | null;
  if (!v || typeof v !== 'object') throw invalidRequest('k3/chat/send needs params { message, conversationId?, thinking?, maxTokens? }');
  if (typeof v.message !== 'string' || v.message.trim() === '') throw invalidRequest('k3/chat/send: message must be a non-empty string');
  if (v.conversationId !== undefined && typeof v.conversationId !== 'string') throw invalidRequest('k3/chat/send: conversationId must be a string');
  if (v.thinking !== undefined && typeof v.thinking !== 'boolean') throw invalidRequest('k3/chat/send: thinking must be a boolean');
  if (v.maxTokens !== undefined && !(Number.isInteger(v.maxTokens) && (v.maxTokens as number) > 0))
    throw invalidRequest('k3/chat/send: maxTokens must be a positive integer');
  if (v.replaceFrom !== undefined && (typeof v.replaceFrom !== 'string' || v.conversationId === undefined))
    throw invalidRequest('k3/chat/send: replaceFrom must be a message id of the conversation named by conversationId');
  return { ...(v as unknown as ChatSendParams), attachments: checkAttachments(v.attachments, 'k3/chat/send') };
}

/** What the chat service uses of the server that holds it (ServerCtx implements it). Read
 * on every turn: the settings, the store, the backend and the loaded model change. */
export interface ChatServiceHost {
  readonly settings: ServerSettings;
  readonly store: WorkspaceStore;
  readonly scheduler: Pick<Scheduler, 'run'>;
  /** The local engine that serves chat (the completions role's model, or chat's own);
   * `chatHeld` is the chat service's own bookkeeping, kept beside the sessions it describes
   * so that a load or an unload forgets it. */
  readonly chatHost: Pick<EngineHost, 'ready' | 'chatHeld'>;
  /** The chat role's remote server; undefined: the local engine serves it. */
  readonly chatRemote: RemoteBackend | undefined;
  /** Where each turn's numbers go. */
  readonly status: Pick<StatusReporter, 'lastChat' | 'changed'>;
  /** Streams the reply (k3/chat/didStream). */
  readonly connection: Pick<Connection, 'sendNotification'>;
  reportProblem(p: K3Problem): void;
  log(message: string): void;
}

export class ChatService {
  /** The turn answering in each conversation: its job, and whether generation has begun
   * (a stop before that cancels the turn; after it, it ends the reply). */
  private readonly active = new Map<string, { job: Job; generating: boolean }>();
  /** The chat format's renderer of each loaded model. */
  private readonly renderers = new WeakMap<LoadedEngine, ChatRenderer>();
  private readonly remoteRenderers = new WeakMap<object, ChatRenderer | undefined>();

  constructor(private readonly ctx: ChatServiceHost) {}

  /** The chat renderer of a remote model's tokenizer; undefined when it has not the chat
   * format's special tokens (then counts are estimated). */
  private remoteRenderer(tokenizer: ChatTokenizer & object): ChatRenderer | undefined {
    if (!this.remoteRenderers.has(tokenizer)) {
      let renderer: ChatRenderer | undefined;
      try {
        renderer = new ChatRenderer(tokenizer);
      } catch {
        renderer = undefined;
      }
      this.remoteRenderers.set(tokenizer, renderer);
    }
    return this.remoteRenderers.get(tokenizer);
  }

  /** The chat renderer of a loaded model, made on first use. ServerCtx asks for it as the
   * model loads, so a tokenizer without the chat format's special tokens fails the load. */
  renderer(engine: LoadedEngine): ChatRenderer {
    let renderer = this.renderers.get(engine);
    if (!renderer) {
      renderer = new ChatRenderer(engine.tokenizer);
      this.renderers.set(engine, renderer);
    }
    return renderer;
  }

  list(): ConversationSummary[] {
    return this.ctx.store.list().map(summary);
  }

  get(id: unknown): Conversation {
    if (typeof id !== 'string') throw invalidRequest('conversationId must be a string');
    const c = this.ctx.store.get(id);
    if (!c) throw new K3Failure('unknown-conversation', `No conversation has the id ${id}.`);
    return { ...summary(c), messages: c.messages.map(publicMessage), notSent: c.notSent ?? 0 };
  }

  /** Deletes one conversation, or all when asked explicitly; a reply in progress there is
   * cancelled first. Malformed params delete nothing. */
  async clear(raw: unknown): Promise<number> {
    const params = checkClearParams(raw);
    const ids = 'all' in params ? this.ctx.store.list().map((c) => c.id) : [params.conversationId];
    let removed = 0;
    for (const c of ids) {
      this.active.get(c)?.job.cancel();
      if (this.ctx.chatHost.chatHeld === c) this.ctx.chatHost.chatHeld = undefined;
      if (await this.ctx.store.delete(c)) removed++;
    }
    return removed;
  }

  /** Ends the reply being generated in a conversation. */
  stop(id: unknown): boolean {
    if (typeof id !== 'string') throw invalidRequest('k3/chat/stop: conversationId must be a string');
    const turn = this.active.get(id);
    if (!turn) return false;
    if (turn.generating) turn.job.stop();
    else turn.job.cancel();
    return true;
  }

  /** k3/chat/budget: how the turn would use the context, before it is sent. */
  budget(raw: unknown): ChatBudget {
    const v = raw as Record<string, unknown> | null;
    if (!v || typeof v !== 'object' || typeof v.message !== 'string')
      throw invalidRequest('k3/chat/budget needs params { message, conversationId?, attachments?, replaceFrom? }');
    if (v.conversationId !== undefined && typeof v.conversationId !== 'string') throw invalidRequest('k3/chat/budget: conversationId must be a string');
    if (v.replaceFrom !== undefined && typeof v.replaceFrom !== 'string') throw invalidRequest('k3/chat/budget: replaceFrom must be a string');
    const attachments = checkAttachments(v.attachments, 'k3/chat/budget');
    const conv = v.conversationId === undefined ? undefined : this.ctx.store.get(v.conversationId);
    if (v.conversationId !== undefined && !conv) throw new K3Failure('unknown-conversation', `No conversation has the id ${String(v.conversationId)}.`);
    const thinking = conv?.thinking ?? this.ctx.settings.chat.thinking;
    const engine = this.ctx.chatRemote ? undefined : this.ctx.chatHost.ready();
    const maxTokens = replyLimit(this.ctx.settings.chat.maxTokens, engine && !engine.info.chat);
    const plan = planTurn(conv, v.message, attachments, v.replaceFrom, maxTokens, this.counter(thinking), Date.now());
    return plan.budget;
  }

  /** How the backend that answers now counts a turn's tokens, and its context. */
  private counter(thinking: boolean): TurnCounter {
    const remote = this.ctx.chatRemote;
    if (remote) {
      // The smaller of the setting and the server's own context, when it says it.
      const context = Math.min(this.ctx.settings.chat.maxContext, remote.maxContext);
      // With the model's tokenizer the turn is counted as the K3 chat format renders it
      // (k3 serve renders it exactly so); without, estimated.
      const renderer = remote.tokenizer && this.remoteRenderer(remote.tokenizer);
      return renderer ? rendererCounter(renderer, context, thinking, 0) : remoteCounter(context, undefined);
    }
    const engine = this.ctx.chatHost.ready();
    return rendererCounter(this.renderer(engine), engine.chat.maxContext, thinking && engine.info.chat);
  }

  cancelAll(): void {
    for (const t of this.active.values()) t.job.cancel();
  }

  async send(raw: unknown, token: CancellationToken): Promise<ChatSendResult> {
    const params = checkSendParams(raw);
    const remote = this.ctx.chatRemote;
    const engine = remote ? undefined : this.ctx.chatHost.ready();
    // A model not trained for chat: no thinking, a short cap, replies labelled with its name.
    const completionModel = engine && !engine.info.chat ? engine.info.name : undefined;
    const { store, settings } = this.ctx;
    const now = Date.now();
    let conv: StoredConversation;
    if (params.conversationId !== undefined) {
      const found = store.get(params.conversationId);
      if (!found) throw new K3Failure('unknown-conversation', `No conversation has the id ${params.conversationId}.`);
      conv = found;
    } else {
      const firstLine = params.message.trim().split('\n')[0] ?? '';
      conv = {
        id: crypto.randomUUID(),
        title: firstLine.length > TITLE_CHARS ? `${firstLine.slice(0, TITLE_CHARS - 1)}…` : firstLine,
        createdAt: now,
        updatedAt: now,
        thinking: completionModel ? false : (params.thinking ?? settings.chat.thinking),
        messages: [],
        state: null,
      };
    }
    if (this.active.has(conv.id)) throw new K3Failure('busy', 'This conversation is answering already; stop it first.');
    const maxTokens = replyLimit(params.maxTokens ?? settings.chat.maxTokens, completionModel !== undefined);
    const warnings: K3Problem[] = [];
    if (engine && !completionModel) {
      const foreign = await this.dropForeignIds(conv, Math.min(engine.model.vocabSize, engine.tokenizer.vocabSize));
      if (foreign) warnings.push(foreign);
    }
    const plan = planTurn(
      params.conversationId !== undefined ? conv : undefined,
      params.message,
      params.attachments,
      params.replaceFrom,
      maxTokens,
      this.counter(conv.thinking),
      now,
    );
    const userMessage = plan.userMessage;
    const job = new Job('chat');
    const turn = { job, generating: false };
    this.active.set(conv.id, turn);
    let clientCancelled = false;
    const onCancel = token.onCancellationRequested(() => {
      clientCancelled = true;
      this.stop(conv.id);
    });
    const messageId = crypto.randomUUID();
    const host = this.ctx.chatHost;
    try {
      const result = await this.ctx.scheduler.run(job, async (): Promise<ChatSendResult> => {
        if (remote) {
          const reply = await remoteTurn(remote, job, {
            conversation: { ...conv, messages: plan.kept.slice(plan.notSent) },
            userMessage,
            maxTokens,
            generating: () => (turn.generating = true),
            onDelta: (channel, text, tokens) => this.stream(conv.id, messageId, channel, text, tokens),
          });
          // The remote server's parser ends reasoning when the model closes it; nothing
          // after it means it never did.
          const assistant = assistantMessage(messageId, reply, reply.stopReason === 'stop-token');
          if (reply.interrupted) {
            // The server failed mid-reply: the reply holds what arrived, and the user hears why.
            const p = reply.interrupted.problem();
            const kept: K3Problem = { ...p, message: `${p.message} The reply so far is kept.` };
            this.ctx.reportProblem(kept);
            warnings.push(kept);
          }
          return this.recordTurn(conv, plan, assistant, reply.stats, reply.usage, warnings, 'remote');
        }
        if (!engine) throw new Error('no engine for a local chat turn');
        if (completionModel) {
          host.chatHeld = undefined; // the session will hold the plain message, not the conversation
          const reply = await this.continuation(engine, job, userContent(params.message, userMessage.attachments), maxTokens, conv.id, messageId, () => (turn.generating = true));
          const assistant: StoredMessage = { ...assistantMessage(messageId, reply, true), completionModel };
          return this.recordTurn(conv, plan, assistant, reply.stats, true, warnings, 'continuation');
        }
        const renderer = this.renderer(engine);
        const thinking = conv.thinking;
        // What is sent: the kept turns (the oldest may be left out, docs/PROMPTS.md), then
        // the new message with its attachments.
        const sent = plan.kept.slice(plan.notSent).map(renderable);
        const previous = renderer.render(sent, { thinking, generationPrompt: false });
        const prompt = renderer.render([...sent, renderable(userMessage)], { thinking, generationPrompt: true });
        const es = engine.chat;

        // Resume: the session already holds the conversation, or its saved state does.
        let resumedFrom: ChatTurnStats['resumedFrom'] = 'none';
        if (host.chatHeld === conv.id && previous.length > 0 && es.holdsPrefixOf(previous) === previous.length) {
          resumedFrom = 'context';
        } else {
          host.chatHeld = undefined;
          const file = store.stateFile(conv);
          // A saved state of a history that was replaced or shortened at its start holds
          // no prefix of this prompt: the turn prefills from the kept turns instead, and
          // the state saved after it replaces that one.
          if (file && conv.state && !plan.historyChanged) {
            if (conv.state.model !== engine.fingerprint) {
              warnings.push(
                store.setAside(file, 'state-incompatible', 'The saved engine state of this conversation was made by another model; the conversation was re-read from its history.'),
              );
              conv.state = null;
              const p = await store.put(conv);
              if (p) warnings.push(p);
            } else {
              try {
                await es.loadState(job, file);
                resumedFrom = 'saved-state';
              } catch (e) {
                if (e instanceof EngineError && e.code === 'io' && entryKind(file) === 'missing') {
                  // Another window removed it (its clear, its limits) after this one read the
                  // history: the turn prefills the history it read instead, and what the
                  // session held is untouched (the engine fails before changing it).
                  this.ctx.log(`chat turn: the saved state ${path.basename(file)} was removed by another window; the conversation is read from its history`);
                  conv.state = null;
                } else if (!(e instanceof EngineError) || e.code !== 'state') {
                  throw e;
                } else {
                  warnings.push(
                    store.setAside(
                      file,
                      'state-incompatible',
                      'The saved engine state of this conversation could not be used, so it was cleared and the conversation was re-read from its history.',
                      e.detail,
                    ),
                  );
                  conv.state = null;
                  const p = await store.put(conv);
                  if (p) warnings.push(p);
                }
              }
            }
          }
        }
        host.chatHeld = conv.id;

        const prefill = await es.prefill(job, prompt, []);
        turn.generating = true;
        const parser = renderer.parser(thinking);
        const gen = await es.generate(job, prompt, {
          // The context's end, less the room to close a cut reply, is a limit too.
          maxTokens: Math.max(1, Math.min(maxTokens, es.maxContext - prompt.length - renderer.closerRoom())),
          specMax: settings.engine.speculation,
          stopIds: renderer.stopIds,
          contextIds: prompt.slice(-DRAFT_WINDOW),
          onTokens: (ids) => {
            for (const d of parser.feed(ids)) this.stream(conv.id, messageId, d.channel, d.text, job.tokens);
          },
        });
        for (const d of parser.finish()) this.stream(conv.id, messageId, d.channel, d.text, gen.ids.length);
        const stopReason: ChatStopReason = gen.end;

        // Close the turn if it was cut, decode it to its end and save: the next turn then
        // prefills only its own message.
        const closer = renderer.closer(parser.state, parser.inTag);
        const full = [...prompt, ...gen.ids, ...closer];
        await es.prefill(job, full, []);
        const assistant = assistantMessage(
          messageId,
          { reasoning: parser.reasoning, content: parser.content, stopReason },
          parser.state !== 'think',
          [...renderer.generationPrompt(thinking), ...gen.ids, ...closer],
        );
        const oldState = store.stateFile(conv);
        const saved = await this.saveState(es, job, conv.id, full.length, engine.fingerprint, warnings);
        keepTurn(conv, plan, assistant);
        conv.state = saved?.ref ?? null;
        const notKept = await store.put(conv);
        if (notKept) {
          warnings.push(notKept);
          // Another window's version of the history won: nothing names the new state.
          if (saved && notKept.kind === 'conversation-changed') fs.rmSync(saved.file, { force: true });
        } else if (oldState && oldState !== saved?.file) {
          fs.rmSync(oldState, { force: true });
        }
        await store.enforceLimits(settings.state.maxBytes, settings.state.maxConversations, conv.id);

        const stats = turnStats(conv.id, resumedFrom, prompt.length, prefill, gen);
        this.ctx.status.lastChat = stats;
        this.ctx.log(
          `chat turn (${resumedFrom}): prompt ${stats.promptTokens} tokens, reused ${stats.reusedTokens}, ` +
            `prefilled ${stats.prefilledTokens}, generated ${stats.generatedTokens} (${stopReason})`,
        );
        this.ctx.status.changed();
        return { conversationId: conv.id, userMessage: publicMessage(userMessage), message: publicMessage(assistant), stats, warnings };
      });
      if (clientCancelled) throw new Cancelled();
      return result;
    } catch (e) {
      const f = engineFailure(e);
      // What the session holds is unknown after a failure or a cancelled prefill.
      if (host.chatHeld === conv.id) host.chatHeld = undefined;
      throw f;
    } finally {
      onCancel.dispose();
      this.active.delete(conv.id);
    }
  }

  /** Assistant turns whose stored ids this model cannot read (a history edited by hand, or
   * one written for another model) are rendered from their text instead, for good: the
   * turn goes on, and says so once. Without this every turn of the conversation failed. */
  private async dropForeignIds(conv: StoredConversation, vocab: number): Promise<K3Problem | undefined> {
    const bad = conv.messages.filter((m) => m.ids?.some((id) => id >= vocab));
    if (bad.length === 0) return undefined;
    const highest = Math.max(...bad.flatMap((m) => m.ids ?? []));
    for (const m of bad) delete m.ids;
    await this.ctx.store.put(conv);
    const problem: K3Problem = {
      kind: 'file-corrupt',
      action: action('none'),
      message: `${bad.length} message(s) of this conversation's history held token ids this model does not have; they are read from their text instead.`,
      detail: `conversation ${conv.id}: ids up to ${highest}, the vocabulary has ${vocab}`,
    };
    this.ctx.reportProblem(problem);
    return problem;
  }

  /** Saves the chat session's state for the conversation's next turn, or returns null
   * (with a warning) when it cannot be: storage that cannot be written costs the next
   * turn's resume, never this reply. */
  private async saveState(
    es: EngineSession,
    job: Job,
    id: string,
    tokens: number,
    model: string,
    warnings: K3Problem[],
  ): Promise<{ ref: SavedStateRef; file: string } | null> {
    const { store } = this.ctx;
    const statePath = store.newStatePath(id);
    if (!statePath) {
      const p = store.storage().problem;
      if (p && !warnings.includes(p)) warnings.push(p);
      return null;
    }
    try {
      await es.saveState(job, statePath);
      return { ref: { file: path.basename(statePath), tokens, model, bytes: fs.statSync(statePath).size }, file: statePath };
    } catch (e) {
      if (!(e instanceof EngineError) || e.code !== 'io') throw e;
      fs.rmSync(statePath, { force: true });
      warnings.push({
        kind: 'storage-unavailable',
        action: action('none'),
        message: 'The engine state of this conversation could not be saved, so its next turn re-reads the history.',
        detail: e.detail,
      });
      return null;
    }
  }

  /**
   * A model not trained for chat continues the message as the text it is (code, mostly),
   * on the line after it, without the chat format around it, which such a model has never
   * seen. Streamed as the reply's content; nothing is saved for the
   * next turn (each message is continued on its own).
   */
  private async continuation(
    engine: LoadedEngine,
    job: Job,
    text: string,
    maxTokens: number,
    conversationId: string,
    messageId: string,
    generating: () => void,
  ): Promise<Reply & { stats: ChatTurnStats }> {
    const es = engine.chat;
    const { stopIds } = this.renderer(engine);
    // A message is whole lines: the continuation starts on the next one.
    const prompt = Array.from(engine.tokenizer.encode(text.endsWith('\n') ? text : `${text}\n`, false));
    const prefill = await es.prefill(job, prompt, []);
    generating();
    const decoder = engine.tokenizer.stream();
    // The same rules as ghost text, read as if the message were the file above the cursor.
    // Generation ends as soon as a rule acts on the finished lines; nothing streams until the
    // end, since a loop is only recognised once it has repeated (the continuation is short).
    const judge = (text: string): FilterResult =>
      filterJunk(text.split('\n'), {
        linePrefix: '',
        lineAbove: '',
        maxLineLength: maxLineLength(text.split('\n')),
        asciiFile: nonAsciiShare(text) < ASCII_FILE_SHARE,
        filter: this.ctx.settings.completions.filter,
      });
    let raw = '';
    let filtered = false;
    const gen = await es.generate(job, prompt, {
      maxTokens,
      specMax: this.ctx.settings.engine.speculation,
      stopIds,
      contextIds: prompt,
      onTokens: (ids) => {
        for (const id of ids) if (!stopIds.includes(id)) raw += decoder.push(id);
        const finished = raw.lastIndexOf('\n');
        if (finished >= 0 && !filtered && judge(raw.slice(0, finished)).note) {
          filtered = true;
          job.stop();
        }
      },
    });
    raw += decoder.end();
    const verdict = judge(raw);
    const content = verdict.lines.join('\n').replace(/\s+$/, '');
    if (verdict.note) {
      this.ctx.log(`chat turn (continuation): filter ${verdict.note.rule} ${verdict.note.action} it: ${verdict.note.detail}`);
    }
    if (content) this.stream(conversationId, messageId, 'content', content, gen.ids.length);
    // Ended by the filter, not by the user: the reply is over, as if the model had ended it.
    const stopReason = filtered && gen.end === 'stopped' ? 'stop-token' : gen.end;
    return { reasoning: '', content, stopReason, stats: turnStats(conversationId, 'none', prompt.length, prefill, gen) };
  }

  /** Records a turn that left no engine state of its own: a remote server's, or a
   * continuation. A saved engine state stays: the local engine's rendering of the longer
   * conversation still starts with what it holds. `usage`: whether the stats' prompt
   * figures are known (a remote server may send none). */
  private async recordTurn(
    conv: StoredConversation,
    plan: TurnPlan,
    assistant: StoredMessage,
    stats: ChatTurnStats,
    usage: boolean,
    warnings: K3Problem[],
    kind: 'remote' | 'continuation',
  ): Promise<ChatSendResult> {
    const { store, settings } = this.ctx;
    const { userMessage } = plan;
    keepTurn(conv, plan, assistant);
    // The saved state no longer starts the rendering when the history was replaced or
    // shortened: the next local turn must not resume from it.
    if (plan.historyChanged) conv.state = null;
    const notKept = await store.put(conv);
    if (notKept) warnings.push(notKept);
    await store.enforceLimits(settings.state.maxBytes, settings.state.maxConversations, conv.id);
    this.ctx.status.lastChat = stats;
    this.ctx.log(
      usage
        ? `chat turn (${kind}): prompt ${stats.promptTokens} tokens, reused ${stats.reusedTokens}, ` +
            `prefilled ${stats.prefilledTokens}, generated ${stats.generatedTokens} (${assistant.stopReason})`
        : `chat turn (${kind}): ${stats.generatedTokens} pieces generated (${assistant.stopReason}); ` +
            'the server sent no usage, so its prompt and reuse figures are unknown',
    );
    this.ctx.status.changed();
    return { conversationId: conv.id, userMessage: publicMessage(userMessage), message: publicMessage(assistant), stats, warnings };
  }

  private stream(conversationId: string, messageId: string, channel: 'reasoning' | 'content', text: string, tokens: number): void {
    void this.ctx.connection.sendNotification(ChatStreamNotification.type, { conversationId, messageId, channel, text, tokens });
  }
}
