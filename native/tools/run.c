/* run.c - `k3 MODEL_DIR --ids ...`: loads a model, decodes greedily and reports tokens,
 * time per token and measured peak RSS; the debugging and benchmarking front door of the
 * engine. Options are described by cli_usage() in main.c, nowhere else. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "commands.h"
#include "k3.h"
#include "options.h"
#include "run_dump.h"
#include "run_memory.h"

typedef struct run_options {
    const char *model_dir;
    const char *ids, *prompt, *prompt_file, *tok_dir;
    int gen;
    int incremental;
    int spec;
    int spec_always;
    double replay_acceptance;
    int threads;
    int batch;
    int tf_check;
    int heal;
    const char *dump_logits;
    const char *dump_activations;
    const char *out;
    const char *save_state, *load_state;
    const char *context_ids, *context_file;
    run_memory memory; /* presets, budgets, plan and report (run_memory.c) */
} run_options;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Measured peak resident set, bytes (ru_maxrss is KiB on Linux). */
static double peak_rss_bytes(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : 0.0;
}

/* "1,2,3" -> ids; returns the count, or -1 with a message. */
static int parse_ids(const char *s, int32_t **out) {
    int cap = 16, n = 0;
    int32_t *ids = malloc(sizeof *ids * cap);
    for (const char *p = s; ids && *p;) {
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "k3: --ids: '%s' is not a comma-separated list of token ids (at '%s')\n", s, p);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, sizeof *ids * (cap *= 2));
            if (!grown) {
                free(ids);
                ids = NULL;
                break;
            }
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!ids) {
        fprintf(stderr, "k3: --ids: out of memory\n");
        return -1;
    }
    *out = ids;
    return n;
}

static int parse_options(int argc, char **argv, run_options *o) {
    *o = (run_options){.model_dir = argv[0], .gen = 8, .threads = 1, .batch = K3_BATCH_AUTO};
    run_memory_init(&o->memory);
    const option table[] = {
        {"--ids", OPTION_TEXT, &o->ids, 0, 0},
        {"--prompt", OPTION_TEXT, &o->prompt, 0, 0},
        {"--prompt-file", OPTION_TEXT, &o->prompt_file, 0, 0},
        {"--tok", OPTION_TEXT, &o->tok_dir, 0, 0},
        {"--dump-logits", OPTION_TEXT, &o->dump_logits, 0, 0},
        {"--dump-activations", OPTION_TEXT, &o->dump_activations, 0, 0},
        {"--out", OPTION_TEXT, &o->out, 0, 0},
        {"--save-state", OPTION_TEXT, &o->save_state, 0, 0},
        {"--load-state", OPTION_TEXT, &o->load_state, 0, 0},
        {"--context-ids", OPTION_TEXT, &o->context_ids, 0, 0},
        {"--context-file", OPTION_TEXT, &o->context_file, 0, 0},
        {"--gen", OPTION_INT, &o->gen, 0, 1 << 20},
        {"--threads", OPTION_INT, &o->threads, 1, 1 << 20},
        {"--batch", OPTION_INT, &o->batch, 0, 1 << 20},
        {"--spec", OPTION_INT, &o->spec, 0, 16},
        {"--incremental", OPTION_FLAG, &o->incremental, 0, 0},
        {"--spec-always", OPTION_FLAG, &o->spec_always, 0, 0},
        {"--replay-acceptance", OPTION_REAL, &o->replay_acceptance, 0, 1},
        {"--tf-check", OPTION_FLAG, &o->tf_check, 0, 0},
        {"--heal", OPTION_FLAG, &o->heal, 0, 0},
    };
    const option_parser parser = {"k3", table, (int)(sizeof table / sizeof table[0]), &o->memory, o->model_dir,
                                  NULL, NULL};
    const int rc = options_parse(&parser, argc, argv, 1);
    if (rc)
        return rc;
    if (!!o->ids + !!o->prompt + !!o->prompt_file != 1)
        return options_usage_error("k3", "%s: give the prompt with exactly one of --ids, --prompt, --prompt-file", o->model_dir);
    if (o->heal && o->ids)
        return options_usage_error("k3", "%s", "--heal backs the prompt's text off to its last piece: it needs --prompt or --prompt-file");
    if (o->heal && o->tf_check)
        return options_usage_error("k3", "%s", "--heal constrains generation: --tf-check generates nothing");
    /* Speculation, healing, saved state and resuming all need the carried state. */
    if (o->spec || o->heal || o->save_state || o->load_state)
        o->incremental = 1;
    if ((o->context_ids || o->context_file) && !o->spec)
        return options_usage_error("k3", "%s", "--context-ids / --context-file feed the drafter: they need --spec N");
    if (o->spec_always && !o->spec)
        return options_usage_error("k3", "%s", "--spec-always says how --spec drafts: it needs --spec N");
    if (o->replay_acceptance > 0 && !o->spec)
        return options_usage_error("k3", "%s", "--replay-acceptance spoils --spec's drafts: it needs --spec N");
    if (o->context_ids && o->context_file)
        return options_usage_error("k3", "%s", "give at most one of --context-ids and --context-file");
    if (o->tf_check && (o->spec || o->save_state || o->load_state))
        return options_usage_error("k3", "%s", "--tf-check runs one teacher-forced pass: it takes no --spec or state options");
    return 0;
}

