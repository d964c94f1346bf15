/* openai.c - the OpenAI-compatible request bodies and answers of `k3 serve` (see openai.h).
 * Every refusal message is the one clients have always seen from k3 serve. */
#include "openai.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3.h"

static int refuse(openai_error *err, int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int refuse(openai_error *err, int status, const char *code, const char *fmt, ...) {
    err->status = status;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- reading requests ---------------------------------------------------------------------- */

static int read_common(const json_value *root, const char *model, openai_common *out, openai_error *err) {
    const json_value *v;
    if ((v = json_get(root, "model")) && !json_is_null(v)) {
        size_t len;
        const char *name = json_string(v, &len);
        if (!name)
            return refuse(err, 400, NULL, "'model' must be a string");
        if (strcmp(name, model))
            return refuse(err, 404, "model_not_found",
                          "The model '%.200s' does not exist; this server serves '%s' (GET /v1/models).", name, model);
    }
    double t = 0;
    if ((v = json_get(root, "temperature")) && !json_is_null(v) && (!json_number(v, &t) || t != 0))
        return refuse(err, 400, NULL, "k3 serve decodes greedily: 'temperature' must be 0 or absent");
    int64_t n = 1;
    if ((v = json_get(root, "n")) && !json_is_null(v) && (!json_int(v, 1, 1, &n)))
        return refuse(err, 400, NULL, "'n' must be 1: k3 serve answers one choice per request");
    static const char *const penalties[] = {"presence_penalty", "frequency_penalty", "repetition_penalty"};
    for (int i = 0; i < 3; i++) {
        double p = 0;
        if ((v = json_get(root, penalties[i])) && !json_is_null(v) &&
            (!json_number(v, &p) || p != (i == 2 ? 1.0 : 0.0)))
            return refuse(err, 400, NULL, "'%s' is not supported (greedy decoding only)", penalties[i]);
    }
    bool b = false;
    if ((v = json_get(root, "stream")) && !json_is_null(v) && !json_bool(v, &b))
        return refuse(err, 400, NULL, "'stream' must be a boolean");
    out->stream = b;
    const json_value *so = json_get(root, "stream_options");
    bool usage = false;
    if (so && !json_is_null(so) &&
        (json_type(so) != JSON_OBJECT || ((v = json_get(so, "include_usage")) && !json_is_null(v) && !json_bool(v, &usage))))
        return refuse(err, 400, NULL, "'stream_options' must be an object with a boolean 'include_usage'");
    out->include_usage = usage;
    bool continuous = false;
    if (so && !json_is_null(so) && (v = json_get(so, "continuous_usage_stats")) && !json_is_null(v) && !json_bool(v, &continuous))
        return refuse(err, 400, NULL, "'stream_options.continuous_usage_stats' must be a boolean");
    out->continuous_usage = continuous;
    bool ids = false;
    if ((v = json_get(root, "return_token_ids")) && !json_is_null(v) && !json_bool(v, &ids))
        return refuse(err, 400, NULL, "'return_token_ids' must be a boolean");
    out->return_token_ids = ids;
    int64_t mt = -1;
    const json_value *max = json_get(root, "max_completion_tokens");
    if (!max || json_is_null(max))
        max = json_get(root, "max_tokens");
    if (max && !json_is_null(max) && !json_int(max, 0, INT32_MAX, &mt))
        return refuse(err, 400, NULL, "'max_tokens' must be a non-negative integer");
    out->max_tokens = (int)mt;
    return 0;
}

/* The prompt of /v1/completions: ids, or a string (r->text) that is tokenized later, under
 * the engine (the tokenizer is used by one thread at a time). */
static int read_prompt(const json_value *root, int vocab, openai_completion *r, openai_error *err) {
    const json_value *p = json_get(root, "prompt");
    if (json_type(p) == JSON_ARRAY && json_len(p) == 1 &&
        (json_type(json_at(p, 0)) == JSON_STRING || json_type(json_at(p, 0)) == JSON_ARRAY))
        p = json_at(p, 0); /* a batch of one */
    if (json_type(p) == JSON_STRING) {
        r->text = json_string(p, &r->text_len);
        return 0;
    }
    if (json_type(p) != JSON_ARRAY)
        return refuse(err, 400, NULL, "'prompt' must be a string or an array of token ids (one prompt per request)");
    const size_t n = json_len(p);
    r->ids = malloc(sizeof *r->ids * (n ? n : 1));
    if (!r->ids)
        return refuse(err, 500, NULL, "out of memory for %zu prompt ids", n);
    for (size_t i = 0; i < n; i++) {
        int64_t id;
        if (!json_int(json_at(p, i), 0, vocab - 1, &id))
            return refuse(err, 400, NULL, "'prompt'[%zu] is not a token id (an integer in 0..%d)", i, vocab - 1);
        r->ids[i] = (int32_t)id;
    }
    r->n_ids = (int)n;
    return 0;
}

static int read_completion(const json_value *root, const char *model, int vocab, openai_completion *r, openai_error *err) {
    const json_value *v;
    if (read_common(root, model, &r->common, err))
        return -1;
    if (r->common.max_tokens < 0)
        r->common.max_tokens = 16; /* the OpenAI default for completions */
    static const char *const unsupported[] = {"suffix", "echo", "logprobs", "best_of"};
    for (int i = 0; i < 4; i++) {
        bool flag = false;
        int64_t one = 0;
        size_t len = 0;
        v = json_get(root, unsupported[i]);
        if (!v || json_is_null(v) || (json_bool(v, &flag) && !flag) || (i == 3 && json_int(v, 1, 1, &one)) || (i == 2 && json_int(v, 0, 0, &one)) ||
            (json_string(v, &len) && len == 0))
            continue;
        return refuse(err, 400, NULL, "'%s' is not supported by k3 serve (K3 has no fill-in-the-middle tokens; greedy, one choice)",
                      unsupported[i]);
    }
    if ((v = json_get(root, "stop")) && !json_is_null(v)) {
        const json_value *one = json_type(v) == JSON_STRING ? v : NULL;
        const size_t count = one ? 1 : json_len(v);
        if ((!one && json_type(v) != JSON_ARRAY) || count > OPENAI_MAX_STOP_STRINGS)
            return refuse(err, 400, NULL, "'stop' must be a string or an array of at most %d strings", OPENAI_MAX_STOP_STRINGS);
        for (size_t i = 0; i < count; i++) {
            size_t len = 0;
            const char *str = json_string(one ? one : json_at(v, i), &len);
            if (!str)
                return refuse(err, 400, NULL, "'stop' must hold strings");
            if (len) {
                r->stop[r->n_stop] = str;
                r->stop_len[r->n_stop++] = len;
            }
        }
    }
    if ((v = json_get(root, "k3_checkpoints")) && !json_is_null(v)) {
        if (json_type(v) != JSON_ARRAY || json_len(v) > OPENAI_MAX_CHECKPOINTS)
            return refuse(err, 400, NULL, "'k3_checkpoints' must be an array of at most %d prompt positions", OPENAI_MAX_CHECKPOINTS);
        for (size_t i = 0; i < json_len(v); i++) {
            int64_t b;
            if (!json_int(json_at(v, i), 0, INT32_MAX, &b))
                return refuse(err, 400, NULL, "'k3_checkpoints'[%zu] is not a prompt position", i);
            r->checkpoints[r->n_checkpoints++] = (int)b;
        }
    }
    /* k3_heal: true backs a text prompt off to its last piece; a string is the text the
     * client already took off the prompt's end. */
    bool heal = false;
    const char *given = (v = json_get(root, "k3_heal")) ? json_string(v, &r->healed_len) : NULL;
    if (v && !json_is_null(v) && !given && !json_bool(v, &heal))
        return refuse(err, 400, NULL, "'k3_heal' must be a boolean or the string the prompt was backed off by");
    if (given && (r->healed_len == 0 || r->healed_len > K3_TOKEN_MAX_BYTES * 16))
        return refuse(err, 400, NULL, "'k3_heal' holds %zu bytes: 1 to %d", r->healed_len, K3_TOKEN_MAX_BYTES * 16);
    r->heal = heal;
    r->healed = given;
    if (!given)
        r->healed_len = 0;
    if (read_prompt(root, vocab, r, err))
        return -1;
    if (heal && !r->text)
        return refuse(err, 400, NULL, "'k3_heal': true backs a text prompt off to its last piece: the prompt must be a string");
    return 0;
}

int openai_read_completion(const json_value *root, const char *model, int vocab, openai_completion *out,
                           openai_error *err) {
    memset(out, 0, sizeof *out);
    if (read_completion(root, model, vocab, out, err) == 0)
        return 0;
    openai_completion_free(out);
    return -1;
}

void openai_completion_free(openai_completion *r) {
    free(r->ids);
    r->ids = NULL;
}

/* A message's text: a string, null, or an array of {"type":"text","text":...} parts
 * (joined into *owned); NULL after a refusal. */
static const char *message_text(const json_value *v, size_t i, const char *field, size_t *len, char **owned,
                                openai_error *err) {
    *owned = NULL;
    *len = 0;
    if (!v || json_is_null(v))
        return "";
    if (json_type(v) == JSON_STRING)
        return json_string(v, len);
    if (json_type(v) == JSON_ARRAY) {
        strbuf b;
        strbuf_init(&b);
        for (size_t k = 0; k < json_len(v); k++) {
            const json_value *part = json_at(v, k);
            size_t n;
            const char *t = json_string(json_get(part, "text"), &n);
            if (!json_string_is(json_get(part, "type"), "text") || !t) {
                strbuf_free(&b);
                refuse(err, 400, NULL, "messages[%zu].%s: only text parts ({\"type\":\"text\",\"text\":...}) are supported", i,
                       field);
                return NULL;
            }
            strbuf_append(&b, t, n);
        }
        strbuf_append(&b, "", 0);
        if (b.failed) {
            strbuf_free(&b);
            refuse(err, 500, NULL, "out of memory");
            return NULL;
        }
        *owned = b.data;
        *len = b.len;
        return b.data;
    }
    refuse(err, 400, NULL, "messages[%zu].%s must be a string, null or an array of text parts", i, field);
    return NULL;
}

static int read_chat(const json_value *root, const char *model, openai_chat *r, openai_error *err) {
    const json_value *v;
    if (read_common(root, model, &r->common, err))
        return -1;
    if ((v = json_get(root, "stop")) && !json_is_null(v) && !(json_type(v) == JSON_ARRAY && json_len(v) == 0))
        return refuse(err, 400, NULL, "'stop' is supported by /v1/completions only; chat replies end at the model's stop tokens");
    bool thinking = true;
    const json_value *kw = json_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw) &&
        (json_type(kw) != JSON_OBJECT || ((v = json_get(kw, "thinking")) && !json_is_null(v) && !json_bool(v, &thinking))))
        return refuse(err, 400, NULL, "'chat_template_kwargs' must be an object with a boolean 'thinking'");
    r->thinking = thinking;
    r->effort = "max";
    if ((v = json_get(root, "reasoning_effort")) && !json_is_null(v)) {
        static const char *const efforts[] = {"low", "medium", "high", "max"};
        r->effort = NULL;
        for (int i = 0; i < 4; i++)
            if (json_string_is(v, efforts[i]))
                r->effort = efforts[i];
        if (!r->effort)
            return refuse(err, 400, NULL, "'reasoning_effort' must be one of low, medium, high, max");
    }
    const json_value *m = json_get(root, "messages");
    if (json_type(m) != JSON_ARRAY || json_len(m) == 0)
        return refuse(err, 400, NULL, "'messages' must be a non-empty array");
    const size_t n = json_len(m);
    r->messages = calloc(n, sizeof *r->messages);
    r->owned = calloc(n * 2, sizeof *r->owned);
    if (!r->messages || !r->owned)
        return refuse(err, 500, NULL, "out of memory for %zu messages", n);
    r->n_messages = n;
    for (size_t i = 0; i < n; i++) {
        const json_value *msg = json_at(m, i);
        const json_value *role = json_get(msg, "role");
        chat_message *out = &r->messages[i];
        if (json_type(msg) != JSON_OBJECT)
            return refuse(err, 400, NULL, "messages[%zu] must be an object", i);
        if (json_string_is(role, "system") || json_string_is(role, "developer"))
            out->role = CHAT_SYSTEM;
        else if (json_string_is(role, "user"))
            out->role = CHAT_USER;
        else if (json_string_is(role, "assistant"))
            out->role = CHAT_ASSISTANT;
        else
            return refuse(err, 400, NULL, "messages[%zu].role must be system, developer, user or assistant (tools are not supported)", i);
        if ((v = json_get(msg, "tool_calls")) && !json_is_null(v) && !(json_type(v) == JSON_ARRAY && json_len(v) == 0))
            return refuse(err, 400, NULL, "messages[%zu].tool_calls: tools are not supported", i);
        out->content = message_text(json_get(msg, "content"), i, "content", &out->content_len, &r->owned[2 * i], err);
        if (!out->content)
            return -1;
        const json_value *reasoning = json_get(msg, "reasoning_content");
        if (!reasoning || json_is_null(reasoning))
            reasoning = json_get(msg, "reasoning");
        out->reasoning = message_text(reasoning, i, "reasoning_content", &out->reasoning_len, &r->owned[2 * i + 1], err);
        if (!out->reasoning)
            return -1;
    }
    return 0;
}

