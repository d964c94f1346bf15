/* http.h - the small HTTP/1.1 server side `k3 serve` needs: read one request from a
 * connected socket within limits (header size, body size, time), write a whole response
 * or the head of a server-sent-event stream, notice that the peer has gone, and close
 * gently. One request per connection: every response says `Connection: close`. It does
 * not route, parse JSON, pipeline, keep connections alive or speak TLS. POSIX sockets and
 * libc only. */
#ifndef K3_HTTP_H
#define K3_HTTP_H

#include <stddef.h>

/* Longest request line plus headers accepted (431 beyond). */
#define HTTP_MAX_HEAD 16384

typedef struct http_request {
    char method[16];
    char path[1024];          /* the target up to any '?' */
    char authorization[1024]; /* the Authorization header, "" when absent */
    char *body;               /* NUL-terminated, body_len bytes (may hold NULs) */
    size_t body_len;
} http_request;

/* Reads one request from fd within timeout_ms in all, with a body of at most max_body
 * bytes (Content-Length or chunked). Returns 0 with *req filled (free it with
 * http_request_free), -1 when the peer closed or went quiet before sending anything (no
 * answer is due), or the HTTP status to answer with (400, 408, 413, 431, 501, 505) with
 * `why` saying what was wrong. Answers `Expect: 100-continue` itself. */
int http_read_request(int fd, size_t max_body, int timeout_ms, http_request *req, char *why, size_t why_size);

void http_request_free(http_request *req);

/* How the head says the body comes. */
typedef struct http_framing {
    long long content_length; /* -1 when absent */
    int chunked;              /* Transfer-Encoding: chunked */
    int expect_continue;      /* Expect: 100-continue */
} http_framing;

/* Parses a request head in place: head[0..n) is the request line and header lines up to and
 * including the empty line (any bytes may come; head must have room for n + 1). Fills
 * req->method, path and authorization and *body. Returns 0, or the HTTP status to answer
 * with (400, 414, 431, 501, 505) with `why` saying what was wrong: a NUL byte anywhere is
 * 400. http_read_request uses it; the fuzz harness calls it directly. */
int http_parse_head(char *head, size_t n, http_request *req, http_framing *body, char *why, size_t why_size);

/* Writes all n bytes (never raising SIGPIPE); 0, or -1 when the peer is gone or the send
 * timeout passed. */
int http_send_all(int fd, const void *bytes, size_t n);

/* A whole response: status line, Content-Type, Content-Length, Connection: close, the
 * extra header lines (each ending in \r\n; may be NULL), the body. 0 or -1 as above. */
int http_send_response(int fd, int status, const char *content_type, const char *extra_headers, const char *body,
                       size_t body_len);

/* The head of a text/event-stream response; events follow with http_send_all. */
int http_send_event_stream_head(int fd);

/* The reason phrase of a status ("OK", "Not Found", ...). */
const char *http_reason(int status);

/* 1 when the peer has closed its side or the connection failed, else 0. Bytes it sent
 * after the request are read and dropped. Does not block. */
int http_peer_gone(int fd);

/* Waits up to timeout_ms for the peer to close or fail (1) or not (0). */
int http_wait_peer_gone(int fd, int timeout_ms);

/* Ends the connection without losing the response: shuts down writing, reads and drops
 * what the peer still sends (up to a bound, for up to linger_ms), then closes. A plain
 * close() with unread input would reset the connection and could destroy the response
 * before the peer reads it (e.g. a 413 sent before the body was read). */
void http_close_gently(int fd, int linger_ms);

#endif
