/* serve.h - what the files of `k3 serve` share (cmd_serve.c, serve_checkpoints.c,
 * serve_generate.c): the server's state, one connection, the watcher of a running request's
 * client, and the calls cmd_serve.c makes for the others (answering, the engine queue,
 * client watching). Not for the rest of the CLI: commands.h has serve_main. */
#ifndef K3_SERVE_H
#define K3_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "chat.h"
#include "k3.h"
#include "run_memory.h"
#include "strbuf.h"

#define MIRRORED_CHECKPOINTS 64  /* prefixes remembered as checkpointed */

typedef struct serve_options {
    const char *model_dir, *host, *model_name, *tok_dir;
    int port, threads, batch, max_context, queue, max_connections, spec, checkpoint_mb;
    long long max_body;
    int allow_non_loopback;
    run_memory memory;
} serve_options;

struct conn;

/* One request waiting for the engine. */
typedef struct waiter {
    struct waiter *next;
    int granted;
} waiter;

typedef struct server {
    serve_options o;
    k3_model *model;
    k3_context *ctx;
    k3_tokenizer *tok;
    chat_format fmt;
    int vocab;
    const char *api_key; /* K3_API_KEY; NULL: no authentication */
    char model_name[256];
    int listen_fd;
    time_t started;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int busy;              /* a request holds the engine */
    waiter *head, *tail;   /* FIFO of requests waiting for it */
    int n_waiting;
    int connections;       /* connection threads alive */
    struct conn *readers, *readers_tail; /* connections still reading their request, oldest first */
    int closing;           /* evicted connections whose threads have not ended yet */
    unsigned long served, refused, evicted;
    int checkpoints;          /* the context's checkpoints after the last request */
    size_t checkpoint_bytes;
    unsigned long next_id;
    struct {
        int len;
        uint64_t hash;
    } mirror[MIRRORED_CHECKPOINTS]; /* prefixes checkpointed (engine-owner only) */
    int n_mirror, mirror_next;
} server;

typedef struct conn {
    server *s;
    int fd;
    double t0;
    struct conn *prev, *next; /* in s->readers while reading its request (under s->mu) */
    int reading, evicted;     /* under s->mu */
    const char *route; /* for the log line */
    int status;        /* what was answered */
    int prompt_tokens, cached_tokens, generated; /* for the log line; -1: no prompt ran */
} conn;

typedef struct watch {
    server *s;
    int fd;
    atomic_int gone, done;
    pthread_t thread;
    int started;
} watch;

/* Answers with a JSON body (500 when building the body ran out of memory). */
void serve_send_json(conn *c, int status, const strbuf *body, const char *extra_headers);
/* Answers with an OpenAI error object whose message is fmt. */
void serve_send_error(conn *c, int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Takes the engine for c: at once when free, else after the requests queued before it.
 * 0: held (release with serve_release_engine); 429: the queue is full; 503: shutting down;
 * -1: the client went away while waiting. */
int serve_acquire_engine(conn *c);
/* Hands the engine to the next waiting request, or frees it; records the checkpoints. */
void serve_release_engine(server *s);

/* Starts watching c's client while the engine runs: once it has gone (or the server is
 * stopping), the watcher sets w->gone and cancels the engine's call. */
void serve_watch_start(watch *w, server *s, int fd);
void serve_watch_stop(watch *w);

#endif
