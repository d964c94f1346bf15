/* fuzz_chat.c - the chat-template harness: bytes as a /v1/chat/completions body, read as
 * k3 serve reads it (messages with roles and string contents, chat_template_kwargs.thinking,
 * reasoning_effort), rendered in the K3 chat format by chat_render with the embedded default
 * model's tokenizer (media/models/k3-mini, or $K3_FUZZ_MODEL), and the rendering read back
 * by the reply parser. Text that spells a special token must stay text: the rendering holds
 * no more <|open|> tokens than the format itself puts in, and its ids decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "fuzz.h"
#include "json.h"
#include "k3.h"

static k3_tokenizer *tok;
static chat_format fmt;

static const char *const dictionary[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "[EOS]", "\"role\": \"user\"",
                                         "\"role\": \"assistant\"", "\"role\": \"system\"", "\"content\": ",
                                         "\"reasoning_content\": ", "message", "think", "response", "&quot;", NULL};

static int init(const char *repo) {
    char dir[2048], detail[1024];
    const char *env = getenv("K3_FUZZ_MODEL");
    if (env)
        snprintf(dir, sizeof dir, "%s", env);
    else
        snprintf(dir, sizeof dir, "%s/media/models/k3-mini", repo);
    if (k3_tokenizer_open(dir, &tok, detail, sizeof detail) != K3_OK ||
        chat_format_init(&fmt, tok, detail, sizeof detail) != K3_OK) {
        fprintf(stderr, "k3-fuzz chat: cannot open the tokenizer in %s: %s\n", dir, detail);
        return 1;
    }
    return 0;
}

static void on_text(void *user, int channel, const char *text, size_t n) {
    size_t *total = user;
    (void)channel;
    (void)text;
    *total += n;
}

static void run(const uint8_t *data, size_t n) {
    json_doc *doc = NULL;
    k3_error err;
    if (json_parse((const char *)data, n, "body", &doc, &err) != K3_OK)
        return;
    const json_value *root = json_root(doc), *m = json_get(root, "messages");
    bool thinking = true;
    json_bool(json_get(json_get(root, "chat_template_kwargs"), "thinking"), &thinking);
    const char *effort = "max";
    static const char *const efforts[] = {"low", "medium", "high", "max"};
    for (int i = 0; i < 4; i++)
        if (json_string_is(json_get(root, "reasoning_effort"), efforts[i]))
            effort = efforts[i];
    const size_t count = json_len(m) < 64 ? json_len(m) : 64;
    chat_message msgs[64];
    size_t n_msgs = 0;
    for (size_t i = 0; i < count; i++) {
        const json_value *msg = json_at(m, i), *role = json_get(msg, "role");
        chat_message c = {CHAT_USER, "", 0, NULL, 0};
        if (json_string_is(role, "system") || json_string_is(role, "developer"))
            c.role = CHAT_SYSTEM;
        else if (json_string_is(role, "assistant"))
            c.role = CHAT_ASSISTANT;
        else if (!json_string_is(role, "user"))
            continue;
        const char *content = json_string(json_get(msg, "content"), &c.content_len);
        c.content = content ? content : "";
        c.reasoning = json_string(json_get(msg, "reasoning_content"), &c.reasoning_len);
        msgs[n_msgs++] = c;
    }
    chat_ids ids = {0};
    const int no_prompt = json_get(root, "k3_no_generation_prompt") != NULL;
    if (chat_render(&fmt, msgs, n_msgs, thinking, effort, !no_prompt, &ids) == K3_OK) {
        /* The format's own <|open|>s: the thinking-effort message, at most three per message
         * (an assistant turn opens message, think and response), two for the prompt. */
        size_t opens = 0;
        for (size_t i = 0; i < ids.n; i++)
            opens += ids.v[i] == fmt.open;
        const size_t most = 1 + 3 * n_msgs + 2;
        if (opens > most)
            fuzz_fail("%zu <|open|> tokens for %zu messages: text became structure", opens, n_msgs);
        size_t bytes = 0;
        if (k3_detokenize(tok, ids.v, ids.n, NULL, 0, &bytes) != K3_OK)
            fuzz_fail("the rendering's %zu ids do not decode", ids.n);
        chat_parser p;
        size_t total = 0;
        chat_parser_init(&p, &fmt, thinking, on_text, &total);
        for (size_t i = 0; i < ids.n; i++)
            chat_parser_feed(&p, ids.v[i]);
        chat_parser_finish(&p);
        chat_parser_free(&p);
    }
    chat_ids_free(&ids);
    json_free(doc);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) { return fuzz_mutate_json(d, n, cap, r); }

const fuzz_harness fuzz_chat = {"chat", "a chat request body -> the K3 chat format (chat_render), read back by the reply parser",
                                init, run, mutate, dictionary, 64 << 10};
