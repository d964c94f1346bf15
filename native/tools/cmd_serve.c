/* cmd_serve.c - `k3 serve MODEL_DIR`: the local engine behind the OpenAI-compatible HTTP
 * API, for other tools and for k3-code's remote backend. One model, one context, one
 * request on the engine at a time; others wait in a bounded FIFO queue, and past it are
 * refused with 429 (503 past the connection limit or while shutting down). Routes:
 * GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions, with
 * server-sent-event streaming. Decoding is greedy; stop ids are [EOS] and <|end_of_msg|>;
 * chat prompts are rendered in the K3 format by tools/chat.c exactly as the language
 * server renders them. Every request syncs the context to its prompt (k3_sync), so a
 * prompt sharing a prefix with an earlier one prefills only the rest, and checkpoints its
 * end (plus any `k3_checkpoints` positions it names). A client that disconnects cancels
 * its request, waiting or running. Binds 127.0.0.1 unless asked otherwise, and refuses a
 * non-loopback address without --allow-non-loopback. Options are described by cli_usage()
 * in main.c. The OpenAI wire format (request bodies, answers, stream chunks) is openai.c's;
 * prefill with checkpoints is serve_checkpoints.c's, a generation request (generate,
 * stream, answer) serve_generate.c's; this file holds the options, the queue, client
 * watching, routing and the connections. It does not sample, batch requests, serve several
 * models, or speak TLS. */
#include <arpa/inet.h>
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "commands.h"
#include "http.h"
#include "json.h"
#include "k3.h"
#include "openai.h"
#include "options.h"
#include "run_memory.h"
#include "serve.h"
#include "serve_generate.h"
#include "strbuf.h"

#define READ_TIMEOUT_MS 30000    /* a whole request must arrive within this */
#define SEND_TIMEOUT_S 10        /* a client that stops reading is dropped after this */
#define LINGER_MS 1000           /* gentle close: how long to drain what the peer still sends */
#define WATCH_MS 50              /* how often a running request looks at its client */
#define THREAD_STACK_BYTES (1024 * 1024)

static atomic_int stopping; /* set by SIGINT / SIGTERM */

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&stopping, 1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) { poll(NULL, 0, ms); }

/* ---- options ---------------------------------------------------------------------------- */

/* 0 to go on, else the exit status (-1: done, exit 0). */
static int parse_options(int argc, char **argv, serve_options *o) {
    if (argc < 2 || argv[1][0] == '-')
        return options_usage_error("k3 serve", "%s", "usage: k3 serve MODEL_DIR [--port N] [--host ADDR] [options]");
    *o = (serve_options){.model_dir = argv[1], .host = "127.0.0.1", .port = 8080, .threads = 1, .batch = K3_BATCH_AUTO,
                         .max_context = 8192, .queue = 16, .max_connections = 128, .spec = 8, .checkpoint_mb = 256,
                         .max_body = 16LL << 20};
    run_memory_init(&o->memory);
    const option table[] = {
        {"--allow-non-loopback", OPTION_FLAG, &o->allow_non_loopback, 0, 0},
        {"--host", OPTION_TEXT, &o->host, 0, 0},
        {"--model-name", OPTION_TEXT, &o->model_name, 0, 0},
        {"--tok", OPTION_TEXT, &o->tok_dir, 0, 0},
        {"--port", OPTION_INT, &o->port, 0, 65535},
        {"--threads", OPTION_INT, &o->threads, 1, 1024},
        {"--batch", OPTION_INT, &o->batch, 0, 4096},
        {"--ctx", OPTION_INT, &o->max_context, 16, 1 << 24},
        {"--queue", OPTION_INT, &o->queue, 0, 4096},
        {"--max-connections", OPTION_INT, &o->max_connections, 1, 4096},
        {"--spec", OPTION_INT, &o->spec, 0, 16},
        {"--checkpoint-mb", OPTION_INT, &o->checkpoint_mb, 0, 1 << 20},
        {"--max-body", OPTION_LONG, &o->max_body, 1024, (double)(1LL << 34)},
    };
    const option_parser parser = {"k3 serve", table, (int)(sizeof table / sizeof table[0]), &o->memory, o->model_dir,
                                  NULL, NULL};
    return options_parse(&parser, argc, argv, 2);
}