int openai_read_chat(const json_value *root, const char *model, openai_chat *out, openai_error *err) {
    memset(out, 0, sizeof *out);
    if (read_chat(root, model, out, err) == 0)
        return 0;
    openai_chat_free(out);
    return -1;
}

void openai_chat_free(openai_chat *r) {
    if (r->owned)
        for (size_t i = 0; i < r->n_messages * 2; i++)
            free(r->owned[i]);
    free(r->owned);
    free(r->messages);
    r->owned = NULL;
    r->messages = NULL;
    r->n_messages = 0;
}

/* ---- writing answers ----------------------------------------------------------------------- */

const char *openai_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 500:
    case 503: return "server_error";
    default: return "invalid_request_error";
    }
}

void openai_error_json(strbuf *b, int status, const char *code, const char *message) {
    strbuf_puts(b, "{\"error\":{\"message\":");
    strbuf_json_string(b, message, strlen(message));
    strbuf_printf(b, ",\"type\":\"%s\",\"param\":null,\"code\":", openai_error_type(status));
    if (code)
        strbuf_json_string(b, code, strlen(code));
    else
        strbuf_printf(b, "%d", status);
    strbuf_puts(b, "}}");
}

void openai_usage_json(strbuf *b, int prompt, int generated, int cached) {
    strbuf_printf(b,
                  "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                  "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                  prompt, generated, prompt + generated, cached);
}

