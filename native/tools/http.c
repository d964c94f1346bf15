/* http.c - reading one HTTP/1.1 request and writing responses on a socket (see http.h).
 * Reads go through poll() against one deadline for the whole request, so a client that
 * trickles bytes cannot hold a connection longer than the timeout. */
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Buffered reads from the socket against a deadline. */
typedef struct reader {
    int fd;
    double deadline;
    unsigned char buf[8192];
    size_t pos, len;
    size_t total; /* bytes received so far */
} reader;

enum { RD_EOF = -1, RD_TIMEOUT = -2 };

/* Waits for input until the deadline: 1 ready, RD_TIMEOUT. */
static int rd_wait(reader *r) {
    for (;;) {
        const double left = r->deadline - now_ms();
        if (left <= 0)
            return RD_TIMEOUT;
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        const int n = poll(&p, 1, left > 1e6 ? 1000000 : (int)left + 1);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return RD_EOF;
    }
}

/* Refills the buffer: the byte count, RD_EOF or RD_TIMEOUT. */
static long rd_fill(reader *r) {
    for (;;) {
        const int w = rd_wait(r);
        if (w < 0)
            return w;
        const ssize_t n = recv(r->fd, r->buf, sizeof r->buf, 0);
        if (n > 0) {
            r->pos = 0;
            r->len = (size_t)n;
            r->total += (size_t)n;
            return n;
        }
        if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            return RD_EOF;
    }
}

static int rd_getc(reader *r) {
    if (r->pos == r->len) {
        const long n = rd_fill(r);
        if (n < 0)
            return (int)n;
    }
    return r->buf[r->pos++];
}

/* Reads exactly n bytes into out: 0, RD_EOF or RD_TIMEOUT. */
static int rd_exact(reader *r, char *out, size_t n) {
    while (n > 0) {
        if (r->pos == r->len) {
            const long got = rd_fill(r);
            if (got < 0)
                return (int)got;
        }
        size_t take = r->len - r->pos;
        if (take > n)
            take = n;
        memcpy(out, r->buf + r->pos, take);
        r->pos += take;
        out += take;
        n -= take;
    }
    return 0;
}

static int fail(char *why, size_t size, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t size, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return status;
}

static int timeout_or_eof(int rc, char *why, size_t size, const char *what) {
    return rc == RD_TIMEOUT ? fail(why, size, 408, "the %s did not arrive in time", what)
                            : fail(why, size, 400, "the connection ended inside the %s", what);
}

