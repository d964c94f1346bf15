/* kda.c - one KDA layer over a batch of tokens (see kda.h and docs: k3-architecture §3.4).
 * Projections are batched matmuls, gates and activations element-wise over the batch; the
 * conv and each head's recurrence run token by token in order, heads independently. */
#include "kda.h"

#include <math.h>
#include <string.h>

#include "isa.h"
#include "ops.h"

/* State layout: S (H, D, D) with S[h][key][value], then conv history (3, conv_k-1, H*D). */
long kda_state_floats(const kda_dims *dm) {
    const long p = (long)dm->heads * dm->head_dim;
    return (long)dm->heads * dm->head_dim * dm->head_dim + 3L * (dm->conv_k - 1) * p;
}

/* Journal row of one token: pre-conv q, k, v (3, P), then the normalised k (P), v (P),
 * the decay (P) and beta (H). */
long kda_journal_row_floats(const kda_dims *dm) {
    const long p = (long)dm->heads * dm->head_dim;
    return 6 * p + dm->heads;
}

long kda_scratch_floats(const kda_dims *dm, int n) {
    const long p = (long)dm->heads * dm->head_dim;
    return (long)n * (6 * p + dm->gate_rank + dm->heads) + p;
}

/* Shifts one token's pre-conv projection u (width channels) into the history hist
 * (conv_k-1 rows, `stride` floats apart, the same channels of each). */
static void conv_shift(float *hist, int k, long stride, int width, const float *u) {
    for (int j = 0; j + 1 < k - 1; j++)
        memcpy(hist + (long)j * stride, hist + (long)(j + 1) * stride, sizeof(float) * (size_t)width);
    if (k > 1)
        memcpy(hist + (long)(k - 2) * stride, u, sizeof(float) * (size_t)width);
}

/* Causal depthwise conv of `width` channels of one token's projection u with their carried
 * pre-conv history hist (conv_k-1 rows `stride` apart, oldest first); taps (conv_k rows
 * `stride` apart, the same channels of each: kda.h's layout); writes silu(conv) to y and
 * shifts u into the history. Each channel sums its taps oldest first from zero, whatever
 * the width; the loops run taps outer and channels inner so that the channels go in
 * vectors (channel by channel it was most of head_inputs' time in a prefill). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
static void short_conv(const float *restrict taps, float *restrict hist, int k, long stride, int width,
                       const float *restrict u, float *restrict y) {
    for (int c = 0; c < width; c++)
        y[c] = 0.0f;
    for (int j = 0; j < k - 1; j++) {
        const float *h = hist + (long)j * stride, *w = taps + (long)j * stride;
        for (int c = 0; c < width; c++)
            y[c] += w[c] * h[c];
    }
    const float *w = taps + (long)(k - 1) * stride;
    for (int c = 0; c < width; c++)
        y[c] += w[c] * u[c];
    ops_silu_n(y, width);
    conv_shift(hist, k, stride, width, u);
}

/* One key row of a head's state (d values): decay it by alpha, then add it times k_i into
 * u. restrict spares the overlap test the compiler otherwise runs before each vector loop;
 * the operations stay element-wise, so the rounding is that of the scalar loop. */
static inline void row_decay_read(float *restrict row, int d, float alpha, float k_i, float *restrict u) {
    for (int j = 0; j < d; j++) {
        row[j] *= alpha;
        u[j] += row[j] * k_i;
    }
}

/* The delta write of one key row alone, row += bk * delta: the same operations as
 * row_write_read's write (no fused multiply-add anywhere: -ffp-contract=off), so the row
 * ends with the same bits. */
static inline void row_write(float *restrict row, int d, float bk, const float *restrict delta) {
    for (int j = 0; j < d; j++)
        row[j] += bk * delta[j];
}

