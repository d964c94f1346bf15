/* fuzz_http.c - the HTTP harness: bytes as what a client sends k3 serve. The request head
 * goes to http_parse_head directly (any bytes, NUL included), and the whole input through
 * http_read_request over a socket pair, as a connection thread reads it (head, then a
 * Content-Length or chunked body within a 4 KiB limit, Expect: 100-continue answered). A
 * request it accepts must have a method, a path starting with '/' and a body of the length
 * it says. The mutator edits whole lines and inserts the headers that change framing. */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "http.h"

static const char *const lines[] = {"Content-Length: 5",       "Content-Length: 0",         "Content-Length: 99999999999",
                                    "Content-Length: -1",      "Transfer-Encoding: chunked", "Transfer-Encoding: gzip",
                                    "Expect: 100-continue",    "Authorization: Bearer x",    "Host: 127.0.0.1",
                                    " folded: x",              "X: \r",                      "5",
                                    "hello",                   "0",                          "ffffffffffffffff",
                                    "GET /health HTTP/1.1\r",  "POST /v1/completions HTTP/1.0\r", "\r",
                                    "GET / HTTP/2.0\r",        "1;ext=1\r",                  NULL};

static void check(const http_request *req, const char *where) {
    if (!req->method[0] || req->path[0] != '/')
        fuzz_fail("%s accepted method '%s', path '%s'", where, req->method, req->path);
}

static void run(const uint8_t *data, size_t n) {
    char why[256];
    http_request req;
    http_framing framing;
    char *head = malloc(n + 1);
    if (!head)
        return;
    memcpy(head, data, n);
    memset(&req, 0, sizeof req);
    if (http_parse_head(head, n, &req, &framing, why, sizeof why) == 0)
        check(&req, "http_parse_head");
    free(head);

    int fds[2];
    if (n > 60000 || socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
        return;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(fds[1], data + done, n - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    shutdown(fds[1], SHUT_WR);
    const int rc = http_read_request(fds[0], 4096, 200, &req, why, sizeof why);
    if (rc == 0) {
        check(&req, "http_read_request");
        if (req.body_len > 4096 || (req.body && req.body[req.body_len] != 0))
            fuzz_fail("a body of %zu bytes (limit 4096) or not terminated", req.body_len);
        http_request_free(&req);
    } else if (rc > 0 && (rc < 400 || rc > 599 || !why[0]))
        fuzz_fail("http_read_request answered %d with '%s'", rc, why);
    close(fds[0]);
    close(fds[1]);
}

static size_t mutate(uint8_t *d, size_t n, size_t cap, fuzz_rng *r) { return fuzz_mutate_lines(d, n, cap, r, lines); }

const fuzz_harness fuzz_http = {"http", "a client's bytes -> http_parse_head, and http_read_request over a socket pair",
                                NULL, run, mutate, lines, 60000};