/* The address to bind for `host`, and whether it is loopback; refuses (exit 2) a
 * non-loopback one unless allowed. */
static int resolve_host(const serve_options *o, struct sockaddr_storage *addr, socklen_t *len, int *is_loopback) {
    memset(addr, 0, sizeof *addr);
    const char *host = !strcmp(o->host, "localhost") ? "127.0.0.1" : o->host;
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    int loopback;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
        *len = sizeof *v4;
        loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        *len = sizeof *v6;
        static const unsigned char one[16] = {[15] = 1};
        loopback = !memcmp(&v6->sin6_addr, one, 16);
    } else {
        fprintf(stderr, "k3 serve: --host %s: not a numeric IPv4 or IPv6 address (or localhost)\n", o->host);
        return 2;
    }
    if (!loopback && !o->allow_non_loopback) {
        fprintf(stderr,
                "k3 serve: refusing to listen on %s, which is not a loopback address: anyone who can reach it could use "
                "the model. Pass --allow-non-loopback to do it anyway (and set K3_API_KEY).\n",
                o->host);
        return 2;
    }
    *is_loopback = loopback;
    return 0;
}

/* ---- responses -------------------------------------------------------------------------- */

void serve_send_json(conn *c, int status, const strbuf *body, const char *extra_headers) {
    c->status = status;
    if (body->failed) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        c->status = 500;
        http_send_response(c->fd, 500, "application/json", NULL, oom, sizeof oom - 1);
        return;
    }
    http_send_response(c->fd, status, "application/json", extra_headers, body->data ? body->data : "", body->len);
}

void serve_send_error(conn *c, int status, const char *code, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    strbuf b;
    strbuf_init(&b);
    openai_error_json(&b, status, code, message);
    serve_send_json(c, status, &b, status == 429 || status == 503 ? "Retry-After: 1\r\n" : status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL);
    strbuf_free(&b);
}

/* ---- the engine queue ------------------------------------------------------------------- */

static void add_seconds(struct timespec *t, int ms) {
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_nsec += (long)ms * 1000000L;
    t->tv_sec += t->tv_nsec / 1000000000L;
    t->tv_nsec %= 1000000000L;
}

static void unlink_waiter(server *s, waiter *w) {
    for (waiter **p = &s->head; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            if (s->tail == w) {
                s->tail = NULL;
                for (waiter *q = s->head; q; q = q->next)
                    s->tail = q;
            }
            s->n_waiting--;
            return;
        }
}