/* The delta write of one key row, row += bk * delta, then row times q_i added into o. */
static inline void row_write_read(float *restrict row, int d, float bk, const float *restrict delta, float q_i,
                                  float *restrict o) {
    for (int j = 0; j < d; j++) {
        row[j] += bk * delta[j];
        o[j] += row[j] * q_i;
    }
}

/* What one head reads and writes for a batch. Rows of q, k, v, gate, decay and o are
 * (n, P) with the head's D columns at h * D; beta is (n, H). Each head turns its own
 * columns of the projections into the recurrence's inputs (conv, decay, beta) before its
 * tokens, and gates its output after: element-wise or per channel, so where it runs
 * changes no bit, and on several threads none of it waits on one. */
typedef struct {
    const kda_dims *dm;
    const kda_weights *w;
    float *state;              /* the layer's S (H, D, D), then the conv history */
    float *q, *k, *v;          /* pre-conv projections: made post-conv here, q and k normalised */
    const float *gate;         /* output gate logits */
    float *decay;              /* decay-gate pre-activation, made the decay here */
    float *beta;               /* b projection, made its sigmoid here */
    float *o;
    float *u;                  /* (H, D) one row of scratch per head */
    float *journal;            /* NULL, or (n, kda_journal_row_floats) */
    int n;
} heads_job;

/* Head h's columns of the batch's inputs to the recurrence: the pre-conv projections to
 * the journal, the short conv (token by token, each channel its own history), the decay
 * e^g with g = lb * sigmoid(a * (z + dt)) or -a * softplus(z + dt), a = e^A_log, and
 * sigmoid(beta). */
static void head_inputs(const heads_job *j, int h) {
    const kda_dims *dm = j->dm;
    const int H = dm->heads, D = dm->head_dim, P = H * D, K = dm->conv_k;
    const long off = (long)h * D, row = kda_journal_row_floats(dm), hist_stride = (long)(K - 1) * P;
    float *hist = j->state + (long)H * D * D + off;
    float *conv_out = j->u + off;
    float *proj[3] = {j->q, j->k, j->v};
    for (int t = 0; t < j->n; t++)
        for (int i = 0; i < 3; i++) {
            float *u = proj[i] + (long)t * P + off;
            if (j->journal)
                memcpy(j->journal + t * row + i * P + off, u, sizeof(float) * D);
            short_conv(j->w->conv[i] + off, hist + i * hist_stride, K, P, D, u, conv_out);
            memcpy(u, conv_out, sizeof(float) * D);
        }
    const float a = expf(j->w->a_log[h]);
    const float *dt = j->w->dt_bias + off;
    for (int t = 0; t < j->n; t++) {
        float *zt = j->decay + (long)t * P + off;
        if (dm->lower_bound_gate) {
            for (int i = 0; i < D; i++)
                zt[i] = a * (zt[i] + dt[i]);
            ops_sigmoid_n(zt, D, zt);
            for (int i = 0; i < D; i++)
                zt[i] = dm->gate_lower_bound * zt[i];
        } else {
            for (int i = 0; i < D; i++)
                zt[i] = -a * ops_softplus(zt[i] + dt[i]);
        }
        ops_exp_n(zt, D);
        ops_sigmoid_n(j->beta + (long)t * H + h, 1, j->beta + (long)t * H + h);
    }
}

/* After head h's tokens: what the state consumed to the journal (k as normalised), and the
 * output gate on its columns of o. */
static void head_outputs(const heads_job *j, int h) {
    const int H = j->dm->heads, D = j->dm->head_dim, P = H * D;
    const long off = (long)h * D, row = kda_journal_row_floats(j->dm);
    for (int t = 0; j->journal && t < j->n; t++) {
        float *r = j->journal + t * row + 3L * P + off;
        const long at = (long)t * P + off;
        memcpy(r, j->k + at, sizeof(float) * D);
        memcpy(r + P, j->v + at, sizeof(float) * D);
        memcpy(r + 2L * P, j->decay + at, sizeof(float) * D);
        j->journal[t * row + 6L * P + h] = j->beta[(long)t * H + h];
    }
    for (int t = 0; t < j->n; t++)
        ops_mul_sigmoid(j->o + (long)t * P + off, j->gate + (long)t * P + off, D);
}