static int write_floats(const char *path, const float *v, long n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(v, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0) {
        fprintf(stderr, "k3: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void json_ids(FILE *f, const char *key, const int32_t *ids, int n) {
    fprintf(f, "  \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fprintf(f, "]");
}

static int write_json(const char *path, const int32_t *seq, int n_prompt, int n_total, double spt, double rss,
                      const run_memory *memory) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "k3: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n");
    json_ids(f, "prompt_ids", seq, n_prompt);
    fprintf(f, ",\n");
    json_ids(f, "generated_ids", seq + n_prompt, n_total - n_prompt);
    fprintf(f, ",\n");
    json_ids(f, "full_ids", seq, n_total);
    fprintf(f, ",\n  \"seconds_per_token\": %.9g,\n  \"peak_rss_bytes\": %.0f", spt, rss);
    run_memory_json(memory, f);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "k3: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int fail(const char *what, k3_status s, const char *detail) {
    fprintf(stderr, "k3: %s failed (%s): %s\n", what, k3_status_name(s), detail);
    return 1;
}

/* The bytes token healing takes off the end of the prompt (--heal). */
typedef struct {
    char *bytes;
    size_t len;
} healed_text;

/* Ids given as a list (ids_arg), as text, or as a text file, the last two through the
 * tokenizer of --tok (default: the model directory), opened into *tok on first need.
 * heal (may be NULL): cut the text at the start of its last piece and keep the rest there
 * instead of tokenizing it. Returns the count, or -1 after a message. */
static int text_ids(const run_options *o, const char *ids_arg, const char *prompt, const char *file,
                    k3_tokenizer **tok, int32_t **out, healed_text *heal) {
    if (ids_arg)
        return parse_ids(ids_arg, out);
    char *text = NULL;
    size_t len = 0;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "k3: cannot read %s: %s\n", file, strerror(errno));
            return -1;
        }
        size_t cap = 4096;
        text = malloc(cap);
        size_t got;
        while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
            len += got;
            if (len == cap) {
                char *grown = realloc(text, cap *= 2);
                if (!grown) {
                    free(text);
                    text = NULL;
                }
                text = grown;
            }
        }
        fclose(f);
        if (!text) {
            fprintf(stderr, "k3: out of memory reading %s\n", file);
            return -1;
        }
    }
    const char *src = file ? text : prompt;
    if (!file)
        len = strlen(prompt);
    char detail[2048];
    const char *dir = o->tok_dir ? o->tok_dir : o->model_dir;
    k3_status s = *tok ? K3_OK : k3_tokenizer_open(dir, tok, detail, sizeof detail);
    int n = -1;
    if (s != K3_OK) {
        fprintf(stderr, "k3: loading the tokenizer from %s failed (%s): %s\n", dir, k3_status_name(s), detail);
    } else {
        size_t count = 0, cut = len;
        if (heal && (s = k3_tokenizer_last_piece(*tok, src, len, &cut)) == K3_OK) {
            heal->len = len - cut;
            if (!(heal->bytes = malloc(heal->len + 1)))
                s = K3_ERR_OUT_OF_MEMORY;
            else
                memcpy(heal->bytes, src + cut, heal->len);
            len = cut;
        }
        if (s != K3_OK) {
            fprintf(stderr, "k3: finding the prompt's last piece failed (%s)\n", k3_status_name(s));
            free(text);
            return -1;
        }
        *out = malloc(sizeof **out * (len + 1));
        s = *out ? k3_tokenize(*tok, src, len, 1, *out, len + 1, &count) : K3_ERR_OUT_OF_MEMORY;
        if (s == K3_OK)
            n = (int)count;
        else
            fprintf(stderr, "k3: tokenizing the prompt failed (%s): %s\n", k3_status_name(s),
                    *out ? k3_tokenizer_error(*tok) : "out of memory");
    }
    free(text);
    return n;
}