int serve_acquire_engine(conn *c) {
    server *s = c->s;
    waiter w = {NULL, 0};
    pthread_mutex_lock(&s->mu);
    if (!s->busy && !s->head) {
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (s->n_waiting >= s->o.queue) {
        s->refused++;
        pthread_mutex_unlock(&s->mu);
        return 429;
    }
    if (s->tail)
        s->tail->next = &w;
    else
        s->head = &w;
    s->tail = &w;
    s->n_waiting++;
    int rc = 0;
    while (!w.granted) {
        struct timespec until;
        add_seconds(&until, 100);
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
        if (w.granted)
            break;
        if (atomic_load(&stopping)) {
            rc = 503;
        } else {
            pthread_mutex_unlock(&s->mu);
            const int gone = http_peer_gone(c->fd);
            pthread_mutex_lock(&s->mu);
            if (w.granted)
                break;
            if (gone)
                rc = -1;
        }
        if (rc) {
            unlink_waiter(s, &w);
            pthread_mutex_unlock(&s->mu);
            return rc;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void serve_release_engine(server *s) {
    int count = 0;
    size_t bytes = 0;
    k3_checkpoint_usage(s->ctx, &count, &bytes); /* read while the engine is still ours */
    pthread_mutex_lock(&s->mu);
    s->checkpoints = count;
    s->checkpoint_bytes = bytes;
    s->served++;
    waiter *next = s->head;
    if (next) {
        s->head = next->next;
        if (!s->head)
            s->tail = NULL;
        s->n_waiting--;
        next->granted = 1; /* busy stays set: the engine passes straight to it */
        pthread_cond_broadcast(&s->cv);
    } else {
        s->busy = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- watching the client while the engine runs ------------------------------------------ */

/* Polls the client; once it has gone (or the server is stopping), cancels the engine's
 * call, again and again, because k3_cancel reaches only a call already running. */
static void *watch_main(void *arg) {
    watch *w = arg;
    while (!atomic_load(&w->done)) {
        if (!atomic_load(&w->gone) && (http_wait_peer_gone(w->fd, WATCH_MS) || atomic_load(&stopping)))
            atomic_store(&w->gone, 1);
        if (atomic_load(&w->gone)) {
            k3_cancel(w->s->ctx);
            sleep_ms(10);
        }
    }
    return NULL;
}

void serve_watch_start(watch *w, server *s, int fd) {
    w->s = s;
    w->fd = fd;
    atomic_init(&w->gone, 0);
    atomic_init(&w->done, 0);
    w->started = pthread_create(&w->thread, NULL, watch_main, w) == 0;
}

void serve_watch_stop(watch *w) {
    atomic_store(&w->done, 1);
    if (w->started)
        pthread_join(w->thread, NULL);
}
/* ---- routing ---------------------------------------------------------------------------- */

/* Compares without an early exit, so the time taken says nothing about the key. */
static int same_secret(const char *a, const char *b) {
    const size_t la = strlen(a), lb = strlen(b);
    unsigned diff = la != lb;
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)b[i % (lb ? lb : 1)];
    return diff == 0;
}

/* 200 {"status":"ok", ...} while the model is the one loaded; 503 {"status":"error",
 * "error":{"type":"io","message":...}, ...} once a shard changed on disk under it (every
 * request then fails with that message until k3 serve is restarted). */
static void handle_health(conn *c) {
    server *s = c->s;
    char changed[1024];
    const int ok = k3_model_check(s->model, changed, sizeof changed) == K3_OK;
    strbuf b;
    strbuf_init(&b);
    if (ok) {
        strbuf_puts(&b, "{\"status\":\"ok\",");
    } else {
        strbuf_puts(&b, "{\"status\":\"error\",\"error\":{\"type\":\"io\",\"message\":");
        strbuf_json_string(&b, changed, strlen(changed));
        strbuf_puts(&b, "},");
    }
    pthread_mutex_lock(&s->mu);
    strbuf_printf(&b,
                  "\"busy\":%s,\"queued\":%d,\"queue\":%d,\"served\":%lu,\"refused\":%lu,"
                  "\"evicted\":%lu,\"connections\":%d,\"checkpoints\":%d,\"checkpoint_bytes\":%zu,\"checkpoint_limit\":%zu}",
                  s->busy ? "true" : "false", s->n_waiting, s->o.queue, s->served, s->refused, s->evicted, s->connections - s->closing,
                  s->checkpoints,
                  s->checkpoint_bytes, (size_t)s->o.checkpoint_mb << 20);
    pthread_mutex_unlock(&s->mu);
    serve_send_json(c, ok ? 200 : 503, &b, NULL);
    strbuf_free(&b);
}

static void handle_models(conn *c) {
    server *s = c->s;
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    strbuf_json_string(&b, s->model_name, strlen(s->model_name));
    strbuf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"k3\",\"max_model_len\":%d}]}", (long)s->started,
                  s->o.max_context);
    serve_send_json(c, 200, &b, NULL);
    strbuf_free(&b);
}

static void route(conn *c, http_request *req) {
    static const struct {
        const char *path, *method;
        int generation;
    } routes[] = {{"/health", "GET", 0},
                  {"/v1/models", "GET", 0},
                  {"/v1/completions", "POST", 1},
                  {"/v1/chat/completions", "POST", 1}};
    int r = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(req->path, routes[i].path))
            r = i;
    c->route = r >= 0 ? routes[r].path : "(unknown)";
    if (r < 0) {
        serve_send_error(c, 404, "not_found", "no route %.200s %.200s: this server answers GET /health, GET /v1/models, "
                   "POST /v1/completions and POST /v1/chat/completions", req->method, req->path);
        return;
    }
    if (strcmp(req->method, routes[r].method)) {
        char allow[64];
        snprintf(allow, sizeof allow, "Allow: %s\r\n", routes[r].method);
        strbuf b;
        strbuf_init(&b);
        char message[160];
        snprintf(message, sizeof message, "%s takes %s, not %.16s", routes[r].path, routes[r].method, req->method);
        openai_error_json(&b, 405, "method_not_allowed", message);
        serve_send_json(c, 405, &b, allow);
        strbuf_free(&b);
        return;
    }
    if (r > 0 && c->s->api_key) {
        /* The scheme is case-insensitive (RFC 9110 §11.1), then one or more spaces. */
        const char *auth = req->authorization;
        const int scheme = !strncasecmp(auth, "Bearer", 6) && (auth[6] == ' ' || auth[6] == '\t');
        const char *key = auth + (scheme ? 6 : 0);
        while (*key == ' ' || *key == '\t')
            key++;
        if (!scheme || !same_secret(key, c->s->api_key)) {
            serve_send_error(c, 401, "invalid_api_key", "a valid API key is needed (Authorization: Bearer ...)");
            return;
        }
    }
    if (r == 0) {
        handle_health(c);
        return;
    }
    if (r == 1) {
        handle_models(c);
        return;
    }
    json_doc *doc = NULL;
    k3_error err;
    if (json_parse(req->body, req->body_len, "the request body", &doc, &err) != K3_OK) {
        serve_send_error(c, err.status == K3_ERR_OUT_OF_MEMORY ? 500 : 400, NULL, "%s", err.detail);
        return;
    }
    const json_value *root = json_root(doc);
    if (json_type(root) != JSON_OBJECT)
        serve_send_error(c, 400, NULL, "the request body must be a JSON object");
    else if (routes[r].generation && r == 2)
        serve_handle_completions(c, root);
    else
        serve_handle_chat(c, root);
    json_free(doc);
}

/* Takes c out of the readers list (under s->mu). */
static void unlink_reader(server *s, conn *c) {
    if (!c->reading)
        return;
    *(c->prev ? &c->prev->next : &s->readers) = c->next;
    *(c->next ? &c->next->prev : &s->readers_tail) = c->prev;
    c->prev = c->next = NULL;
    c->reading = 0;
}

/* When every connection is taken, the one that has been reading its request longest gives
 * way: its read ends (shutdown of the read side), it is answered 408, and the newcomer is
 * served. So clients that open connections and send nothing, or trickle bytes, cannot keep
 * /health or anyone else out. Returns 1 when one was evicted. Under s->mu; the evicted
 * thread closes its own fd only after leaving the list, so the fd is still its own here. */
static int evict_slowest_reader(server *s) {
    conn *c = s->readers;
    if (!c)
        return 0;
    unlink_reader(s, c);
    c->evicted = 1;
    s->evicted++;
    s->closing++;
    shutdown(c->fd, SHUT_RD);
    return 1;
}

static void *connection_main(void *arg) {
    conn *c = arg;
    server *s = c->s;
    const struct timeval send_timeout = {.tv_sec = SEND_TIMEOUT_S};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    http_request req;
    char why[256];
    int rc = http_read_request(c->fd, (size_t)s->o.max_body, READ_TIMEOUT_MS, &req, why, sizeof why);
    pthread_mutex_lock(&s->mu);
    unlink_reader(s, c);
    const int evicted = c->evicted;
    pthread_mutex_unlock(&s->mu);
    if (evicted) {
        if (rc == 0)
            http_request_free(&req);
        rc = 408;
        snprintf(why, sizeof why, "the request did not arrive in the %.1f s before the server needed the connection "
                 "for another (%d connections, k3 serve --max-connections)", now_s() - c->t0, s->o.max_connections);
    }
    if (rc > 0) {
        c->route = "(unread)";
        serve_send_error(c, rc, NULL, "%s", why);
    } else if (rc == 0) {
        route(c, &req);
        http_request_free(&req);
    }
    if (rc >= 0 && c->prompt_tokens >= 0)
        fprintf(stderr, "k3 serve: %s %s %d in %.3f s: prompt %d tokens (%d cached), generated %d\n", rc == 0 ? req.method : "-",
                c->route ? c->route : "-", c->status, now_s() - c->t0, c->prompt_tokens, c->cached_tokens, c->generated);
    else if (rc >= 0)
        fprintf(stderr, "k3 serve: %s %s %d in %.3f s\n", rc == 0 ? req.method : "-", c->route ? c->route : "-", c->status,
                now_s() - c->t0);
    http_close_gently(c->fd, LINGER_MS);
    pthread_mutex_lock(&s->mu);
    s->connections--;
    s->closing -= evicted;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(c);
    return NULL;
}

/* Accepts connections until a signal asks to stop; each gets its own thread. Past
 * --max-connections the slowest reader gives way (evict_slowest_reader); only when every
 * connection has a whole request (or twice the limit are still closing after 200 ms) is it
 * a 503. */
static void accept_loop(server *s) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
    while (!atomic_load(&stopping)) {
        struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        const int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        conn *c = calloc(1, sizeof *c);
        pthread_mutex_lock(&s->mu);
        int full = !c || (s->connections >= s->o.max_connections && !evict_slowest_reader(s));
        /* Evicted connections end within milliseconds; wait for them rather than let a burst
         * of slow clients past twice the limit of threads. */
        for (int waits = 0; !full && s->connections >= 2 * s->o.max_connections; waits++) {
            if (!s->closing || waits == 20) {
                full = 1;
                break;
            }
            struct timespec t;
            add_seconds(&t, 10);
            pthread_cond_timedwait(&s->cv, &s->mu, &t);
        }
        if (!full) {
            s->connections++;
            c->s = s;
            c->fd = fd;
            c->t0 = now_s();
            c->prompt_tokens = -1;
            c->reading = 1;
            c->prev = s->readers_tail;
            *(c->prev ? &c->prev->next : &s->readers) = c;
            s->readers_tail = c;
        } else
            s->refused++;
        pthread_mutex_unlock(&s->mu);
        if (!full) {
            if (pthread_create(&(pthread_t){0}, &attr, connection_main, c) == 0)
                continue;
            pthread_mutex_lock(&s->mu);
            unlink_reader(s, c);
            s->connections--;
            pthread_mutex_unlock(&s->mu);
        }
        free(c);
        /* No thread for it: a short 503 from here, without reading the request. */
        static const char body[] = "{\"error\":{\"message\":\"too many connections\",\"type\":\"server_error\",\"param\":null,\"code\":503}}";
        const struct timeval quick = {.tv_usec = 200000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &quick, sizeof quick);
        http_send_response(fd, 503, "application/json", "Retry-After: 1\r\n", body, sizeof body - 1);
        http_close_gently(fd, 50);
    }
    pthread_attr_destroy(&attr);
}

/* ---- main ----------------------------------------------------------------------------------- */

int serve_main(int argc, char **argv) {
    static server srv;
    server *s = &srv;
    int rc = parse_options(argc, argv, &s->o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int loopback;
    if ((rc = resolve_host(&s->o, &addr, &addr_len, &loopback)) != 0)
        return rc;
    /* An empty key would mean "no authentication" without anyone having said so. */
    s->api_key = getenv("K3_API_KEY");
    if (s->api_key && !*s->api_key) {
        fprintf(stderr, "k3 serve: K3_API_KEY is set but empty. Set it to the key clients must send, or unset it "
                        "to serve without one.\n");
        return 2;
    }
    const char *name = s->o.model_name;
    if (!name) {
        size_t len = strlen(s->o.model_dir);
        while (len > 1 && s->o.model_dir[len - 1] == '/')
            len--;
        size_t start = len;
        while (start > 0 && s->o.model_dir[start - 1] != '/')
            start--;
        snprintf(s->model_name, sizeof s->model_name, "%.*s", (int)(len - start), s->o.model_dir + start);
    } else
        snprintf(s->model_name, sizeof s->model_name, "%s", name);
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* Connection threads come and go by the hundred; with glibc's default of one malloc arena
     * per thread (up to 8 per core) each burst leaves freed memory spread over many arenas.
     * Two arenas keep the resident set flat under bursts. */
    mallopt(M_ARENA_MAX, 2);
#endif
    s->started = time(NULL);
    s->listen_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);

    char detail[2048];
    const char *tok_dir = s->o.tok_dir ? s->o.tok_dir : s->o.model_dir;
    k3_status st = k3_tokenizer_open(tok_dir, &s->tok, detail, sizeof detail);
    if (st == K3_OK)
        st = chat_format_init(&s->fmt, s->tok, detail, sizeof detail);
    if (st != K3_OK) {
        fprintf(stderr, "k3 serve: loading the tokenizer from %s failed (%s): %s\n", tok_dir, k3_status_name(st), detail);
        rc = 1;
        goto done;
    }
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = s->o.max_context;
    cp.n_threads = s->o.threads;
    cp.batch = s->o.batch;
    if ((rc = run_memory_prepare(&s->o.memory, s->o.model_dir, &cp)) != 0)
        goto done;
    rc = 1;
    if ((st = k3_model_open(s->o.model_dir, &s->o.memory.params, &s->model, detail, sizeof detail)) != K3_OK) {
        fprintf(stderr, "k3 serve: loading the model failed (%s): %s\n", k3_status_name(st), detail);
        rc = st == K3_ERR_BUDGET ? 3 : 1;
        goto done;
    }
    if ((st = k3_context_open(s->model, &cp, &s->ctx, detail, sizeof detail)) != K3_OK) {
        fprintf(stderr, "k3 serve: creating the context failed (%s): %s\n", k3_status_name(st), detail);
        goto done;
    }
    k3_checkpoint_limit(s->ctx, (size_t)s->o.checkpoint_mb << 20);
    s->vocab = k3_model_vocab_size(s->model) < k3_tokenizer_vocab_size(s->tok) ? k3_model_vocab_size(s->model)
                                                                                : k3_tokenizer_vocab_size(s->tok);

    s->listen_fd = socket(addr.ss_family, SOCK_STREAM, 0);
    const int one = 1;
    if (s->listen_fd < 0 || setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(s->listen_fd, (struct sockaddr *)&addr, addr_len) || listen(s->listen_fd, 128)) {
        fprintf(stderr, "k3 serve: cannot listen on %s port %d: %s\n", s->o.host, s->o.port, strerror(errno));
        goto done;
    }
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof bound;
    getsockname(s->listen_fd, (struct sockaddr *)&bound, &bound_len);
    const int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                         : ((struct sockaddr_in *)&bound)->sin_port);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!loopback && !s->api_key)
        fprintf(stderr,
                "k3 serve: WARNING: listening on %s port %d, which is not a loopback address, WITHOUT AN API KEY: anyone "
                "who can reach it can use the model and read what it writes. Set K3_API_KEY to require a key.\n",
                s->o.host, port);
    printf("k3 serve: listening on http://%s%s%s:%d (model '%s', context %d positions, queue %d%s)\n",
           addr.ss_family == AF_INET6 ? "[" : "", s->o.host, addr.ss_family == AF_INET6 ? "]" : "", port, s->model_name,
           s->o.max_context, s->o.queue, s->api_key ? ", API key required" : "");
    fflush(stdout);
    accept_loop(s);

    /* Stop: no new connections; the running request is cancelled (the watcher sees the flag);
     * wait, within a bound, for the connection threads to finish before freeing the engine. */
    close(s->listen_fd);
    s->listen_fd = -1;
    fprintf(stderr, "k3 serve: stopping\n");
    pthread_mutex_lock(&s->mu);
    while (evict_slowest_reader(s)) /* connections still reading need not wait for their timeout */
        ;
    pthread_cond_broadcast(&s->cv);
    const double until = now_s() + 10;
    while (s->connections > 0 && now_s() < until) {
        struct timespec t;
        add_seconds(&t, 100);
        pthread_cond_timedwait(&s->cv, &s->mu, &t);
    }
    const int left = s->connections;
    pthread_mutex_unlock(&s->mu);
    if (left > 0) {
        fprintf(stderr, "k3 serve: %d connections did not finish; exiting without freeing the engine\n", left);
        return 0;
    }
    rc = 0;
done:
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    k3_context_close(s->ctx);
    k3_model_close(s->model);
    k3_tokenizer_close(s->tok);
    return rc;
}
