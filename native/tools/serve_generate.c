/* serve_generate.c - one generation request of `k3 serve`: the completions and chat routes
 * (the request read by openai.c, the prompt tokenized or rendered by chat.c), then under
 * the engine queue prefill (serve_checkpoints.c), generation with the client watched, and
 * the answer, whole or as server-sent events, with stop strings held back until they can
 * no longer begin. Separate from cmd_serve.c, which accepts and routes connections and owns
 * the queue: this file is what happens once a request is a prompt. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "http.h"
#include "json.h"
#include "k3.h"
#include "openai.h"
#include "serve.h"
#include "serve_checkpoints.h"
#include "serve_generate.h"
#include "strbuf.h"

/* Answers a request the wire format refused (openai.c). */
static void send_refusal(conn *c, const openai_error *err) {
    serve_send_error(c, err->status, err->code, "%s", err->message);
}

/* ---- a generation request --------------------------------------------------------------- */

typedef struct gen {
    conn *c;
    watch w;
    openai_reply r;       /* id, time, model, chat or text completion */
    int stream, include_usage;
    int continuous_usage; /* every streamed chunk carries the usage so far (vLLM's stream option) */
    int cached;           /* prompt tokens reused, once the prompt is in */
    int max_tokens;
    /* completions: stop strings, and the text held back while it may still start one */
    const char *stop[OPENAI_MAX_STOP_STRINGS];
    size_t stop_len[OPENAI_MAX_STOP_STRINGS];
    int n_stop;
    strbuf text;    /* completions: the text so far; chat: the content */
    strbuf reasoning;
    size_t sent;    /* completions: bytes of text already sent */
    int stop_hit;   /* a stop string ended it */
    k3_detokenize_stream stream_state;
    chat_parser parser;
    int generated;
    int write_failed;
    int return_token_ids;      /* answer with prompt_token_ids and token_ids (vLLM's extension) */
    const int32_t *prompt_ids; /* the prompt, while it runs */
    int n_prompt;
    chat_ids out_ids;          /* the generated ids, when return_token_ids */
    const char *heal;          /* completions with k3_heal: the bytes cut off the prompt, which */
    size_t heal_len;           /* the first generated tokens spell (and the answer leaves out) */
    size_t heal_skip;          /* of them, bytes not yet dropped from the generated text */
} gen;

/* Sends one server-sent event `data: {json}\n\n`; a failure means the client has gone. */
static void send_event(gen *g, const strbuf *json) {
    if (g->write_failed || json->failed)
        return;
    if (http_send_all(g->c->fd, "data: ", 6) || http_send_all(g->c->fd, json->data, json->len) ||
        http_send_all(g->c->fd, "\n\n", 2)) {
        g->write_failed = 1;
        atomic_store(&g->w.gone, 1);
    }
}

/* Ends a streamed chunk: `}` after the choices, with the usage so far when asked for. */
static void chunk_end(gen *g, strbuf *b) {
    if (g->continuous_usage && g->prompt_ids) {
        strbuf_puts(b, ",");
        openai_usage_json(b, g->n_prompt, g->generated, g->cached);
    }
    strbuf_puts(b, "}");
}

/* A streamed piece of text (completions) or of a channel (chat). */
static void send_piece(gen *g, int channel, const char *text, size_t n) {
    if (!g->stream || !n)
        return;
    strbuf b;
    strbuf_init(&b);
    openai_chunk_begin(&b, &g->r);
    openai_chunk_piece(&b, &g->r, channel, text, n);
    chunk_end(g, &b);
    send_event(g, &b);
    strbuf_free(&b);
}

/* Completions text: appended, searched for stop strings, and what can no longer begin one
 * is sent. Returns 1 when a stop string ended the text. */
static int completion_text(gen *g, const char *piece, size_t n) {
    const size_t before = g->text.len;
    strbuf_append_valid_utf8(&g->text, piece, n);
    const char *t = g->text.data;
    size_t end = g->text.len; /* the text that stands */
    size_t safe = end;        /* what can be sent now */
    for (int i = 0; i < g->n_stop; i++) {
        const size_t L = g->stop_len[i];
        size_t from = before >= L ? before - L + 1 : 0;
        for (size_t p = from; p + L <= g->text.len; p++)
            if (!memcmp(t + p, g->stop[i], L)) {
                if (p < end)
                    end = p;
                g->stop_hit = 1;
                break;
            }
    }
    if (g->stop_hit) {
        g->text.len = end;
        g->text.data[end] = 0;
        safe = end;
    } else {
        /* Hold back the longest tail that is a proper prefix of a stop string. */
        for (int i = 0; i < g->n_stop; i++)
            for (size_t k = g->stop_len[i] - 1; k > 0; k--)
                if (k <= end && !memcmp(t + end - k, g->stop[i], k)) {
                    if (end - k < safe)
                        safe = end - k;
                    break;
                }
    }
    if (safe > g->sent) {
        send_piece(g, 0, t + g->sent, safe - g->sent);
        g->sent = safe;
    }
    return g->stop_hit;
}

