/* test_moe.c - the latent MoE's routing with chosen logits and bias (k3-architecture §3.7),
 * checked against a double-precision recomputation written here: selection by sigmoid
 * score plus the correction bias, weights from the plain scores, renormalised over the
 * top k (or not, and scaled), ties to the lower expert id, the chosen experts reported in
 * ascending order, and a batch routing every token as if it were alone, bit for bit. The
 * scores are chosen far from 0.5, where a dropped renormalisation changes the output by a
 * factor (near 0.5 with top-2 the weights sum to about 1 and it would hide). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "moe.h"

enum { D = 4, E = 6, K = 3, L = 4, I = 8 };

typedef struct {
    float router[E * D], down[L * D], up[D * L];
    float w1[E][I * L], w3[E][I * L], w2[E][L * I];
    float bias[E];
    moe_expert experts[E];
    moe_dims dims;
    moe_weights w;
} moe_case;

static kernels_matrix f32(const float *data, int rows, int cols) {
    return (kernels_matrix){KERNELS_F32, rows, cols, data, NULL};
}

/* Router column c holds the logits a one-hot input on c produces: expert e's logit for
 * token 0 is logits0[e]. Identity latent projections, no latent norm, no shared experts,
 * so the output is exactly the weighted sum of the chosen experts' outputs. */
static void setup(moe_case *c, const float logits0[E], const float bias[E], int renormalize, float scale) {
    memset(c, 0, sizeof *c);
    unsigned s = 7;
    for (int e = 0; e < E; e++) {
        for (int j = 0; j < D; j++) {
            s = s * 1103515245u + 12345u;
            c->router[e * D + j] = j == 0 ? logits0[e] : (float)((int)(s >> 16) % 800 - 400) / 100.0f;
        }
        for (int i = 0; i < I * L; i++) {
            s = s * 1103515245u + 12345u;
            c->w1[e][i] = (float)((int)(s >> 16) % 2000 - 1000) / 1000.0f;
            s = s * 1103515245u + 12345u;
            c->w3[e][i] = (float)((int)(s >> 16) % 2000 - 1000) / 1000.0f;
            s = s * 1103515245u + 12345u;
            c->w2[e][i] = (float)((int)(s >> 16) % 2000 - 1000) / 1000.0f;
        }
        c->experts[e] = (moe_expert){f32(c->w1[e], I, L), f32(c->w3[e], I, L), f32(c->w2[e], L, I)};
        c->bias[e] = bias[e];
    }
    for (int i = 0; i < L; i++) {
        c->down[i * D + i] = 1.0f;
        c->up[i * L + i] = 1.0f;
    }
    c->dims = (moe_dims){D, E, K, L, I, 0, renormalize, scale, 0, 1e-5f, 4.0f, 25.0f};
    c->w.router = f32(c->router, E, D);
    c->w.router_bias = c->bias;
    c->w.down_proj = f32(c->down, L, D);
    c->w.up_proj = f32(c->up, D, L);
    c->w.experts = c->experts;
}