void openai_ids_json(strbuf *b, const char *key, const int32_t *ids, size_t n) {
    strbuf_printf(b, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        strbuf_printf(b, i ? ",%d" : "%d", ids[i]);
    strbuf_puts(b, "]");
}

void openai_chunk_begin(strbuf *b, const openai_reply *r) {
    strbuf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%ld,\"model\":", r->id,
                  r->chat ? "chat.completion.chunk" : "text_completion", r->created);
    strbuf_json_string(b, r->model, strlen(r->model));
    strbuf_puts(b, ",\"choices\":[");
}

void openai_chunk_piece(strbuf *b, const openai_reply *r, int channel, const char *text, size_t n) {
    if (r->chat) {
        strbuf_printf(b, "{\"index\":0,\"delta\":{\"%s\":", channel == CHAT_REASONING ? "reasoning_content" : "content");
        strbuf_json_string(b, text, n);
        strbuf_puts(b, "},\"logprobs\":null,\"finish_reason\":null}]");
    } else {
        strbuf_puts(b, "{\"index\":0,\"text\":");
        strbuf_json_string(b, text, n);
        strbuf_puts(b, ",\"logprobs\":null,\"finish_reason\":null}]");
    }
}

void openai_chunk_role(strbuf *b) {
    strbuf_puts(b, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]");
}

