/* chat.c - the K3 chat format: rendering and reply parsing (see chat.h). Every rule here
 * mirrors server/chat/render.ts; a change to one is a change to both. */
#include "chat.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void chat_ids_free(chat_ids *ids) {
    free(ids->v);
    memset(ids, 0, sizeof *ids);
}

static void push_id(chat_ids *ids, int32_t id) {
    if (ids->failed)
        return;
    if (ids->n == ids->cap) {
        const size_t cap = ids->cap ? ids->cap * 2 : 256;
        int32_t *grown = realloc(ids->v, cap * sizeof *grown);
        if (!grown) {
            ids->failed = 1;
            return;
        }
        ids->v = grown;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
}

k3_status chat_format_init(chat_format *f, k3_tokenizer *tok, char *detail, size_t detail_size) {
    memset(f, 0, sizeof *f);
    f->tok = tok;
    static const char *const names[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
    int32_t *slots[] = {&f->open, &f->close, &f->sep, &f->end_of_msg};
    for (int i = 0; i < 4; i++) {
        *slots[i] = k3_tokenizer_special_id(tok, names[i]);
        if (*slots[i] < 0) {
            if (detail && detail_size)
                snprintf(detail, detail_size, "the tokenizer has no special token %s: not a K3 chat tokenizer", names[i]);
            return K3_ERR_TOKENIZER;
        }
    }
    const int32_t eos = k3_tokenizer_special_id(tok, "[EOS]");
    if (eos >= 0)
        f->stop_ids[f->n_stop_ids++] = eos;
    f->stop_ids[f->n_stop_ids++] = f->end_of_msg;
    return K3_OK;
}

/* ---- rendering ------------------------------------------------------------------------ */

typedef struct renderer {
    const chat_format *f;
    chat_ids *out;
    k3_status status;
    strbuf scratch;
} renderer;

static void special(renderer *r, int32_t id) {
    if (r->status == K3_OK)
        push_id(r->out, id);
}

/* A piece of text encoded on its own, specials disallowed; empty text adds nothing. */
static void text(renderer *r, const char *s, size_t n) {
    if (r->status != K3_OK || n == 0)
        return;
    size_t need = 0;
    k3_status s_ = k3_tokenize(r->f->tok, s, n, 0, NULL, 0, &need);
    if (s_ != K3_OK) {
        r->status = s_;
        return;
    }
    while (r->out->cap - r->out->n < need && !r->out->failed) {
        const size_t cap = r->out->cap ? r->out->cap * 2 : 256;
        int32_t *grown = realloc(r->out->v, cap * sizeof *grown);
        if (!grown)
            r->out->failed = 1;
        else {
            r->out->v = grown;
            r->out->cap = cap;
        }
    }
    if (r->out->failed) {
        r->status = K3_ERR_OUT_OF_MEMORY;
        return;
    }
    size_t got = 0;
    s_ = k3_tokenize(r->f->tok, s, n, 0, r->out->v + r->out->n, r->out->cap - r->out->n, &got);
    if (s_ != K3_OK)
        r->status = s_;
    else
        r->out->n += got;
}

static void text0(renderer *r, const char *s) { text(r, s, strlen(s)); }

/* `&` and `"` escaped, as attribute values are. */
static void attribute_value(renderer *r, const char *v) {
    strbuf_clear(&r->scratch);
    for (const char *p = v; *p; p++) {
        if (*p == '&')
            strbuf_puts(&r->scratch, "&amp;");
        else if (*p == '"')
            strbuf_puts(&r->scratch, "&quot;");
        else
            strbuf_append(&r->scratch, p, 1);
    }
    if (r->scratch.failed) {
        r->status = K3_ERR_OUT_OF_MEMORY;
        return;
    }
    text(r, r->scratch.data ? r->scratch.data : "", r->scratch.len);
}

/* <|open|>tag key="value"...<|sep|>, with tag, each ` key`, `="`, value and `"` apart;
 * attrs is a NULL-terminated list of key, value pairs. */
static void open_tag(renderer *r, const char *tag, const char *const *attrs) {
    special(r, r->f->open);
    text0(r, tag);
    for (; attrs && attrs[0]; attrs += 2) {
        char key[64];
        snprintf(key, sizeof key, " %s", attrs[0]);
        text0(r, key);
        text0(r, "=\"");
        attribute_value(r, attrs[1]);
        text0(r, "\"");
    }
    special(r, r->f->sep);
}

static void close_tag(renderer *r, const char *tag) {
    special(r, r->f->close);
    text0(r, tag);
    special(r, r->f->sep);
}

static const char *const THINKING_EFFORT_TEXT =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
    "supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=%s`.";

k3_status chat_render(const chat_format *f, const chat_message *messages, size_t n_messages, int thinking,
                      const char *effort, int generation_prompt, chat_ids *out) {
    renderer r = {.f = f, .out = out, .status = K3_OK};
    strbuf_init(&r.scratch);
    if (thinking) {
        static const char *const attrs[] = {"role", "system", "type", "thinking-effort", NULL};
        open_tag(&r, "message", attrs);
        strbuf effort_text;
        strbuf_init(&effort_text);
        strbuf_printf(&effort_text, THINKING_EFFORT_TEXT, effort ? effort : "max");
        if (effort_text.failed)
            r.status = K3_ERR_OUT_OF_MEMORY;
        else
            text(&r, effort_text.data, effort_text.len);
        strbuf_free(&effort_text);
        close_tag(&r, "message");
        special(&r, f->end_of_msg);
    }
    for (size_t i = 0; i < n_messages; i++) {
        const chat_message *m = &messages[i];
        if (m->role == CHAT_ASSISTANT) {
            static const char *const attrs[] = {"role", "assistant", NULL};
            open_tag(&r, "message", attrs);
            if (thinking) {
                open_tag(&r, "think", NULL);
                text(&r, m->reasoning ? m->reasoning : "", m->reasoning ? m->reasoning_len : 0);
                close_tag(&r, "think");
            }
            open_tag(&r, "response", NULL);
            text(&r, m->content, m->content_len);
            close_tag(&r, "response");
        } else {
            const char *const attrs[] = {"role", m->role == CHAT_SYSTEM ? "system" : "user", NULL};
            open_tag(&r, "message", attrs);
            text(&r, m->content, m->content_len);
        }
        close_tag(&r, "message");
        special(&r, f->end_of_msg);
    }
    if (generation_prompt) {
        static const char *const attrs[] = {"role", "assistant", NULL};
        open_tag(&r, "message", attrs);
        open_tag(&r, thinking ? "think" : "response", NULL);
    }
    strbuf_free(&r.scratch);
    if (r.status == K3_OK && out->failed)
        r.status = K3_ERR_OUT_OF_MEMORY;
    return r.status;
}

/* ---- reply parsing -------------------------------------------------------------------- */

void chat_parser_init(chat_parser *p, const chat_format *f, int thinking, chat_emit_fn emit, void *user) {
    memset(p, 0, sizeof *p);
    p->f = f;
    p->state = thinking ? CHAT_STATE_THINK : CHAT_STATE_RESPONSE;
    strbuf_init(&p->tag);
    p->emit = emit;
    p->user = user;
}

void chat_parser_free(chat_parser *p) { strbuf_free(&p->tag); }

static void emit(chat_parser *p, const char *text, size_t n) {
    if (!n)
        return;
    if (p->state == CHAT_STATE_THINK)
        p->emit(p->user, CHAT_REASONING, text, n);
    else if (p->state == CHAT_STATE_RESPONSE)
        p->emit(p->user, CHAT_CONTENT, text, n);
}

static void flush(chat_parser *p) {
    char held[4];
    const size_t n = k3_detokenize_stream_end(&p->stream, held);
    emit(p, held, n);
}

/* The code point length of a whitespace character at s (as JavaScript's String.prototype.trim
 * counts whitespace and line terminators), or 0. */
static size_t js_space(const unsigned char *s, size_t n) {
    if (n >= 1 && (s[0] == ' ' || (s[0] >= 0x09 && s[0] <= 0x0D)))
        return 1;
    if (n >= 2 && s[0] == 0xC2 && s[1] == 0xA0)
        return 2;
    if (n >= 3) {
        const unsigned cp = (unsigned)(s[0] & 0x0F) << 12 | (unsigned)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if ((s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
            (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
             cp == 0x205F || cp == 0x3000 || cp == 0xFEFF))
            return 3;
    }
    return 0;
}

/* The tag's name: its text trimmed, up to the first space. Compared only against ASCII
 * names, so bytes that are not UTF-8 simply never match. */
static int tag_is(const chat_parser *p, const char *name) {
    const unsigned char *s = (const unsigned char *)(p->tag.data ? p->tag.data : "");
    const size_t n = p->tag.len;
    size_t first = n, last = 0; /* [first, last): the text without surrounding whitespace */
    for (size_t i = 0; i < n;) {
        const size_t w = js_space(s + i, n - i);
        if (w) {
            i += w;
            continue;
        }
        size_t ill;
        size_t len = utf8_decode(s + i, n - i, NULL, &ill);
        if (!len)
            len = ill;
        if (first == n)
            first = i;
        i += len;
        last = i;
    }
    if (first >= last)
        return name[0] == 0;
    const unsigned char *space = memchr(s + first, ' ', last - first);
    const size_t len = space ? (size_t)(space - (s + first)) : last - first;
    return len == strlen(name) && !memcmp(s + first, name, len);
}

static void enter(chat_parser *p) {
    if (p->tag_is_open) {
        if (tag_is(p, "think"))
            p->state = CHAT_STATE_THINK;
        else if (tag_is(p, "response"))
            p->state = CHAT_STATE_RESPONSE;
        else if (tag_is(p, "tools"))
            p->state = CHAT_STATE_TOOLS;
    } else if (tag_is(p, "think"))
        p->state = CHAT_STATE_BETWEEN;
    else if (tag_is(p, "response") || tag_is(p, "tools"))
        p->state = CHAT_STATE_AFTER_RESPONSE;
    else if (tag_is(p, "message"))
        p->state = CHAT_STATE_DONE;
}

void chat_parser_feed(chat_parser *p, int32_t id) {
    if (p->state == CHAT_STATE_ENDED)
        return;
    for (int i = 0; i < p->f->n_stop_ids; i++)
        if (id == p->f->stop_ids[i]) {
            flush(p);
            p->state = CHAT_STATE_ENDED;
            return;
        }
    if (id == p->f->open || id == p->f->close) {
        flush(p);
        p->in_tag = 1;
        p->tag_is_open = id == p->f->open;
        strbuf_clear(&p->tag);
    } else if (p->in_tag) {
        if (id == p->f->sep) {
            enter(p);
            p->in_tag = 0;
        } else {
            size_t len = 0;
            const char *bytes = k3_tokenizer_token(p->f->tok, id, &len);
            if (bytes)
                strbuf_append(&p->tag, bytes, len);
        }
    } else {
        char out[K3_TOKEN_MAX_BYTES + 3];
        size_t n = 0;
        if (k3_detokenize_stream_next(p->f->tok, &p->stream, id, out, sizeof out, &n) == K3_OK)
            emit(p, out, n);
    }
}

void chat_parser_finish(chat_parser *p) { flush(p); }
