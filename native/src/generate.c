/* generate.c - k3_generate(): greedy generation, optionally speculative. Each forward pass
 * verifies the pending token (the model's own choice) plus up to spec_max drafted tokens
 * in one batched pass, accepts the longest draft prefix greedy decode would have produced
 * and takes the model's token after it. A partial acceptance costs no second pass: the
 * verify pass (verify.c) keeps what each position fed the KDA state, and keeping the
 * accepted positions reruns only their recurrence; MLA rows past the accepted point are
 * simply left behind. With the batch-invariant kernels the output, the state and the
 * last logits are bit-identical to serial decode by construction.
 *
 * The last emitted token is not decoded: nobody has asked for the logits after it yet,
 * and on a large model a pass costs seconds. The sequence therefore holds every generated
 * token but the last; k3_sync() adds it when the conversation goes on.
 *
 * Speculation must pay for itself. Where decode is memory-bound (the real model, experts
 * streamed) a verified position costs a fraction of a serial step; where the weights sit
 * in the CPU's cache (a small model) it costs about a whole one, and where each position
 * brings experts to read from disk more than one. So the wall-clock cost of a serial step
 * and what each drafted position adds to it are measured as generation goes (and kept in
 * the context for the next call): a serial step first, then one round at the drafter's
 * length; a draft is only as long as the expected accepted run pays for. When nothing
 * pays, drafting pauses for a doubling number of steps; after a pause one round at the
 * drafter's own length measures again, unless even perfect drafts could not pay. (spec_always turns this off.) Only the speed depends on it: which steps draft never
 * changes the output. */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "draft.h"
#include "heal.h"
#include "io.h"

#define SPEC_MAX 16
#define PACE_MAX_PAUSE 64
/* Drafts in a probe round (the first, and one after each pause): where a drafted position
 * brings experts to read it costs most of a step, and a probe that does not pay is lost. */
#define PACE_PROBE 1
/* A pause is at least this many times a probe's cost in steps, so probing costs at most
 * about 3 % of the steps it spares. */
#define PACE_PAUSE_PER_PROBE_STEP 32

/* Measured costs and the pause they set. */
typedef struct {
    double step;     /* seconds of a serial one-token pass (0: not measured yet) */
    double extra;    /* seconds each drafted position adds to a verify pass over a serial
                        step (negative: not measured yet) */
    int pause, skip; /* length of the last pause (0: drafting paid), and serial steps left */
    int probe;       /* 1: a pause has just ended */
} pace;

/* The replay's coin (k3_generate_params.replay_acceptance): splitmix64, a fixed seed. */
static double replay_coin(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Spoils the first drafted token whose coin does not land (with probability 1 - a), so a
 * draft of the model's own continuation is accepted up to there. */
static void replay_spoil(uint64_t *seed, double a, int32_t *drafts, int n, int vocab) {
    for (int i = 0; i < n; i++)
        if (replay_coin(seed) >= a) {
            drafts[i] = (drafts[i] + 1) % vocab;
            return;
        }
}

static double blend(double avg, double x) {
    return avg > 0 ? 0.7 * avg + 0.3 * x : x;
}

/* The draft length (0..max) that maximises expected tokens per second when each drafted
 * token is accepted with probability a: a round of n drafts emits 1 + a + .. + a^n tokens
 * and costs a serial step plus n drafted positions (their measured cost includes cutting
 * a partial acceptance back, which reads no weights). The step is what a pass pays once
 * whatever its width (a streamed trunk, the lm_head's bytes), a drafted position what it
 * adds (its compute, the experts it alone routes to). */
static int pace_length(const pace *p, double a, int max) {
    const double r = p->extra / p->step; /* a drafted position, in serial steps */
    int best = 0;
    double best_rate = 1.0; /* serial decode: one token per step */
    double tokens = 1.0, an = 1.0;
    for (int n = 1; n <= max; n++) {
        an *= a;
        tokens += an;
        const double cost = 1.0 + r * n;
        if (tokens / cost > best_rate) {
            best_rate = tokens / cost;
            best = n;
        }
    }
    return best;
}

/* How many drafts to allow this step: none until a serial step is measured, then a probe
 * until a verify pass is, 0 during a pause, else what pace_length() finds worth it; when a
 * pause ends, one probe if perfect drafts could pay (the acceptance estimate may be stale,
 * the costs are not). A pause that follows a pause (or the first probe) doubles, and lasts
 * long enough that probing costs little beside it. */
static int pace_allow(pace *p, double acceptance, int max) {
    const int probe = max < PACE_PROBE ? max : PACE_PROBE;
    if (p->skip > 0) {
        p->probe = --p->skip == 0;
        return 0;
    }
    if (p->step <= 0)
        return 0;
    if (p->extra < 0)
        return probe;
    if (p->probe) {
        p->probe = 0;
        if (pace_length(p, 1.0, max) > 0)
            return probe;
    }
    const int n = pace_length(p, acceptance, max);
    if (n == 0) {
        const double per_probe = PACE_PAUSE_PER_PROBE_STEP * PACE_PROBE * p->extra / p->step;
        int pause = p->pause ? 2 * p->pause : 4;
        if (pause < per_probe)
            pause = per_probe < PACE_MAX_PAUSE ? (int)per_probe + 1 : PACE_MAX_PAUSE;
        p->pause = pause < PACE_MAX_PAUSE ? pause : PACE_MAX_PAUSE;
        p->skip = p->pause;
    } else {
        p->pause = 0;
    }
    return n;
}

void k3_generate_params_default(k3_generate_params *p) {
    memset(p, 0, sizeof *p);
    p->max_tokens = 256;
}

static int is_stop(const k3_generate_params *p, int32_t t) {
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == t)
            return 1;
    return 0;
}