/* A pass over a head's whole state takes its columns in blocks of STATE_VECS vectors whose
 * sums stay in registers through all D rows, where a row at a time stored and reloaded
 * them for every row. The operations are the row functions' own, element-wise, and each
 * sum still adds the rows in key order, so the bits are theirs; they take the columns past
 * the last whole block. One variant per instruction-set level (isa.h), in its register
 * width: a 64-byte vector built for AVX2 went through the stack, and the recurrence ran
 * 16x slower there than built for AVX-512 (8 heads of 128, one token: 259 against 16 us). */
#define STATE_VECS 4

/* Unaligned moves (macros: a function returning the vector would change the ABI of the
 * baseline variant). */
#define STATE_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define STATE_STORE(p, v) memcpy((p), &(v), sizeof(v))

/* pass_decay_read_##S: u = S^T k after each key row i is decayed by decay[i]
 * (row_decay_read over all rows). pass_write_read_##S: each key row i += (bt * k[i]) *
 * delta, then o = S^T q of the updated rows (row_write_read over all rows). VF floats a
 * vector. */
#define STATE_PASSES(S, TARGET, VF)                                                                                   \
    typedef float state_vec_##S __attribute__((vector_size(VF * 4)));                                               \
    static inline __attribute__((always_inline)) TARGET void pass_decay_read_##S(                                   \
        float *restrict S_, int D, const float *decay, const float *k, float *restrict u) {                         \
        int j0 = 0;                                                                                                 \
        for (; j0 + STATE_VECS * VF <= D; j0 += STATE_VECS * VF) {                                                  \
            state_vec_##S acc[STATE_VECS] = {{0}};                                                                  \
            for (int i = 0; i < D; i++) {                                                                           \
                float *row = S_ + (long)i * D + j0;                                                                 \
                const float a = decay[i], k_i = k[i];                                                               \
                _Pragma("GCC unroll 4") for (int b = 0; b < STATE_VECS; b++) {                                      \
                    state_vec_##S r;                                                                                \
                    STATE_LOAD(r, row + VF * b);                                                                    \
                    r = r * a;                                                                                      \
                    STATE_STORE(row + VF * b, r);                                                                   \
                    acc[b] = acc[b] + r * k_i;                                                                      \
                }                                                                                                   \
            }                                                                                                       \
            for (int b = 0; b < STATE_VECS; b++)                                                                    \
                STATE_STORE(u + j0 + VF * b, acc[b]);                                                               \
        }                                                                                                           \
        if (j0 < D) {                                                                                               \
            for (int j = j0; j < D; j++)                                                                            \
                u[j] = 0.0f;                                                                                        \
            for (int i = 0; i < D; i++)                                                                             \
                row_decay_read(S_ + (long)i * D + j0, D - j0, decay[i], k[i], u + j0);                              \
        }                                                                                                           \
    }                                                                                                               \
    static inline __attribute__((always_inline)) TARGET void pass_write_read_##S(                                   \
        float *restrict S_, int D, float bt, const float *k, const float *delta, const float *q, float *restrict o) { \
        int j0 = 0;                                                                                                 \
        for (; j0 + STATE_VECS * VF <= D; j0 += STATE_VECS * VF) {                                                  \
            state_vec_##S acc[STATE_VECS] = {{0}}, dl[STATE_VECS];                                                  \
            for (int b = 0; b < STATE_VECS; b++)                                                                    \
                STATE_LOAD(dl[b], delta + j0 + VF * b);                                                             \
            for (int i = 0; i < D; i++) {                                                                           \
                float *row = S_ + (long)i * D + j0;                                                                 \
                const float bk = bt * k[i], q_i = q[i];                                                             \
                _Pragma("GCC unroll 4") for (int b = 0; b < STATE_VECS; b++) {                                      \
                    state_vec_##S r;                                                                                \
                    STATE_LOAD(r, row + VF * b);                                                                    \
                    r = r + bk * dl[b];                                                                             \
                    STATE_STORE(row + VF * b, r);                                                                   \
                    acc[b] = acc[b] + r * q_i;                                                                      \
                }                                                                                                   \
            }                                                                                                       \
            for (int b = 0; b < STATE_VECS; b++)                                                                    \
                STATE_STORE(o + j0 + VF * b, acc[b]);                                                               \
        }                                                                                                           \
        if (j0 < D) {                                                                                               \
            for (int j = j0; j < D; j++)                                                                            \
                o[j] = 0.0f;                                                                                        \
            for (int i = 0; i < D; i++)                                                                             \
                row_write_read(S_ + (long)i * D + j0, D - j0, bt * k[i], delta + j0, q[i], o + j0);                \
        }                                                                                                           \
    }                                                                                                               \
    /* Head h's tokens in order: its state stays in cache for the batch. Two passes over the                     \
     * state per token, each key row once: decay it and add it into u = S^T k; then the delta                     \
     * write and the read o = S^T q of the updated row. Each u[j] and o[j] sums over rows in                      \
     * key order. */                                                                                                \
    static TARGET void recurrence_##S(const heads_job *j, int h) {                                                  \
        const int H = j->dm->heads, D = j->dm->head_dim, P = H * D;                                                 \
        const float q_scale = 1.0f / sqrtf((float)D);                                                               \
        float *Sh = j->state + (long)h * D * D, *u = j->u + (long)h * D;                                            \
        for (int t = 0; t < j->n; t++) {                                                                            \
            const long at = (long)t * P + (long)h * D;                                                              \
            float *q = j->q + at, *k = j->k + at, *oh = j->o + at;                                                  \
            const float *v = j->v + at, *decay = j->decay + at;                                                     \
            const float bt = j->beta[(long)t * H + h];                                                              \
            ops_l2norm(q, D, 1e-6f, q_scale);                                                                       \
            ops_l2norm(k, D, 1e-6f, 1.0f);                                                                          \
            pass_decay_read_##S(Sh, D, decay, k, u);                                                                \
            for (int c = 0; c < D; c++)                                                                             \
                u[c] = v[c] - u[c];                                                                                 \
            pass_write_read_##S(Sh, D, bt, k, u, q, oh);                                                            \
            /* The head-wise RMSNorm. */                                                                            \
            ops_rmsnorm(oh, j->w->o_norm, D, j->dm->norm_eps, oh);                                                  \
        }                                                                                                           \
    }