void openai_chunk_finish(strbuf *b, const openai_reply *r, const char *finish_reason) {
    strbuf_printf(b, "{\"index\":0,%s\"logprobs\":null,\"finish_reason\":\"%s\"}]", r->chat ? "\"delta\":{}," : "\"text\":\"\",",
                  finish_reason);
}

void openai_answer_json(strbuf *b, const openai_reply *r, const openai_answer *a) {
    strbuf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%ld,\"model\":", r->id,
                  r->chat ? "chat.completion" : "text_completion", r->created);
    strbuf_json_string(b, r->model, strlen(r->model));
    if (a->with_ids) {
        strbuf_puts(b, ",");
        openai_ids_json(b, "prompt_token_ids", a->prompt_ids, a->n_prompt_ids);
    }
    if (r->chat) {
        strbuf_puts(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
        strbuf_json_string(b, a->text, a->text_len);
        strbuf_puts(b, ",\"reasoning_content\":");
        strbuf_json_string(b, a->reasoning, a->reasoning_len);
        strbuf_puts(b, "},");
    } else {
        strbuf_puts(b, ",\"choices\":[{\"index\":0,\"text\":");
        strbuf_json_string(b, a->text, a->text_len);
        strbuf_puts(b, ",");
    }
    if (a->with_ids) {
        openai_ids_json(b, "token_ids", a->ids, a->n_ids);
        strbuf_puts(b, ",");
    }
    strbuf_printf(b, "\"logprobs\":null,\"finish_reason\":\"%s\"}],", a->finish_reason);
    openai_usage_json(b, a->prompt, a->generated, a->cached);
    strbuf_puts(b, "}");
}