typedef struct {
    k3_context *c;
    const k3_generate_params *p;
    k3_generate_stats *st;
    heal h;
} run;

/* Emits t; returns 1 when generation must end after it. */
static int emit(run *r, int32_t t) {
    r->st->emitted++;
    if (heal_active(&r->h)) {
        r->st->healed++;
        r->h.done = heal_advance(&r->h, r->h.done, t);
    }
    const int stop = r->p->on_token ? r->p->on_token(r->p->user, t) : 0;
    if (is_stop(r->p, t)) {
        r->st->stop_reason = K3_STOP_TOKEN;
        return 1;
    }
    if (stop) {
        r->st->stop_reason = K3_STOP_CALLBACK;
        return 1;
    }
    if (r->st->emitted >= r->p->max_tokens) {
        r->st->stop_reason = K3_STOP_LENGTH;
        return 1;
    }
    return 0;
}

/* The greedy token under the heal constraint at byte offset `at`, from one position's
 * logits. A vocabulary without every single byte may have none: refused, naming where. */
static k3_status heal_next(run *r, size_t at, const float *logits, int32_t *out) {
    *out = heal_argmax(&r->h, at, logits);
    if (*out >= 0)
        return K3_OK;
    return error_set(&r->c->err, K3_ERR_INVALID_ARGUMENT,
                     "k3_generate: no token of the vocabulary spells healed byte %zu of %zu (0x%02x)", at, r->h.n,
                     (unsigned)r->h.bytes[at]);
}

static k3_status generate(k3_context *c, const k3_generate_params *params, k3_generate_stats *stats);

k3_status k3_generate(k3_context *c, const k3_generate_params *params, k3_generate_stats *stats) {
    context_enter(c);
    const k3_status s = generate(c, params, stats);
    context_leave(c);
    return s;
}

