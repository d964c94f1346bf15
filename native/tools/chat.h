/* chat.h - the K3 chat format ("XTML", docs/k3-architecture.md §5.4; docs/PROMPTS.md) in
 * C, for `k3 serve`: messages become token ids exactly as the language server's
 * server/chat/render.ts renders them (each segment encoded on its own: structure tokens as
 * specials, every piece of text with specials disallowed), and a reply's ids become its
 * reasoning and response text as server/chat/render.ts's ReplyParser reads them.
 * test/serve/render.test.ts holds the two renderers to the same ids. It does not run the
 * model. */
#ifndef K3_CHAT_H
#define K3_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "k3.h"
#include "strbuf.h"

typedef enum chat_role { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT } chat_role;

typedef struct chat_message {
    chat_role role;
    const char *content; /* UTF-8, content_len bytes */
    size_t content_len;
    const char *reasoning; /* assistant turns with thinking on: the think channel; may be NULL */
    size_t reasoning_len;
} chat_message;

/* A growable list of ids; `failed` is sticky after an allocation failure. */
typedef struct chat_ids {
    int32_t *v;
    size_t n, cap;
    int failed;
} chat_ids;

void chat_ids_free(chat_ids *ids);

/* The special ids the format uses, found by name in the tokenizer. */
typedef struct chat_format {
    k3_tokenizer *tok;
    int32_t open, close, sep, end_of_msg;
    int32_t stop_ids[2]; /* "[EOS]" and "<|end_of_msg|>", those the tokenizer has */
    int n_stop_ids;
} chat_format;

/* K3_ERR_TOKENIZER (the detail names it) when a structure token is missing. */
k3_status chat_format_init(chat_format *f, k3_tokenizer *tok, char *detail, size_t detail_size);

/* Appends the ids of the conversation to out: with thinking, the thinking-effort system
 * message (effort "low", "medium", "high" or "max"), then every message, then, when
 * generation_prompt, the assistant turn's opening and its think (thinking) or response
 * channel. K3_ERR_OUT_OF_MEMORY, or the tokenizer's error. */
k3_status chat_render(const chat_format *f, const chat_message *messages, size_t n_messages, int thinking,
                      const char *effort, int generation_prompt, chat_ids *out);

/* Where a reply stands, by the structure tokens it has produced. */
typedef enum chat_state {
    CHAT_STATE_THINK,
    CHAT_STATE_BETWEEN,
    CHAT_STATE_RESPONSE,
    CHAT_STATE_TOOLS,
    CHAT_STATE_AFTER_RESPONSE,
    CHAT_STATE_DONE,
    CHAT_STATE_ENDED
} chat_state;

enum { CHAT_REASONING = 0, CHAT_CONTENT = 1 };

/* Receives a piece of reply text (raw bytes, possibly not UTF-8 on their own) for a channel. */
typedef void (*chat_emit_fn)(void *user, int channel, const char *text, size_t n);

/* Reads a reply's ids as they come: text in the think channel is reasoning, text in the
 * response channel is content; structure tokens move between channels; a stop id ends it;
 * every other id, specials included, is text. */
typedef struct chat_parser {
    const chat_format *f;
    chat_state state;
    int in_tag, tag_is_open; /* inside <|open|>... or <|close|>... before its <|sep|> */
    strbuf tag;              /* the tag's bytes so far */
    k3_detokenize_stream stream;
    chat_emit_fn emit;
    void *user;
} chat_parser;

void chat_parser_init(chat_parser *p, const chat_format *f, int thinking, chat_emit_fn emit, void *user);
void chat_parser_feed(chat_parser *p, int32_t id);
/* Emits the bytes still held (an incomplete character at the very end). */
void chat_parser_finish(chat_parser *p);
void chat_parser_free(chat_parser *p);

#endif