static void on_channel(void *user, int channel, const char *text, size_t n) {
    gen *g = user;
    strbuf_append_valid_utf8(channel == CHAT_REASONING ? &g->reasoning : &g->text, text, n);
    /* One event per piece, each converted on its own, as a JavaScript client reads pieces. */
    if (g->stream) {
        strbuf piece;
        strbuf_init(&piece);
        strbuf_append_valid_utf8(&piece, text, n);
        send_piece(g, channel, piece.data ? piece.data : "", piece.len);
        strbuf_free(&piece);
    }
}

static int on_token(void *user, int32_t id) {
    gen *g = user;
    server *s = g->c->s;
    g->generated++;
    if (g->return_token_ids) {
        if (g->out_ids.n == g->out_ids.cap && !g->out_ids.failed) {
            const size_t cap = g->out_ids.cap ? 2 * g->out_ids.cap : 64;
            int32_t *grown = realloc(g->out_ids.v, cap * sizeof *grown);
            if (grown) {
                g->out_ids.v = grown;
                g->out_ids.cap = cap;
            } else
                g->out_ids.failed = 1;
        }
        if (!g->out_ids.failed)
            g->out_ids.v[g->out_ids.n++] = id;
    }
    if (g->r.chat) {
        chat_parser_feed(&g->parser, id);
    } else {
        int stop = 0;
        for (int i = 0; i < s->fmt.n_stop_ids; i++)
            stop |= id == s->fmt.stop_ids[i];
        if (!stop && !g->stop_hit) {
            char out[K3_TOKEN_MAX_BYTES + 3];
            size_t n = 0;
            if (k3_detokenize_stream_next(s->tok, &g->stream_state, id, out, sizeof out, &n) == K3_OK && n) {
                const size_t skip = n < g->heal_skip ? n : g->heal_skip; /* the client's own text */
                g->heal_skip -= skip;
                if (n > skip)
                    completion_text(g, out + skip, n - skip);
            }
        }
    }
    return atomic_load(&g->w.gone) || g->stop_hit;
}

/* The last events of a stream, or the whole response. */
static void finish(gen *g, const char *finish_reason, int prompt, int cached) {
    conn *c = g->c;
    strbuf b;
    strbuf_init(&b);
    if (g->stream) {
        if (!g->r.chat && g->text.len > g->sent) {
            send_piece(g, 0, g->text.data + g->sent, g->text.len - g->sent);
            g->sent = g->text.len;
        }
        openai_chunk_begin(&b, &g->r);
        openai_chunk_finish(&b, &g->r, finish_reason);
        chunk_end(g, &b);
        send_event(g, &b);
        if (g->include_usage) {
            strbuf_clear(&b);
            openai_chunk_begin(&b, &g->r);
            strbuf_puts(&b, "],");
            openai_usage_json(&b, prompt, g->generated, cached);
            strbuf_puts(&b, "}");
            send_event(g, &b);
        }
        if (!g->write_failed && http_send_all(c->fd, "data: [DONE]\n\n", 14))
            g->write_failed = 1;
        strbuf_free(&b);
        return;
    }
    const openai_answer answer = {
        g->text.data ? g->text.data : "", g->text.len, g->reasoning.data ? g->reasoning.data : "", g->reasoning.len,
        g->prompt_ids, (size_t)g->n_prompt, g->out_ids.v, g->out_ids.n, g->return_token_ids, finish_reason,
        prompt, g->generated, cached,
    };
    openai_answer_json(&b, &g->r, &answer);
    serve_send_json(c, 200, &b, NULL);
    strbuf_free(&b);
}