static double sig(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* out (D) = sum over `chosen` of weight x w2 situ(w1 z, w3 z), all in double. */
static void expected(const moe_case *c, const double *z, const int chosen[K], const double weight[K], double *out) {
    memset(out, 0, sizeof(double) * D);
    for (int k = 0; k < K; k++) {
        const int e = chosen[k];
        double h[I];
        for (int i = 0; i < I; i++) {
            double g = 0.0, u = 0.0;
            for (int j = 0; j < L; j++) {
                g += (double)c->w1[e][i * L + j] * z[j];
                u += (double)c->w3[e][i * L + j] * z[j];
            }
            h[i] = 4.0 * tanh(g / 4.0) * sig(g) * 25.0 * tanh(u / 25.0);
        }
        for (int j = 0; j < L; j++) {
            double y = 0.0;
            for (int i = 0; i < I; i++)
                y += (double)c->w2[e][j * I + i] * h[i];
            out[j] += weight[k] * y;
        }
    }
}

/* Runs n tokens through moe_forward; returns 0, or -1 when the call failed. */
static int run(const moe_case *c, const float *x, int n, float *out, int *selected) {
    float *scratch = malloc(sizeof(float) * (size_t)moe_scratch_floats(&c->dims, n));
    k3_error err = {K3_OK, ""};
    const k3_status s = scratch ? moe_forward(&c->dims, &c->w, NULL, x, n, out, selected, scratch, &kernels_scalar, NULL, &err)
                                : K3_ERR_OUT_OF_MEMORY;
    free(scratch);
    return s == K3_OK ? 0 : -1;
}

/* The one-hot token whose logits are the case's logits0. */
static const float E0[D] = {1.0f, 0.0f, 0.0f, 0.0f};

/* Largest |out - expected| over the output, relative to 1 + |expected|, for the experts
 * `chosen` with weights `weight` applied to the one-hot token. */
static double routed_error(const moe_case *c, const float *out, const int chosen[K], const double weight[K]) {
    const double z[L] = {1.0, 0.0, 0.0, 0.0};
    double want[D], worst = 0.0;
    expected(c, z, chosen, weight, want);
    for (int j = 0; j < D; j++)
        worst = fmax(worst, fabs(out[j] - want[j]) / (1.0 + fabs(want[j])));
    return worst;
}

static const float LOGITS[E] = {4.0f, -3.0f, 2.5f, 0.5f, -1.0f, 3.0f};
/* Without bias the top 3 are 0, 5, 2; the bias lifts 3 (0.62 + 0.9) over all and drops 5. */
static const float BIAS[E] = {0.0f, 0.0f, 0.0f, 0.9f, 0.0f, -0.5f};
static const int CHOSEN[K] = {0, 2, 3};

static moe_case the_case; /* static: a failed CHECK returns without freeing anything */

TEST(moe_routing_selects_by_score_plus_bias_and_weights_by_renormalised_plain_scores) {
    moe_case *c = &the_case;
    setup(c, LOGITS, BIAS, 1, 1.0f);
    float out[D];
    int sel[K];
    CHECK(run(c, E0, 1, out, sel) == 0);
    CHECK(memcmp(sel, CHOSEN, sizeof sel) == 0);
    const double sum = sig(4.0) + sig(2.5) + sig(0.5);
    const double weight[K] = {sig(4.0) / sum, sig(2.5) / sum, sig(0.5) / sum};
    CHECK(routed_error(c, out, CHOSEN, weight) < 1e-5);
    /* Renormalisation dropped, or the bias used in the weights, would be far off here. */
    const double plain[K] = {sig(4.0), sig(2.5), sig(0.5)};
    const double biased_sum = sig(4.0) + sig(2.5) + sig(0.5) + 0.9;
    const double biased[K] = {sig(4.0) / biased_sum, sig(2.5) / biased_sum, (sig(0.5) + 0.9) / biased_sum};
    CHECK(routed_error(c, out, CHOSEN, plain) > 0.1);
    CHECK(routed_error(c, out, CHOSEN, biased) > 0.01);
}

TEST(moe_routing_without_renormalisation_scales_the_plain_scores) {
    moe_case *c = &the_case;
    setup(c, LOGITS, BIAS, 0, 2.5f);
    float out[D];
    int sel[K];
    CHECK(run(c, E0, 1, out, sel) == 0);
    const double weight[K] = {2.5 * sig(4.0), 2.5 * sig(2.5), 2.5 * sig(0.5)};
    CHECK(routed_error(c, out, CHOSEN, weight) < 1e-5);
}

TEST(moe_routing_ties_go_to_the_lower_expert_id) {
    /* Experts 1 and 4 tie for the third place (equal logits, no bias). */
    const float logits[E] = {5.0f, 1.0f, -2.0f, 4.0f, 1.0f, -6.0f};
    const float bias[E] = {0};
    setup(&the_case, logits, bias, 1, 1.0f);
    float out[D];
    int sel[K];
    CHECK(run(&the_case, E0, 1, out, sel) == 0);
    const int want[K] = {0, 1, 3};
    CHECK(memcmp(sel, want, sizeof sel) == 0);
}

TEST(moe_batch_routes_each_token_as_if_alone_bit_for_bit) {
    moe_case *c = &the_case;
    setup(c, LOGITS, BIAS, 1, 1.0f);
    /* Three tokens with different routings (the router's other columns are random). */
    const float x[3 * D] = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.0f, -0.3f, 0.0f, 0.0f, 1.2f};
    float batch[3 * D], alone[D];
    int sel_batch[3 * K], sel_alone[K];
    CHECK(run(c, x, 3, batch, sel_batch) == 0);
    int differs = 0;
    for (int t = 0; t < 3; t++) {
        CHECK(run(c, x + t * D, 1, alone, sel_alone) == 0);
        CHECK(memcmp(alone, batch + t * D, sizeof alone) == 0);
        CHECK(memcmp(sel_alone, sel_batch + t * K, sizeof sel_alone) == 0);
        differs |= memcmp(sel_alone, sel_batch, sizeof sel_alone) != 0;
    }
    CHECK(differs); /* the tokens did not all route alike */
}