static void print_text(k3_tokenizer *tok, const int32_t *ids, int n) {
    size_t bytes = 0;
    if (k3_detokenize(tok, ids, (size_t)n, NULL, 0, &bytes) != K3_OK)
        return;
    char *text = malloc(bytes + 1);
    if (text && k3_detokenize(tok, ids, (size_t)n, text, bytes, &bytes) == K3_OK) {
        printf("text: ");
        fwrite(text, 1, bytes, stdout);
        printf("\n");
    }
    free(text);
}

/* Generation callbacks: collect the ids, and each verify pass's drafted and accepted
 * counts (rounds: (2, at most one per generated token)). */
typedef struct {
    int32_t *ids;
    int n;
    int *rounds;
    int n_rounds, max_rounds;
} collected;

static void collect_round(void *user, int drafted, int accepted) {
    collected *c = user;
    if (c->n_rounds < c->max_rounds) {
        c->rounds[2 * c->n_rounds] = drafted;
        c->rounds[2 * c->n_rounds + 1] = accepted;
        c->n_rounds++;
    }
}

static int collect(void *user, int32_t id) {
    collected *c = user;
    c->ids[c->n++] = id;
    return 0;
}

int run_main(int argc, char **argv) {
    run_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    k3_tokenizer *tok = NULL;
    int32_t *prompt = NULL;
    int32_t *material = NULL;
    healed_text heal = {NULL, 0};
    /* Each verify pass's (drafted, accepted): at most one pass per generated token. */
    int *rounds = o.spec && o.gen > 0 ? malloc(sizeof(int) * 2 * (size_t)o.gen) : NULL;
    collected got = {NULL, 0, NULL, 0, 0};
    const int n_prompt = text_ids(&o, o.ids, o.prompt, o.prompt_file, &tok, &prompt, o.heal ? &heal : NULL);
    const int n_material = n_prompt < 0                            ? -1
                           : o.context_ids || o.context_file ? text_ids(&o, o.context_ids, NULL, o.context_file, &tok, &material, NULL)
                                                                   : 0;
    if (o.spec && o.gen > 0 && !rounds)
        fprintf(stderr, "k3: out of memory for the list of verify passes\n");
    if (n_prompt < 0 || n_material < 0 || (o.spec && o.gen > 0 && !rounds)) {
        k3_tokenizer_close(tok);
        free(rounds);
        free(prompt);
        free(material);
        free(heal.bytes);
        return 1;
    }
    if (n_prompt == 0 && !o.load_state) {
        k3_tokenizer_close(tok);
        free(prompt);
        free(heal.bytes);
        return options_usage_error("k3", "%s", o.heal ? "--heal: the prompt is a single piece; healing needs text before its last piece"
                                      : "the prompt is empty");
    }
    char detail[2048];
    k3_model *model = NULL;
    k3_context *ctx = NULL;
    run_dump *dump = NULL;
    float *logits = NULL;
    int32_t *seq = NULL, *pred = NULL;
    k3_context_params planned; /* the plan is printed, and refused, before anything is allocated */
    k3_context_params_default(&planned);
    planned.max_context = n_prompt + o.gen + 1;
    planned.n_threads = o.threads;
    planned.batch = o.batch;
    if ((rc = run_memory_prepare(&o.memory, o.model_dir, &planned)) != 0)
        goto done;
    const double t_load = now_s();
    k3_status s = k3_model_open(o.model_dir, &o.memory.params, &model, detail, sizeof detail);
    if (s != K3_OK) {
        fail("loading the model", s, detail);
        rc = s == K3_ERR_BUDGET ? 3 : 1;
        goto done;
    }
    fprintf(stderr, "k3: loaded %s in %.2f s\n", o.model_dir, now_s() - t_load);
    const int vocab = k3_model_vocab_size(model);
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = n_prompt + o.gen + 1;
    cp.n_threads = o.threads;
    cp.batch = o.batch;
    rc = 1;
    /* A resumed sequence needs room for what the state file holds too. */
    if (o.load_state) {
        int held = 0;
        if ((s = k3_state_length(o.load_state, &held, detail, sizeof detail)) != K3_OK) {
            fail("loading the state", s, detail);
            goto done;
        }
        if (held > INT_MAX - cp.max_context) {
            fprintf(stderr, "k3: %s holds %d tokens: with %d more the context would pass %d positions\n", o.load_state, held,
                    cp.max_context, INT_MAX);
            goto done;
        }
        cp.max_context += held;
    }
    s = k3_context_open(model, &cp, &ctx, detail, sizeof detail);
    if (s != K3_OK) {
        fail("creating the context", s, detail);
        goto done;
    }
    if (o.dump_activations && !(dump = run_dump_start(o.dump_activations, ctx)))
        goto done;
    seq = malloc(sizeof *seq * (size_t)cp.max_context);
    logits = malloc(sizeof *logits * (size_t)vocab * (o.tf_check ? (size_t)n_prompt : 1));
    pred = malloc(sizeof *pred * (size_t)(n_prompt + o.gen + 1));
    if (!seq || !logits || !pred) {
        fprintf(stderr, "k3: out of memory for %d logits\n", vocab);
        goto done;
    }

    if (o.tf_check) {
        s = k3_decode(ctx, prompt, n_prompt, logits, n_prompt, pred);
        if (s != K3_OK) {
            fail("the teacher-forced pass", s, k3_context_error(ctx));
            goto done;
        }
        int match = 0;
        for (int i = 0; i + 1 < n_prompt; i++)
            match += pred[i] == prompt[i + 1];
        printf("tf-check: %d of %d next-token predictions match the given ids\n", match, n_prompt - 1);
        printf("predicted: [");
        for (int i = 0; i < n_prompt; i++)
            printf("%s%d", i ? ", " : "", pred[i]);
        printf("]\n");
        if (o.dump_logits && write_floats(o.dump_logits, logits, (long)vocab * n_prompt))
            goto done;
        if (dump && run_dump_finish(dump, ctx, prompt, n_prompt))
            goto done_dumped;
        dump = NULL;
        rc = 0;
        goto done;
    }

    int n_base = 0; /* tokens a loaded state supplied */
    if (o.load_state) {
        if ((s = k3_state_load(ctx, o.load_state)) != K3_OK) {
            fail("loading the state", s, k3_context_error(ctx));
            goto done;
        }
        n_base = k3_context_length(ctx);
        memcpy(seq, k3_context_tokens(ctx), sizeof *seq * (size_t)n_base);
        fprintf(stderr, "k3: resumed %d tokens from %s\n", n_base, o.load_state);
    }
    memcpy(seq + n_base, prompt, sizeof *seq * (size_t)n_prompt);
    int n = n_base + n_prompt;
    run_memory_start(&o.memory, model);
    double t0 = now_s(); /* reset after the prefill: s/token is generation only */
    k3_generate_stats gs = {0};
    int reused = 0;
    if (o.incremental) {
        /* Only what the loaded state does not hold is prefilled; the last prompt token is
         * decoded on its own so its logits (the first step's) come from the resumed state. */
        if ((s = k3_sync(ctx, seq, n - 1, &reused)) != K3_OK ||
            (s = k3_decode(ctx, seq + n - 1, 1, logits, 1, NULL)) != K3_OK) {
            fail("prefilling the prompt", s, k3_context_error(ctx));
            goto done;
        }
        if (o.dump_logits && o.gen > 0 && write_floats(o.dump_logits, logits, vocab))
            goto done;
        t0 = now_s();
        if (o.gen > 0) {
            k3_generate_params gp;
            k3_generate_params_default(&gp);
            gp.max_tokens = o.gen;
            gp.spec_max = o.spec;
            gp.spec_always = o.spec_always;
            gp.replay_acceptance = o.replay_acceptance;
            gp.context_ids = material;
            gp.n_context_ids = n_material;
            gp.heal = heal.bytes;
            gp.heal_len = heal.len;
            gp.tokenizer = tok;
            got = (collected){seq + n, 0, rounds, 0, rounds ? o.gen : 0};
            gp.on_token = collect;
            gp.on_verify = collect_round;
            gp.user = &got;
            s = k3_generate(ctx, &gp, &gs);
            n += got.n;
            if (s != K3_OK) {
                fail("decoding", s, k3_context_error(ctx));
                goto done;
            }
        }
    } else {
        for (int g = 0; g < o.gen; g++) {
            k3_context_reset(ctx);
            if ((s = k3_decode(ctx, seq, n, logits, 1, NULL)) != K3_OK) {
                fail("decoding", s, k3_context_error(ctx));
                goto done;
            }
            if (g == 0 && o.dump_logits && write_floats(o.dump_logits, logits, vocab))
                goto done;
            int best = 0;
            for (int i = 1; i < vocab; i++)
                if (logits[i] > logits[best])
                    best = i;
            seq[n++] = best;
        }
    }
    const double elapsed = now_s() - t0;
    const int generated = n - n_base - n_prompt;
    const double spt = generated ? elapsed / generated : 0.0;
    const double rss = peak_rss_bytes();
    run_memory_stop(&o.memory, model, elapsed, rss);
    if (o.save_state && (s = k3_state_save(ctx, o.save_state)) != K3_OK) {
        fail("saving the state", s, k3_context_error(ctx));
        goto done;
    }
    printf("generated: [");
    for (int i = n_base + n_prompt; i < n; i++)
        printf("%s%d", i > n_base + n_prompt ? ", " : "", seq[i]);
    printf("]\n");
    if (tok)
        print_text(tok, seq + n_base + n_prompt, generated);
    if (o.incremental)
        printf("prefilled %d tokens (%d resumed from held state)\n", n - generated - reused, reused);
    if (o.heal)
        printf("healed: %zu bytes, spelled by the first %d generated tokens\n", heal.len, gs.healed);
    if (o.spec)
        printf("spec: %d rounds, %d drafted, %d accepted (%.1f%%), mean accepted run %.2f, %.2f tokens per "
               "forward pass\n",
               gs.rounds, gs.drafted, gs.accepted, gs.drafted ? 100.0 * gs.accepted / gs.drafted : 0.0,
               gs.rounds ? (double)gs.accepted / gs.rounds : 0.0,
               gs.forward_passes ? (double)gs.emitted / gs.forward_passes : 0.0);
    if (o.spec) {
        printf("spec rounds (drafted/accepted):");
        for (int i = 0; i < got.n_rounds; i++)
            printf(" %d/%d", got.rounds[2 * i], got.rounds[2 * i + 1]);
        printf("\n");
    }
    printf("%.6f s/token (%s), peak RSS %.1f MB (measured)\n", spt,
           o.spec ? "speculative" : o.incremental ? "incremental" : "full recompute", rss / 1e6);
    if (o.out && write_json(o.out, seq + n_base, n_prompt, n - n_base, spt, rss, &o.memory))
        goto done;
    if (dump && run_dump_finish(dump, ctx, seq, n))
        goto done_dumped;
    dump = NULL;
    rc = 0;
    goto done;
done_dumped:
    dump = NULL; /* freed by run_dump_finish */
done:
    run_dump_abandon(dump, ctx);
    k3_tokenizer_close(tok);
    free(prompt);
    free(material);
    free(heal.bytes);
    free(rounds);
    free(seq);
    free(pred);
    free(logits);
    k3_context_close(ctx);
    k3_model_close(model);
    return rc;
}