static k3_status generate(k3_context *c, const k3_generate_params *params, k3_generate_stats *stats) {
    k3_generate_params defaults;
    k3_generate_stats local;
    if (!params) {
        k3_generate_params_default(&defaults);
        params = &defaults;
    }
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    error_clear(&c->err);
    if (c->length < 1 || c->next < 0)
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "k3_generate: the sequence is empty; decode a prompt first");
    if (params->max_tokens < 1 || params->spec_max < 0 || params->spec_max > SPEC_MAX ||
        (params->n_stop_ids > 0 && !params->stop_ids) || (params->n_context_ids > 0 && !params->context_ids))
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT,
                         "k3_generate: max_tokens %d (>= 1), spec_max %d (0..%d), %d stop ids, %d context ids",
                         params->max_tokens, params->spec_max, SPEC_MAX, params->n_stop_ids, params->n_context_ids);
    if (!(params->replay_acceptance >= 0.0 && params->replay_acceptance <= 1.0))
        return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "k3_generate: replay_acceptance %g (0..1)",
                         params->replay_acceptance);
    const int vocab = c->model->m->vocab;
    if (params->heal_len > 0) {
        if (!params->heal || !params->tokenizer)
            return error_set(&c->err, K3_ERR_INVALID_ARGUMENT, "k3_generate: heal_len %zu needs heal bytes and a tokenizer",
                             params->heal_len);
        if (k3_tokenizer_vocab_size(params->tokenizer) != vocab)
            return error_set(&c->err, K3_ERR_INVALID_ARGUMENT,
                             "k3_generate: healing with a tokenizer of %d ids for a model of %d",
                             (int)k3_tokenizer_vocab_size(params->tokenizer), vocab);
        if (!c->last_logits_valid)
            return error_set(&c->err, K3_ERR_INVALID_ARGUMENT,
                             "k3_generate: healing needs the logits of position %d, which a loaded state does not "
                             "carry; decode or sync the prompt in this context first",
                             c->length - 1);
    }
    run r = {c, params, stats, {0}};
    heal_init(&r.h, params->tokenizer, params->heal, params->heal_len);
    /* The pending token: the model's greedy choice after the last position, under the
     * heal constraint while it lasts (c->next itself stays the unconstrained choice). */
    int32_t pending = c->next;
    k3_status s = K3_OK;
    if (heal_active(&r.h) && (s = heal_next(&r, 0, c->last_logits, &pending)) != K3_OK)
        return s;
    pace pc = {c->spec_step_seconds, c->spec_extra_seconds, 0, 0, 0};
    uint64_t replay_seed = 0x6b33u; /* the same coins every call */
    draft *d = NULL;
    if (params->spec_max > 0) {
        if ((s = draft_new(&d, &c->err)) != K3_OK ||
            (s = draft_set_material(d, params->context_ids, params->n_context_ids, &c->err)) != K3_OK)
            goto done;
    }
    int32_t batch[SPEC_MAX + 1], argmax[SPEC_MAX + 1], verdict[SPEC_MAX + 1];
    for (;;) {
        if (emit(&r, pending))
            break;
        if (context_cancel_requested(c)) {
            s = error_set(&c->err, K3_ERR_CANCELLED, "cancelled after %d generated tokens", stats->emitted);
            break;
        }
        /* Room: the pending token plus the drafts must fit the context. */
        int room = c->params.max_context - c->length - 1;
        if (room < 0) {
            s = error_set(&c->err, K3_ERR_CONTEXT_FULL, "generation reached the context of %d positions after %d tokens",
                          c->params.max_context, stats->emitted);
            break;
        }
        int n_draft = 0;
        if (d) {
            int max = params->spec_max < room ? params->spec_max : room;
            const int left = params->max_tokens - stats->emitted; /* drafts past the limit are wasted */
            if (max > left)
                max = left;
            if (!params->spec_always)
                max = pace_allow(&pc, draft_acceptance(d), max);
            if ((s = draft_sync(d, c->tokens, c->length, &c->err)) != K3_OK)
                break;
            if (max > 0)
                n_draft = draft_propose(d, pending, max, params->stop_ids, params->n_stop_ids, batch + 1);
            if (params->replay_acceptance > 0.0 && n_draft > 0)
                replay_spoil(&replay_seed, params->replay_acceptance, batch + 1, n_draft, vocab);
            if (heal_active(&r.h))
                n_draft = heal_allowed_prefix(&r.h, r.h.done, batch + 1, n_draft);
        }
        batch[0] = pending;
        const int constrained = n_draft > 0 && heal_active(&r.h);
        stats->forward_passes++;
        const double t0 = io_now();
        const float *rows = NULL; /* (n_draft + 1, vocab) the verify pass's logits, for healing's verdicts */
        s = n_draft > 0 ? context_verify(c, batch, n_draft + 1, argmax, &rows) : context_decode(c, batch, 1, NULL, 0, NULL);
        if (s != K3_OK)
            break;
        double seconds = io_now() - t0;
        if (n_draft == 0) {
            pc.step = blend(pc.step, seconds);
            pending = c->next;
            if (heal_active(&r.h) && (s = heal_next(&r, r.h.done, c->last_logits, &pending)) != K3_OK)
                break;
            continue;
        }
        memcpy(verdict, argmax, sizeof(int32_t) * (size_t)(n_draft + 1));
        if (constrained) {
            /* verdict[i] is the token after batch[0..i]: constrained while bytes remain
             * after them (the drafts were allowed, so the offsets follow them). */
            size_t at = r.h.done;
            for (int i = 0; i <= n_draft && at < r.h.n; i++) {
                if ((s = heal_next(&r, at, rows + (size_t)i * vocab, &verdict[i])) != K3_OK) {
                    context_verify_keep(c, 0);
                    goto done;
                }
                if (i < n_draft)
                    at = heal_advance(&r.h, at, batch[i + 1]);
            }
        }
        stats->rounds++;
        stats->drafted += n_draft;
        int accepted = 0;
        while (accepted < n_draft && verdict[accepted] == batch[accepted + 1])
            accepted++;
        draft_feedback(d, n_draft, accepted);
        stats->accepted += accepted;
        if (params->on_verify)
            params->on_verify(params->user, n_draft, accepted);
        /* Emit the accepted drafts; one may end generation early. */
        int used = 0, ended = 0;
        while (used < accepted && !ended)
            ended = emit(&r, batch[1 + used++]);
        /* The sequence keeps this pass's tokens up to the last emitted; batch[used] is
         * that one when generation ended, and stays undecoded like any last token. */
        const double t1 = io_now();
        context_verify_keep(c, ended ? used : 1 + used);
        seconds += io_now() - t1;
        /* What the drafts added to a serial step (a step measured before this pass). */
        const double extra = pc.step > 0 ? (seconds - pc.step) / n_draft : 0.0;
        pc.extra = pc.extra >= 0 ? 0.7 * pc.extra + 0.3 * (extra > 0 ? extra : 0.0) : (extra > 0 ? extra : 0.0);
        if (ended)
            break;
        pending = verdict[accepted];
    }
done:
    c->spec_step_seconds = pc.step;
    c->spec_extra_seconds = pc.extra;
    draft_free(d);
    return s;
}