/* 16 floats a vector for AVX-512, 8 for AVX2, 4 for the baseline (SSE). */
#ifdef ISA_X86
STATE_PASSES(avx512, ISA_TARGET_AVX512, 16)
STATE_PASSES(avx2, ISA_TARGET_AVX2, 8)
#endif
STATE_PASSES(base, ISA_TARGET_BASE, 4)

static void run_heads(void *arg, int h0, int h1) {
    const heads_job *j = arg;
    const isa_level level = isa_best();
    (void)level; /* one variant only off x86 */
    for (int h = h0; h < h1; h++) {
        head_inputs(j, h);
#ifdef ISA_X86
        if (level == ISA_AVX512)
            recurrence_avx512(j, h);
        else if (level == ISA_AVX2)
            recurrence_avx2(j, h);
        else
#endif
            recurrence_base(j, h);
        head_outputs(j, h);
    }
}

/* A batch's heads run in parallel (each owns its state and its columns); one token's do
 * not: a head is then a few microseconds, about what handing it over costs (2-thread
 * decode on small was slower with them split). */
#define PARALLEL_HEADS_MIN_TOKENS 4

void kda_forward(const kda_dims *dm, const kda_weights *w, float *state, const float *x, int n, float *out,
                 float *scratch, float *journal, const kernels_impl *impl, threads *pool) {
    const int H = dm->heads, D = dm->head_dim, d = dm->hidden;
    const int P = H * D;
    float *uq = scratch;                  /* (n, P) pre-conv projections, then q */
    float *uk = uq + (long)n * P;         /* (n, P) then k */
    float *uv = uk + (long)n * P;         /* (n, P) then v */
    float *gate = uv + (long)n * P;       /* (n, P) output gate logits */
    float *z = gate + (long)n * P;        /* (n, P) decay-gate pre-activation, then the decay */
    float *o = z + (long)n * P;           /* (n, P) attention output */
    float *fa = o + (long)n * P;          /* (n, gate_rank) */
    float *beta = fa + (long)n * dm->gate_rank; /* (n, H) */
    float *u = beta + (long)n * H;       /* (H, D) per head: the conv's output, then S^T k and v - S^T k */

    const kernels_product from_x[] = {
        {&w->q, uq, P}, {&w->k, uk, P}, {&w->v, uv, P}, {&w->g, gate, P}, {&w->f_a, fa, dm->gate_rank}, {&w->b, beta, H},
    };
    kernels_matmul_same_input(impl, from_x, 6, x, d, n, pool);
    kernels_matmul(impl, &w->f_b, fa, dm->gate_rank, n, z, P, pool);

    /* Per token and state element: the read into u, the delta write, the read into o. */
    kernels_note_multiply_adds(3ull * (uint64_t)n * H * D * D);
    heads_job job = {dm, w, state, uq, uk, uv, gate, z, beta, o, u, journal, n};
    threads_run(n >= PARALLEL_HEADS_MIN_TOKENS ? pool : NULL, H, 1, run_heads, &job);
    kernels_matmul(impl, &w->o, o, P, n, out, d, pool);
}

