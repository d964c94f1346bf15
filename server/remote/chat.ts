// chat.ts - a chat turn through a remote server's /v1/chat/completions: the conversation's
// messages (user messages with their attachments, docs/PROMPTS.md; assistant turns with
// their reasoning under both names servers read:
// `reasoning_content` for llama-server, SGLang and k3 serve, `reasoning` for vLLM since it
// renamed the field), the conversation's thinking choice as
// `chat_template_kwargs.thinking`, greedy, streamed. The server renders the K3 chat format
// (`k3 serve` exactly as server/chat/render.ts does), and its reasoning parser splits the
// reply: `reasoning_content` or `reasoning` deltas are the think channel, `content` deltas
// the response. job.stop() closes the stream and keeps what arrived; so does a server that
// fails in the middle of the reply (the failure comes back with it), and so does one that
// keeps sending past max_tokens (cut at the budget, budget.ts) or past the turn's deadline. There is no engine
// state to save, so a turn costs what the server's prefix cache does not hold. The chat
// service records the turn.
import { Cancelled, K3Failure } from '../errors';
import type { ChatStopReason, ChatTurnStats } from '../../protocol/lsp';
import type { Job } from '../scheduler';
import type { StoredConversation, StoredMessage } from '../state/store';
import type { RemoteBackend } from './backend';
import { userContent } from '../chat/budget';
import { CHAT_DEADLINE_TIMEOUTS, ReplyBudget } from './budget';

export interface RemoteTurnRequest {
  conversation: StoredConversation;
  userMessage: StoredMessage;
  maxTokens: number;
  /** Called when the first piece of the reply arrives (a stop then ends the reply; before,
   * it cancels the turn). */
  generating(): void;
  /** A piece of the reply, in order. */
  onDelta(channel: 'reasoning' | 'content', text: string, tokens: number): void;
}

export interface RemoteTurnResult {
  reasoning: string;
  content: string;
  stopReason: ChatStopReason;
  stats: ChatTurnStats;
  /** The server sent usage figures (prompt and cached tokens); a reply stopped before its
   * end, or by a server that sends none, has only the pieces counted. */
  usage: boolean;
  /** The server failed after part of the reply arrived: what arrived is the reply
   * (stopReason `stopped`), and this says what went wrong. */
  interrupted?: K3Failure;
}

interface ChatChunk {
  choices?: Array<{ delta?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown }; finish_reason?: unknown }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null };
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);

/** The conversation as OpenAI chat messages. */
export interface RemoteMessage {
  role: 'user' | 'assistant';
  content: string;
  reasoning_content?: string;
  reasoning?: string;
}

export function remoteMessages(conversation: StoredConversation, userMessage: StoredMessage): RemoteMessage[] {
  return [...conversation.messages, userMessage].map((m): RemoteMessage =>
    m.role === 'assistant' && conversation.thinking && m.reasoning
      ? { role: m.role, content: m.content, reasoning_content: m.reasoning, reasoning: m.reasoning }
      : { role: m.role, content: m.role === 'user' ? userContent(m.content, m.attachments) : m.content },
  );
}

export async function remoteTurn(remote: RemoteBackend, job: Job, req: RemoteTurnRequest): Promise<RemoteTurnResult> {
  const t0 = Date.now();
  let first: number | undefined;
  let pieces = 0;
  let reasoning = '';
  let content = '';
  let finish: unknown;
  let usage: ChatChunk['usage'];
  const budget = new ReplyBudget(req.maxTokens);
  job.stage = 'prefill';
  job.tokens = 0;
  const stream = remote.stream(
    job,
    'chat/completions',
    {
      messages: remoteMessages(req.conversation, req.userMessage),
      max_tokens: req.maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
      chat_template_kwargs: { thinking: req.conversation.thinking },
    },
    CHAT_DEADLINE_TIMEOUTS,
    (data) => {
      const chunk = data as ChatChunk;
      const choice = chunk.choices?.[0];
      if (choice) {
        const d = choice.delta ?? {};
        const sentThink = typeof d.reasoning_content === 'string' ? d.reasoning_content : typeof d.reasoning === 'string' ? d.reasoning : '';
        const sentText = typeof d.content === 'string' ? d.content : '';
        const [think, text] = sentThink || sentText ? budget.take(sentThink, sentText) : ['', ''];
        if ((think || text) && first === undefined) {
          first = Date.now();
          job.stage = 'generate';
          req.generating();
        }
        if (think || text) job.tokens = ++pieces;
        if (think) {
          reasoning += think;
          req.onDelta('reasoning', think, pieces);
        }
        if (text) {
          content += text;
          req.onDelta('content', text, pieces);
        }
        if (choice.finish_reason !== null && choice.finish_reason !== undefined) finish = choice.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
      return budget.exceeded === undefined ? undefined : 'close';
    },
  );
  let end: 'done' | 'stopped';
  let interrupted: K3Failure | undefined;
  try {
    end = await stream;
  } catch (e) {
    // Before the first piece a failure fails the turn; after it, the turn keeps what arrived.
    if (e instanceof Cancelled || !(e instanceof K3Failure) || pieces === 0) throw e;
    end = 'stopped';
    interrupted = e;
  }
  if (budget.exceeded !== undefined && !interrupted) {
    // A server that ignores max_tokens: the reply is what the budget held, and the user hears why.
    interrupted = new K3Failure(
      'remote-failed',
      `The remote K3 server at ${remote.where} kept sending after the reply's ${req.maxTokens} tokens, so the reply was cut there.`,
      'over-budget',
      `${budget.exceeded}; the stream was closed after ${budget.pieces} pieces and ${budget.bytes} bytes`,
    );
    remote.log(`remote backend: ${interrupted.detail}`);
  }
  const done = Date.now();
  const promptTokens = count(usage?.prompt_tokens) ?? 0;
  const reused = Math.min(count(usage?.prompt_tokens_details?.cached_tokens) ?? 0, promptTokens);
  const generated = end === 'stopped' || budget.exceeded !== undefined ? pieces : (count(usage?.completion_tokens) ?? pieces);
  const generateMs = first === undefined ? 0 : done - first;
  const stopReason: ChatStopReason =
    budget.exceeded !== undefined ? 'length' : end === 'stopped' ? 'stopped' : finish === 'length' ? 'length' : 'stop-token';
  return {
    reasoning,
    content,
    stopReason,
    usage: count(usage?.prompt_tokens) !== undefined,
    ...(interrupted ? { interrupted } : {}),
    stats: {
      conversationId: req.conversation.id,
      resumedFrom: reused > 0 ? 'context' : 'none',
      promptTokens,
      reusedTokens: reused,
      prefilledTokens: promptTokens - reused,
      generatedTokens: generated,
      draftedTokens: 0,
      acceptedTokens: 0,
      prefillMs: (first ?? done) - t0,
      generateMs,
      tokensPerSecond: generateMs > 0 ? (generated * 1000) / generateMs : 0,
    },
  };
}
