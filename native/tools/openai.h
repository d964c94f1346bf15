/* openai.h - the OpenAI-compatible wire format `k3 serve` speaks: reading the bodies of
 * POST /v1/completions and /v1/chat/completions into plain structs (every field checked,
 * a refusal carrying the HTTP status, the error code and a sentence naming the field and
 * the numbers), and writing the JSON of answers: error objects, usage, whole responses
 * and the chunks of a server-sent-event stream. It knows nothing of sockets, the queue or
 * the engine (cmd_serve.c and serve_generate.c hold those); the chat prompt is rendered by
 * chat.c. */
#ifndef K3_OPENAI_H
#define K3_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "json.h"
#include "strbuf.h"

#define OPENAI_MAX_STOP_STRINGS 4
#define OPENAI_MAX_CHECKPOINTS 16

/* A refused request: the HTTP status, the error code (NULL: the status number) and the
 * message. */
typedef struct openai_error {
    int status;
    const char *code;
    char message[1024];
} openai_error;

/* The fields every generation request shares. */
typedef struct openai_common {
    int stream, include_usage;
    int continuous_usage; /* every streamed chunk carries the usage so far (vLLM's stream option) */
    int return_token_ids; /* answer with prompt_token_ids and token_ids (vLLM's extension) */
    int max_tokens;       /* max_completion_tokens or max_tokens; -1 when absent */
} openai_common;

/* POST /v1/completions. Strings point into the request's JSON document. */
typedef struct openai_completion {
    openai_common common;          /* max_tokens 16 when absent (the OpenAI default) */
    const char *stop[OPENAI_MAX_STOP_STRINGS];
    size_t stop_len[OPENAI_MAX_STOP_STRINGS];
    int n_stop;
    int checkpoints[OPENAI_MAX_CHECKPOINTS]; /* k3_checkpoints: prompt positions to checkpoint */
    int n_checkpoints;
    int heal;                      /* k3_heal: true (back a text prompt off to its last piece) */
    const char *healed;            /* k3_heal: "...": the text the client took off the prompt */
    size_t healed_len;
    const char *text;              /* a text prompt, tokenized later under the engine, or NULL */
    size_t text_len;
    int32_t *ids;                  /* a prompt of token ids (n_ids), owned; NULL with text */
    int n_ids;
} openai_completion;

/* POST /v1/chat/completions. */
typedef struct openai_chat {
    openai_common common;
    int thinking;                  /* chat_template_kwargs.thinking (default true) */
    const char *effort;            /* reasoning_effort: low, medium, high or max (default) */
    chat_message *messages;        /* (n_messages), texts in the document or in owned */
    size_t n_messages;
    char **owned;                  /* (2 * n_messages) joined text parts, freed with the request */
} openai_chat;

/* Read a request body; 0, or -1 with err set (and nothing left to free). model: the name
 * this server answers to; vocab: the token ids a prompt may hold. */
int openai_read_completion(const json_value *root, const char *model, int vocab, openai_completion *out,
                           openai_error *err);
void openai_completion_free(openai_completion *r);
int openai_read_chat(const json_value *root, const char *model, openai_chat *out, openai_error *err);
void openai_chat_free(openai_chat *r);

/* "invalid_request_error", "server_error", ... for an HTTP status. */
const char *openai_error_type(int status);

/* {"error":{"message","type","param":null,"code"}}; code NULL: the status number. */
void openai_error_json(strbuf *b, int status, const char *code, const char *message);

/* "usage":{...} (a member, no braces around it). */
void openai_usage_json(strbuf *b, int prompt, int generated, int cached);

/* "key":[ids] (a member). */
void openai_ids_json(strbuf *b, const char *key, const int32_t *ids, size_t n);

/* Who an answer is: its id, time, model and kind (chat or text completion). */
typedef struct openai_reply {
    char id[64];
    long created;
    const char *model;
    int chat;
} openai_reply;

/* A stream chunk's opening, up to and including "choices":[ ; the caller adds the choices,
 * "]" and the closing brace (with the usage when asked for). */
void openai_chunk_begin(strbuf *b, const openai_reply *r);

/* One streamed choice: a piece of text (completions) or of a channel (chat), then "]". */
void openai_chunk_piece(strbuf *b, const openai_reply *r, int channel, const char *text, size_t n);

/* The chat stream's first choice (the assistant role, empty content), then "]". */
void openai_chunk_role(strbuf *b);

/* The last choice of a stream with its finish reason ("stop", "length"), then "]". */
void openai_chunk_finish(strbuf *b, const openai_reply *r, const char *finish_reason);

/* A whole (not streamed) answer. */
typedef struct openai_answer {
    const char *text;               /* completions: the text; chat: the content */
    size_t text_len;
    const char *reasoning;          /* chat: the reasoning */
    size_t reasoning_len;
    const int32_t *prompt_ids;      /* with token ids: the prompt's and the answer's */
    size_t n_prompt_ids;
    const int32_t *ids;
    size_t n_ids;
    int with_ids;
    const char *finish_reason;
    int prompt, generated, cached;  /* the usage */
} openai_answer;
void openai_answer_json(strbuf *b, const openai_reply *r, const openai_answer *a);

#endif