/* Header token characters (RFC 9110 tchar); strchr would also find the terminating NUL. */
static int is_tchar(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A chunk-size line's hex number (extensions after ';' ignored); -1 when malformed. */
static long long parse_chunk_size(const char *line) {
    long long v = 0;
    int digits = 0;
    const char *p = line;
    for (; *p; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (v > (INT64_MAX >> 4))
            return -1;
        v = v * 16 + d;
        digits++;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (!digits || (*p && *p != ';'))
        return -1;
    return v;
}

/* Reads a line (without CRLF) of at most cap-1 bytes: 0, RD_EOF, RD_TIMEOUT, or 1 when too long. */
static int rd_line(reader *r, char *line, size_t cap) {
    size_t n = 0;
    for (;;) {
        const int c = rd_getc(r);
        if (c < 0)
            return c;
        if (c == '\n')
            break;
        if (n + 1 >= cap)
            return 1;
        line[n++] = (char)c;
    }
    if (n && line[n - 1] == '\r')
        n--;
    line[n] = 0;
    return 0;
}

static int read_chunked(reader *r, size_t max_body, http_request *req, char *why, size_t size) {
    size_t cap = 4096, len = 0;
    char *body = malloc(cap);
    char line[256];
    int status = 0;
    if (!body)
        return fail(why, size, 500, "out of memory for the body");
    for (;;) {
        int rc = rd_line(r, line, sizeof line);
        if (rc) {
            status = rc == 1 ? fail(why, size, 400, "a chunk-size line is too long") : timeout_or_eof(rc, why, size, "chunked body");
            break;
        }
        const long long n = parse_chunk_size(line);
        if (n < 0) {
            status = fail(why, size, 400, "a malformed chunk-size line");
            break;
        }
        if (n == 0) {
            /* Trailers, up to the empty line. */
            do
                rc = rd_line(r, line, sizeof line);
            while (rc == 1 || (rc == 0 && line[0]));
            if (rc)
                status = timeout_or_eof(rc, why, size, "chunked body");
            break;
        }
        if ((unsigned long long)n > max_body - len) {
            status = fail(why, size, 413, "the body is larger than %zu bytes", max_body);
            break;
        }
        if (len + (size_t)n + 1 > cap) {
            while (len + (size_t)n + 1 > cap)
                cap *= 2;
            char *grown = realloc(body, cap);
            if (!grown) {
                status = fail(why, size, 500, "out of memory for the body");
                break;
            }
            body = grown;
        }
        if ((rc = rd_exact(r, body + len, (size_t)n)) != 0) {
            status = timeout_or_eof(rc, why, size, "chunked body");
            break;
        }
        len += (size_t)n;
        if ((rc = rd_line(r, line, sizeof line)) != 0 || line[0]) {
            status = rc < 0 ? timeout_or_eof(rc, why, size, "chunked body") : fail(why, size, 400, "a chunk does not end with CRLF");
            break;
        }
    }
    if (status) {
        free(body);
        return status;
    }
    body[len] = 0;
    req->body = body;
    req->body_len = len;
    return 0;
}

/* Cuts the line that starts at *p (ending in LF, CRLF accepted) out of the head in place:
 * returns it NUL-terminated and moves *p past its LF, or NULL when no LF follows. */
static char *next_line(char **p, const char *end) {
    char *line = *p, *lf = memchr(line, '\n', (size_t)(end - line));
    if (!lf)
        return NULL;
    *lf = 0;
    if (lf > line && lf[-1] == '\r')
        lf[-1] = 0;
    *p = lf + 1;
    return line;
}

int http_parse_head(char *head, size_t n, http_request *req, http_framing *body, char *why, size_t why_size) {
    body->content_length = -1;
    body->chunked = body->expect_continue = 0;
    const char *nul = memchr(head, 0, n);
    if (nul)
        return fail(why, why_size, 400, "a NUL byte at byte %zu of the request head", (size_t)(nul - head));
    if (n < 2 || head[n - 1] != '\n')
        return fail(why, why_size, 400, "the request head does not end with an empty line");
    head[n] = 0;
    char *p = head;
    const char *end = head + n;

    /* Request line: METHOD SP target SP HTTP/1.x */
    char *line = next_line(&p, end);
    char *sp1 = line ? strchr(line, ' ') : NULL, *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ') || sp1 == line || (size_t)(sp1 - line) >= sizeof req->method)
        return fail(why, why_size, 400, "a malformed request line");
    for (char *c = line; c < sp1; c++)
        if (!is_tchar((unsigned char)*c))
            return fail(why, why_size, 400, "a malformed method");
    memcpy(req->method, line, (size_t)(sp1 - line));
    const char *version = sp2 + 1;
    if (strncmp(version, "HTTP/1.", 7) != 0)
        return fail(why, why_size, strncmp(version, "HTTP/", 5) ? 400 : 505, "unsupported protocol version '%.16s'", version);
    if (strcmp(version, "HTTP/1.1") && strcmp(version, "HTTP/1.0"))
        return fail(why, why_size, 505, "unsupported protocol version '%.16s'", version);
    const char *target = sp1 + 1;
    size_t target_len = (size_t)(sp2 - target);
    const char *query = memchr(target, '?', target_len);
    if (query)
        target_len = (size_t)(query - target);
    if (target[0] != '/' || target_len >= sizeof req->path)
        return fail(why, why_size, target[0] != '/' ? 400 : 414, "the request target must be a path under %zu bytes",
                    sizeof req->path);
    memcpy(req->path, target, target_len);

    /* Header lines, up to the empty one. */
    while ((line = next_line(&p, end)) != NULL && *line) {
        if (*line == ' ' || *line == '\t')
            return fail(why, why_size, 400, "folded header lines are not accepted");
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return fail(why, why_size, 400, "a header line without a name");
        for (char *c = line; c < colon; c++)
            if (!is_tchar((unsigned char)*c))
                return fail(why, why_size, 400, "a malformed header name");
        *colon = 0;
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t')
            value++;
        size_t vlen = strlen(value);
        while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
            value[--vlen] = 0;
        if (!strcasecmp(line, "content-length")) {
            long long v = 0;
            if (!vlen)
                return fail(why, why_size, 400, "an empty Content-Length");
            for (const char *c = value; *c; c++) {
                if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10)
                    return fail(why, why_size, 400, "a malformed Content-Length");
                v = v * 10 + (*c - '0');
            }
            if (body->content_length >= 0 && body->content_length != v)
                return fail(why, why_size, 400, "two different Content-Length headers");
            body->content_length = v;
        } else if (!strcasecmp(line, "transfer-encoding")) {
            if (strcasecmp(value, "chunked"))
                return fail(why, why_size, 501, "transfer coding '%.32s' is not supported (only chunked)", value);
            body->chunked = 1;
        } else if (!strcasecmp(line, "expect")) {
            body->expect_continue = !strcasecmp(value, "100-continue");
        } else if (!strcasecmp(line, "authorization")) {
            if (vlen >= sizeof req->authorization)
                return fail(why, why_size, 431, "the Authorization header is too long");
            memcpy(req->authorization, value, vlen + 1);
        }
    }
    if (!line || p != end)
        return fail(why, why_size, 400, "the request head does not end with an empty line");
    if (body->chunked && body->content_length >= 0)
        return fail(why, why_size, 400, "both Content-Length and Transfer-Encoding");
    return 0;
}

int http_read_request(int fd, size_t max_body, int timeout_ms, http_request *req, char *why, size_t why_size) {
    memset(req, 0, sizeof *req);
    why[0] = 0;
    reader *r = malloc(sizeof *r);
    char *head = malloc(HTTP_MAX_HEAD + 1);
    int status = 0;
    if (!r || !head) {
        free(r);
        free(head);
        return fail(why, why_size, 500, "out of memory for the request");
    }
    r->fd = fd;
    r->deadline = now_ms() + timeout_ms;
    r->pos = r->len = r->total = 0;

    /* The head: up to the first empty line. A NUL byte is refused as soon as it arrives. */
    size_t n = 0;
    for (;;) {
        const int c = rd_getc(r);
        if (c < 0) {
            status = r->total == 0 ? -1 : timeout_or_eof(c, why, why_size, "request head");
            goto done;
        }
        if (c == 0) {
            status = fail(why, why_size, 400, "a NUL byte at byte %zu of the request head", n);
            goto done;
        }
        if (n == HTTP_MAX_HEAD) {
            status = fail(why, why_size, 431, "the request line and headers exceed %d bytes", HTTP_MAX_HEAD);
            goto done;
        }
        head[n++] = (char)c;
        if (c == '\n' && ((n >= 2 && head[n - 2] == '\n') || (n >= 3 && head[n - 2] == '\r' && head[n - 3] == '\n')))
            break;
        if (n == 2 && head[0] == '\r' && head[1] == '\n')
            n = 0; /* RFC 9112 §2.2: ignore an empty line before the request line */
    }
    http_framing framing;
    if ((status = http_parse_head(head, n, req, &framing, why, why_size)) != 0)
        goto done;
    if (framing.content_length > 0 && (unsigned long long)framing.content_length > max_body) {
        status = fail(why, why_size, 413, "the body (%lld bytes) is larger than %zu bytes", framing.content_length, max_body);
        goto done;
    }
    if (framing.expect_continue && (framing.chunked || framing.content_length > 0)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (http_send_all(fd, cont, sizeof cont - 1)) {
            status = -1;
            goto done;
        }
    }
    if (framing.chunked) {
        status = read_chunked(r, max_body, req, why, why_size);
        goto done;
    }
    const size_t body_len = framing.content_length > 0 ? (size_t)framing.content_length : 0;
    req->body = malloc(body_len + 1);
    if (!req->body) {
        status = fail(why, why_size, 500, "out of memory for a body of %zu bytes", body_len);
        goto done;
    }
    const int rc = rd_exact(r, req->body, body_len);
    if (rc) {
        status = timeout_or_eof(rc, why, why_size, "request body");
        goto done;
    }
    req->body[body_len] = 0;
    req->body_len = body_len;
done:
    free(head);
    free(r);
    if (status)
        http_request_free(req);
    return status;
}

void http_request_free(http_request *req) {
    free(req->body);
    req->body = NULL;
    req->body_len = 0;
}

int http_send_all(int fd, const void *bytes, size_t n) {
    const char *p = bytes;
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1; /* EPIPE, ECONNRESET, or the send timeout (EAGAIN) */
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

const char *http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

int http_send_response(int fd, int status, const char *content_type, const char *extra_headers, const char *body,
                       size_t body_len) {
    char head[1024];
    const int n = snprintf(head, sizeof head,
                           "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                           status, http_reason(status), content_type, body_len, extra_headers ? extra_headers : "");
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    return http_send_all(fd, head, (size_t)n) || http_send_all(fd, body, body_len) ? -1 : 0;
}

int http_send_event_stream_head(int fd) {
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                               "Connection: close\r\nX-Accel-Buffering: no\r\n\r\n";
    return http_send_all(fd, head, sizeof head - 1);
}

int http_peer_gone(int fd) { return http_wait_peer_gone(fd, 0); }

int http_wait_peer_gone(int fd, int timeout_ms) {
    const double deadline = now_ms() + timeout_ms;
    for (int reads = 0; reads < 64; reads++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const double left = deadline - now_ms();
        const int n = poll(&p, 1, left > 0 ? (int)left : 0);
        if (n < 0 && errno != EINTR)
            return 1;
        if (n <= 0)
            return 0;
        if (p.revents & (POLLERR | POLLNVAL))
            return 1;
        char sink[512];
        const ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return 1;
        /* Bytes after the request (or a spurious wake-up): dropped; look again. */
        if (left <= 0 && got < 0)
            return 0;
    }
    return 0; /* still talking: not gone */
}

void http_close_gently(int fd, int linger_ms) {
    shutdown(fd, SHUT_WR);
    const double deadline = now_ms() + linger_ms;
    size_t drained = 0;
    char sink[4096];
    while (drained < ((size_t)64 << 20)) {
        const double left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const int n = poll(&p, 1, (int)left + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        const ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got <= 0 && !(got < 0 && (errno == EINTR || errno == EAGAIN)))
            break;
        if (got > 0)
            drained += (size_t)got;
    }
    close(fd);
}