/* Runs a prompt that holds the engine: prefill, generate, answer. */
static void run_prompt(gen *g, const int32_t *ids, int n, int *bounds, int n_bounds) {
    conn *c = g->c;
    server *s = c->s;
    if (n == 0) {
        serve_send_error(c, 400, NULL, "the prompt is empty");
        return;
    }
    if (n >= s->o.max_context) {
        serve_send_error(c, 400, "context_length_exceeded",
                   "This model's maximum context length is %d tokens, but the prompt has %d tokens (k3 serve --ctx sets it).",
                   s->o.max_context, n);
        return;
    }
    int max_tokens = g->max_tokens < 0 || g->max_tokens > s->o.max_context - n ? s->o.max_context - n : g->max_tokens;
    if (g->stream) {
        if (http_send_event_stream_head(c->fd)) {
            g->write_failed = 1;
            return;
        }
        c->status = 200;
        if (g->r.chat) {
            strbuf b;
            strbuf_init(&b);
            openai_chunk_begin(&b, &g->r);
            openai_chunk_role(&b);
            strbuf_puts(&b, "}");
            send_event(g, &b);
            strbuf_free(&b);
        }
    }
    serve_watch_start(&g->w, s, c->fd);
    int reused = 0;
    k3_status st = serve_prefill(s, ids, n, bounds, n_bounds, &reused);
    g->prompt_ids = ids;
    g->n_prompt = n;
    g->cached = reused;
    c->prompt_tokens = n;
    c->cached_tokens = reused;
    k3_generate_stats stats = {0};
    if (st == K3_OK && max_tokens > 0 && !atomic_load(&g->w.gone)) {
        k3_generate_params gp;
        k3_generate_params_default(&gp);
        gp.max_tokens = max_tokens;
        gp.spec_max = s->o.spec;
        gp.stop_ids = s->fmt.stop_ids;
        gp.n_stop_ids = s->fmt.n_stop_ids;
        gp.on_token = on_token;
        gp.user = g;
        gp.heal = g->heal;
        gp.heal_len = g->heal_len;
        gp.tokenizer = s->tok;
        g->heal_skip = g->heal_len;
        st = k3_generate(s->ctx, &gp, &stats);
        if (st == K3_ERR_CONTEXT_FULL)
            st = K3_OK; /* ends like the limit */
    }
    if (g->r.chat)
        chat_parser_finish(&g->parser);
    else if (!g->stop_hit) {
        char rest[4];
        const size_t k = k3_detokenize_stream_end(&g->stream_state, rest);
        if (k)
            completion_text(g, rest, k);
    }
    serve_watch_stop(&g->w);
    c->generated = g->generated;
    const int gone = atomic_load(&g->w.gone);
    if (gone || st == K3_ERR_CANCELLED) {
        c->status = 499; /* client closed the request (nginx's number); nothing is sent */
        return;
    }
    if (st != K3_OK) {
        char detail[1100];
        snprintf(detail, sizeof detail, "the engine failed (%s): %s", k3_status_name(st), k3_context_error(s->ctx));
        if (g->stream) {
            strbuf b;
            strbuf_init(&b);
            openai_error_json(&b, 500, k3_status_name(st), detail);
            send_event(g, &b);
            strbuf_free(&b);
            c->status = 500;
        } else
            serve_send_error(c, 500, k3_status_name(st), "%s", detail);
        return;
    }
    const char *reason = g->stop_hit || stats.stop_reason == K3_STOP_TOKEN ? "stop" : "length";
    finish(g, reason, n, reused);
}

/* ---- the two generation routes ------------------------------------------------------------- */

