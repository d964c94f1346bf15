/* cmd_draft_replay.c - `k3 draft-replay`: how well the n-gram drafter predicts a KNOWN
 * continuation. It replays the true tokens as if a perfect model had produced them and
 * counts what speculative decoding would have drafted and accepted: the upper bound a
 * model that writes exactly the real text would see. No model is loaded; the drafter
 * (src/draft.h) is the engine's own. Options: cli_usage() in main.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "draft.h"
#include "k3.h"
#include "options.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "k3 draft-replay: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf)
        fprintf(stderr, "k3 draft-replay: cannot read %s\n", path);
    *len = (size_t)n;
    return buf;
}

static int encode_file(k3_tokenizer *tok, const char *path, int32_t **ids) {
    size_t len, n = 0;
    char *text = read_file(path, &len);
    if (!text)
        return -1;
    *ids = malloc(sizeof **ids * (len + 1));
    const k3_status s = *ids ? k3_tokenize(tok, text, len, 0, *ids, len + 1, &n) : K3_ERR_OUT_OF_MEMORY;
    free(text);
    if (s != K3_OK) {
        fprintf(stderr, "k3 draft-replay: tokenizing %s failed (%s)\n", path, k3_status_name(s));
        return -1;
    }
    return (int)n;
}

int draft_replay_main(int argc, char **argv) {
    const char *tok_dir = NULL, *prefix = NULL, *material = NULL, *truth = NULL;
    int spec = 8;
    const option table[] = {
        {"--tok", OPTION_TEXT, &tok_dir, 0, 0},
        {"--prefix-file", OPTION_TEXT, &prefix, 0, 0},
        {"--context-file", OPTION_TEXT, &material, 0, 0},
        {"--truth-file", OPTION_TEXT, &truth, 0, 0},
        {"--spec", OPTION_INT, &spec, 1, 16},
    };
    const option_parser parser = {"k3 draft-replay", table, (int)(sizeof table / sizeof table[0]), NULL, NULL, NULL,
                                  NULL};
    if (options_parse(&parser, argc, argv, 1))
        return 2;
    if (!tok_dir || !prefix || !truth) {
        fprintf(stderr, "k3 draft-replay: give --tok, --prefix-file and --truth-file\n\n");
        cli_usage(stderr);
        return 2;
    }
    char detail[2048];
    k3_tokenizer *tok = NULL;
    k3_status s = k3_tokenizer_open(tok_dir, &tok, detail, sizeof detail);
    if (s != K3_OK) {
        fprintf(stderr, "k3 draft-replay: loading the tokenizer failed (%s): %s\n", k3_status_name(s), detail);
        return 1;
    }
    int32_t *p = NULL, *m = NULL, *t = NULL;
    const int np = encode_file(tok, prefix, &p), nt = encode_file(tok, truth, &t);
    const int nm = material ? encode_file(tok, material, &m) : 0;
    int rc = 1;
    draft *d = NULL;
    k3_error err = {K3_OK, ""};
    int32_t *seq = np >= 0 && nt >= 0 ? malloc(sizeof *seq * (size_t)(np + nt + 1)) : NULL;
    if (np < 0 || nt < 0 || nm < 0 || !seq || draft_new(&d, &err) != K3_OK ||
        draft_set_material(d, m, nm, &err) != K3_OK)
        goto done;
    memcpy(seq, p, sizeof *seq * (size_t)np);
    /* The perfect model's loop: the pending token is always the true next one. */
    int n = np, passes = 0, rounds = 0, drafted = 0, accepted = 0;
    int32_t proposal[16];
    for (int i = 0; i < nt;) {
        const int32_t pending = t[i];
        if (draft_sync(d, seq, n, &err) != K3_OK)
            goto done;
        const int room = nt - i - 1;
        const int k = draft_propose(d, pending, spec < room ? spec : room, NULL, 0, proposal);
        int a = 0;
        while (a < k && proposal[a] == t[i + 1 + a])
            a++;
        if (k > 0) {
            draft_feedback(d, k, a);
            rounds++;
            drafted += k;
            accepted += a;
        }
        passes++;
        for (int j = 0; j <= a; j++)
            seq[n++] = t[i + j];
        i += a + 1;
    }
    printf("draft-replay: %d true tokens, %d forward passes, %d rounds, %d drafted, %d accepted (%.1f%%), %.2f "
           "tokens per pass\n",
           nt, passes, rounds, drafted, accepted, drafted ? 100.0 * accepted / drafted : 0.0,
           passes ? (double)nt / passes : 0.0);
    rc = 0;
done:
    if (err.status != K3_OK)
        fprintf(stderr, "k3 draft-replay: %s\n", err.detail);
    draft_free(d);
    free(seq);
    free(p);
    free(m);
    free(t);
    k3_tokenizer_close(tok);
    return rc;
}
