// service.ts - inline edits (k3/edit/start): the selection, its surroundings and the
// instruction become one user message (prompt.ts), the chat model answers it (the local
// engine through its chat format, or the remote server), the reply streams to the client as
// the code block's finished lines (k3/edit/didStream) and is read as an edit at its end
// (reply.ts). An edit is a one-off: nothing goes to the chat history or the saved state,
// and the chat session no longer holds a conversation afterwards. A model not trained for
// chat (k3-mini) is refused before anything runs: it cannot follow an instruction.
import * as crypto from 'node:crypto';
import type { CancellationToken, Connection } from 'vscode-languageserver';
import { Cancelled, engineFailure, invalidRequest, K3Failure } from '../errors';
import {
  EditStreamNotification,
  type ChatStopReason,
  type EditStartParams,
  type EditStartResult,
  type ServerSettings,
} from '../../protocol/lsp';
import { Job, type Scheduler } from '../scheduler';
import type { RemoteBackend } from '../remote/backend';
import { remoteTurn } from '../remote/chat';
import type { EngineHost } from '../engine/host';
import type { ChatService } from '../chat/service';
import { editMessage } from './prompt';
import { parseEditReply, partialEditCode } from './reply';

/** What the edit service uses of the server that holds it (ServerCtx implements it). */
export interface EditServiceHost {
  readonly settings: ServerSettings;
  readonly scheduler: Pick<Scheduler, 'run'>;
  readonly chatHost: Pick<EngineHost, 'ready' | 'chatHeld'>;
  /** The chat role's remote server (an edit is a chat turn); undefined: the local engine. */
  readonly chatRemote: RemoteBackend | undefined;
  readonly connection: Pick<Connection, 'sendNotification'>;
  /** The chat service, which makes and keeps each loaded model's chat format. */
  readonly chat: Pick<ChatService, 'renderer'>;
  log(message: string): void;
}

function checkParams(p: unknown): EditStartParams {
  const v = p as Record<string, unknown> | null;
  const usage = 'k3/edit/start needs { editId, languageId, before, selection, after, instruction, path?, maxTokens? }';
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw invalidRequest(`${usage}; got ${JSON.stringify(p) ?? 'nothing'}`);
  for (const k of ['editId', 'languageId', 'before', 'selection', 'after', 'instruction'] as const) {
    if (typeof v[k] !== 'string') throw invalidRequest(`k3/edit/start: ${k} must be a string; got ${JSON.stringify(v[k]) ?? 'nothing'}`);
  }
  if ((v.instruction as string).trim() === '') throw invalidRequest('k3/edit/start: instruction must say what to do; it is empty');
  if (v.path !== undefined && typeof v.path !== 'string') throw invalidRequest('k3/edit/start: path must be a string');
  if (v.maxTokens !== undefined && !(Number.isInteger(v.maxTokens) && (v.maxTokens as number) > 0))
    throw invalidRequest(`k3/edit/start: maxTokens must be a positive integer; got ${JSON.stringify(v.maxTokens)}`);
  return v as unknown as EditStartParams;
}

export class EditService {
  constructor(private readonly ctx: EditServiceHost) {}

  async start(raw: unknown, token: CancellationToken): Promise<EditStartResult> {
    const params = checkParams(raw);
    const remote = this.ctx.chatRemote;
    const engine = remote ? undefined : this.ctx.chatHost.ready();
    if (engine && !engine.info.chat) {
      throw new K3Failure(
        'model-cannot-chat',
        `${engine.info.name} is a code-completion model, not trained for chat: it cannot follow an edit instruction. Choose a chat backend that can (K3: Choose Chat Backend): a Kimi K3 model folder or a remote K3 server.`,
      );
    }
    const message = editMessage(params);
    const maxTokens = params.maxTokens ?? this.ctx.settings.chat.maxTokens;
    const job = new Job('chat');
    const onCancel = token.onCancellationRequested(() => job.cancel());
    let reply = '';
    let streamedLines = -1;
    const streamed = (tokens: number): void => {
      const code = partialEditCode(reply);
      if (code === undefined) return;
      const lines = code === '' ? 0 : code.split('\n').length;
      if (lines === streamedLines) return;
      streamedLines = lines;
      void this.ctx.connection.sendNotification(EditStreamNotification.type, { editId: params.editId, code, tokens });
    };
    try {
      const result = await this.ctx.scheduler.run(job, async (): Promise<{ stopReason: ChatStopReason; generated: number }> => {
        if (remote) {
          const r = await remoteTurn(remote, job, {
            conversation: { id: `edit-${params.editId}`, title: '', createdAt: 0, updatedAt: 0, thinking: false, messages: [], state: null },
            userMessage: { id: crypto.randomUUID(), role: 'user', content: message, reasoning: '', createdAt: Date.now() },
            maxTokens,
            generating: () => undefined,
            onDelta: (channel, text, tokens) => {
              if (channel !== 'content') return;
              reply += text;
              streamed(tokens);
            },
          });
          if (r.interrupted) throw r.interrupted;
          return { stopReason: r.stopReason, generated: r.stats.generatedTokens };
        }
        if (!engine) throw new Error('no engine for a local edit');
        const renderer = this.ctx.chat.renderer(engine);
        const prompt = renderer.render([{ role: 'user', content: message }], { thinking: false, generationPrompt: true });
        // The chat session will hold this prompt, not the conversation it held.
        this.ctx.chatHost.chatHeld = undefined;
        const es = engine.chat;
        await es.prefill(job, prompt, []);
        const parser = renderer.parser(false);
        const gen = await es.generate(job, prompt, {
          maxTokens,
          specMax: this.ctx.settings.engine.speculation,
          stopIds: renderer.stopIds,
          contextIds: prompt,
          onTokens: (ids) => {
            for (const d of parser.feed(ids)) if (d.channel === 'content') reply += d.text;
            streamed(job.tokens);
          },
        });
        for (const d of parser.finish()) if (d.channel === 'content') reply += d.text;
        return { stopReason: gen.end, generated: gen.ids.length };
      });
      if (job.cancelled) throw new Cancelled();
      const parsed = parseEditReply(reply, result.stopReason !== 'stop-token');
      this.ctx.log(`edit ${params.editId}: ${result.generated} tokens (${result.stopReason}), read as ${parsed.kind}`);
      return { editId: params.editId, reply: parsed, stopReason: result.stopReason, generatedTokens: result.generated };
    } catch (e) {
      throw engineFailure(e);
    } finally {
      onCancel.dispose();
    }
  }
}