/* The number of the next answer's id; every generation request takes one, refused or not. */
static unsigned long take_reply_number(server *s) {
    pthread_mutex_lock(&s->mu);
    const unsigned long n = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void gen_init(gen *g, conn *c, int chat, unsigned long number, const openai_common *req) {
    memset(g, 0, sizeof *g);
    g->c = c;
    g->r.chat = chat;
    g->r.model = c->s->model_name;
    g->stream = req->stream;
    g->include_usage = req->include_usage;
    g->continuous_usage = req->continuous_usage;
    g->return_token_ids = req->return_token_ids;
    g->max_tokens = req->max_tokens;
    strbuf_init(&g->text);
    strbuf_init(&g->reasoning);
    snprintf(g->r.id, sizeof g->r.id, "%s-%lx-%lu", chat ? "chatcmpl" : "cmpl", (unsigned long)c->s->started, number);
    g->r.created = (long)time(NULL);
}

static void gen_free(gen *g) {
    chat_ids_free(&g->out_ids);
    strbuf_free(&g->text);
    strbuf_free(&g->reasoning);
    chat_parser_free(&g->parser);
}

/* Holds the engine for the body of a request: 0 when held; else the answer was sent. */
static int hold_engine(conn *c) {
    const int rc = serve_acquire_engine(c);
    if (rc == 429)
        serve_send_error(c, 429, "queue_full", "the server is busy: one request runs and %d wait, the most it queues (k3 serve --queue)",
                   c->s->o.queue);
    else if (rc == 503)
        serve_send_error(c, 503, NULL, "the server is shutting down");
    else if (rc < 0)
        c->status = 499;
    return rc;
}

void serve_handle_completions(conn *c, const json_value *root) {
    const unsigned long number = take_reply_number(c->s);
    openai_completion req;
    openai_error refusal;
    if (openai_read_completion(root, c->s->model_name, c->s->vocab, &req, &refusal)) {
        send_refusal(c, &refusal);
        return;
    }
    gen g;
    gen_init(&g, c, 0, number, &req.common);
    for (int i = 0; i < req.n_stop; i++) {
        g.stop[i] = req.stop[i];
        g.stop_len[i] = req.stop_len[i];
    }
    g.n_stop = req.n_stop;
    g.heal = req.healed;
    g.heal_len = req.healed_len;
    int32_t *ids = NULL;
    if (hold_engine(c))
        goto done;
    if (req.text) {
        /* Token healing: the prompt ends at the start of its last piece, which the answer's
         * first tokens spell again and the answer leaves out (docs/PROMPTS.md). */
        const char *text = req.text;
        const size_t text_len = req.text_len;
        size_t cut = text_len;
        k3_status st = req.heal ? k3_tokenizer_last_piece(c->s->tok, text, text_len, &cut) : K3_OK;
        if (req.heal) {
            g.heal = text + cut;
            g.heal_len = text_len - cut;
        }
        /* Special-token names in a text prompt become their ids, as the CLI's --prompt does. */
        ids = st == K3_OK ? malloc(sizeof *ids * (cut + 1)) : NULL;
        size_t got = 0;
        if (st == K3_OK)
            st = ids ? k3_tokenize(c->s->tok, text, cut, 1, ids, cut + 1, &got) : K3_ERR_OUT_OF_MEMORY;
        if (st != K3_OK)
            serve_send_error(c, 400, NULL, "the prompt cannot be tokenized (%s): %s", k3_status_name(st), k3_tokenizer_error(c->s->tok));
        else if (got == 0 && req.heal)
            serve_send_error(c, 400, NULL, "'k3_heal': the prompt is a single piece (%zu bytes); healing needs text before it",
                       text_len);
        else
            run_prompt(&g, ids, (int)got, req.checkpoints, req.n_checkpoints);
    } else {
        run_prompt(&g, req.ids, req.n_ids, req.checkpoints, req.n_checkpoints);
    }
    serve_release_engine(c->s);
done:
    free(ids);
    gen_free(&g);
    openai_completion_free(&req);
}

void serve_handle_chat(conn *c, const json_value *root) {
    const unsigned long number = take_reply_number(c->s);
    openai_chat req;
    openai_error refusal;
    if (openai_read_chat(root, c->s->model_name, &req, &refusal)) {
        send_refusal(c, &refusal);
        return;
    }
    gen g;
    gen_init(&g, c, 1, number, &req.common);
    chat_ids ids = {0};
    if (hold_engine(c))
        goto done;
    const k3_status st = chat_render(&c->s->fmt, req.messages, req.n_messages, req.thinking, req.effort, 1, &ids);
    if (st != K3_OK) {
        serve_send_error(c, st == K3_ERR_OUT_OF_MEMORY ? 500 : 400, NULL, "the messages cannot be rendered (%s): %s",
                   k3_status_name(st), k3_tokenizer_error(c->s->tok));
    } else if (ids.n > INT32_MAX) {
        serve_send_error(c, 400, "context_length_exceeded", "the conversation is too long");
    } else {
        chat_parser_init(&g.parser, &c->s->fmt, req.thinking, on_channel, &g);
        run_prompt(&g, ids.v, (int)ids.n, NULL, 0);
    }
    serve_release_engine(c->s);
done:
    chat_ids_free(&ids);
    gen_free(&g);
    openai_chat_free(&req);
}
