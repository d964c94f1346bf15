/* cmd_tokenize.c - `k3 tokenize` and `k3 detokenize`: the checkpoint's tokenizer from the
 * command line, for checking prompts and ids by hand and from scripts. tokenize prints
 * the ids as one JSON array on the last line of stdout; detokenize writes the text's exact
 * bytes (no newline added). Options are described in main.c's cli_usage(). */
#include "commands.h"
#include "k3.h"
#include "options.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int engine_error(const char *cmd, k3_status st, const char *detail) {
    fprintf(stderr, "k3 %s: %s: %s\n", cmd, k3_status_name(st), detail);
    return 1;
}

/* Reads a whole file into a malloc'd buffer; NULL with errno set on failure. */
static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *grown = realloc(buf, cap *= 2);
        if (!grown)
            free(buf);
        buf = grown;
    }
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        errno = errno ? errno : EIO;
        return NULL;
    }
    *len = n;
    return buf;
}

static k3_tokenizer *open_tok(const char *cmd, const char *dir) {
    char detail[1024];
    k3_tokenizer *tok;
    k3_status st = k3_tokenizer_open(dir, &tok, detail, sizeof detail);
    if (st != K3_OK) {
        engine_error(cmd, st, detail);
        return NULL;
    }
    return tok;
}

int tokenize_main(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL, *prompt_file = NULL;
    int no_special = 0;
    const option table[] = {
        {"--tok", OPTION_TEXT, &dir, 0, 0},
        {"--prompt", OPTION_TEXT, &prompt, 0, 0},
        {"--prompt-file", OPTION_TEXT, &prompt_file, 0, 0},
        {"--no-special", OPTION_FLAG, &no_special, 0, 0},
    };
    const option_parser parser = {"k3 tokenize", table, (int)(sizeof table / sizeof table[0]), NULL, NULL, NULL, NULL};
    if (options_parse(&parser, argc, argv, 1))
        return 2;
    const int allow_special = !no_special;
    if (!dir || !prompt == !prompt_file)
        return options_usage_error("k3 tokenize", "%s", "needs --tok DIR and one of --prompt TEXT, --prompt-file PATH");
    size_t len;
    char *text = NULL;
    if (prompt_file) {
        text = read_all(prompt_file, &len);
        if (!text) {
            fprintf(stderr, "k3 tokenize: %s: %s\n", prompt_file, strerror(errno));
            return 1;
        }
    } else {
        len = strlen(prompt);
    }
    k3_tokenizer *tok = open_tok("tokenize", dir);
    int32_t *ids = tok ? malloc((len + 1) * sizeof *ids) : NULL;
    int rc = 1;
    size_t n;
    if (tok && !ids)
        fprintf(stderr, "k3 tokenize: out of memory\n");
    if (ids) {
        k3_status st = k3_tokenize(tok, text ? text : prompt, len, allow_special, ids, len + 1, &n);
        if (st != K3_OK) {
            engine_error("tokenize", st, k3_tokenizer_error(tok));
        } else {
            putchar('[');
            for (size_t i = 0; i < n; i++)
                printf(i ? ", %d" : "%d", ids[i]);
            printf("]\n");
            rc = 0;
        }
    }
    free(ids);
    free(text);
    k3_tokenizer_close(tok);
    return rc;
}

/* Parses "1,2,3" (spaces and a surrounding [ ] allowed, so tokenize's output pastes in). */
static int parse_ids(const char *s, int32_t **out, size_t *n) {
    size_t cap = 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    *n = 0;
    while (ids && (*s == ' ' || *s == '['))
        s++;
    while (ids && *s && *s != ']') {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < INT32_MIN || v > INT32_MAX) {
            free(ids);
            return 0;
        }
        if (*n == cap) {
            int32_t *grown = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!grown) {
                free(ids);
                return 0;
            }
            ids = grown;
        }
        ids[(*n)++] = (int32_t)v;
        s = end;
        while (*s == ' ')
            s++;
        if (*s == ',')
            s++;
        else if (*s && *s != ']') {
            free(ids);
            return 0;
        }
    }
    *out = ids;
    return ids != NULL;
}

int detokenize_main(int argc, char **argv) {
    const char *dir = NULL, *list = NULL;
    const option table[] = {
        {"--tok", OPTION_TEXT, &dir, 0, 0},
        {"--ids", OPTION_TEXT, &list, 0, 0},
    };
    const option_parser parser = {"k3 detokenize", table, (int)(sizeof table / sizeof table[0]), NULL, NULL, NULL,
                                  NULL};
    if (options_parse(&parser, argc, argv, 1))
        return 2;
    if (!dir || !list)
        return options_usage_error("k3 detokenize", "%s", "needs --tok DIR and --ids 1,2,3");
    int32_t *ids;
    size_t n;
    if (!parse_ids(list, &ids, &n))
        return options_usage_error("k3 detokenize", "%s", "--ids takes integers separated by commas");
    k3_tokenizer *tok = open_tok("detokenize", dir);
    int rc = 1;
    size_t need;
    if (tok) {
        k3_status st = k3_detokenize(tok, ids, n, NULL, 0, &need);
        char *out = st == K3_OK ? malloc(need + 1) : NULL;
        if (st == K3_OK && out)
            st = k3_detokenize(tok, ids, n, out, need, &need);
        if (st != K3_OK)
            engine_error("detokenize", st, k3_tokenizer_error(tok));
        else if (!out)
            fprintf(stderr, "k3 detokenize: out of memory\n");
        else if (fwrite(out, 1, need, stdout) == need && fflush(stdout) == 0)
            rc = 0;
        free(out);
    }
    free(ids);
    k3_tokenizer_close(tok);
    return rc;
}