/* One head's share of kda_advance_journal: the first two steps of run_heads' token loop
 * (decay and read into u; the delta write) on journalled inputs, without the read into o. */
typedef struct {
    const kda_dims *dm;
    float *state;
    const float *journal;
    float *u; /* (H, D) */
    int keep;
} advance_job;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
static void advance_heads(void *arg, int h0, int h1) {
    const advance_job *j = arg;
    const int H = j->dm->heads, D = j->dm->head_dim, P = H * D;
    const long row = kda_journal_row_floats(j->dm);
    for (int h = h0; h < h1; h++) {
        float *Sh = j->state + (long)h * D * D, *u = j->u + (long)h * D;
        for (int t = 0; t < j->keep; t++) {
            const float *r = j->journal + t * row + 3L * P;
            const float *k = r + (long)h * D, *v = r + P + (long)h * D, *decay = r + 2L * P + (long)h * D;
            const float bt = r[3L * P + h];
            for (int c = 0; c < D; c++)
                u[c] = 0.0f;
            for (int i = 0; i < D; i++)
                row_decay_read(Sh + (long)i * D, D, decay[i], k[i], u);
            for (int c = 0; c < D; c++)
                u[c] = v[c] - u[c];
            for (int i = 0; i < D; i++)
                row_write(Sh + (long)i * D, D, bt * k[i], u);
        }
    }
}

void kda_advance_journal(const kda_dims *dm, float *state, const float *journal, int keep, float *scratch,
                         threads *pool) {
    const int H = dm->heads, D = dm->head_dim, P = H * D;
    const long row = kda_journal_row_floats(dm);
    float *hist = state + (long)H * D * D;
    const long hist_stride = (long)(dm->conv_k - 1) * P;
    for (int t = 0; t < keep; t++)
        for (int i = 0; i < 3; i++)
            conv_shift(hist + i * hist_stride, dm->conv_k, P, P, journal + t * row + i * P);
    advance_job job = {dm, state, journal, scratch, keep};
    threads_run(keep >= PARALLEL_HEADS_MIN_TOKENS ? pool : NULL, H, 1, advance_heads, &job);
}
