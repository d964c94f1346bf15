/* test_ops.c - the per-token operations against float64 formulas: SiTU's own e^x and tanh
 * series over every range the activation meets, including the series' seam at |y| = 0.5,
 * saturation and zero; the array forms of the activations against the one-value forms. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ops.h"

static double situ_exact(double g, double u, double b1, double b2) {
    const double gate = b1 * tanh(g / b1) / (1.0 + exp(-g));
    return gate * (b2 > 0.0 ? b2 * tanh(u / b2) : u);
}

/* Relative error allowed: a few float ulp for each of the three series and the products
 * that join them (measured worst 1.9e-6). Below 1e-30 in magnitude the error is measured
 * against 1e-30: there the gate's sigmoid has saturated (e^-g past e^87 is clamped), and
 * the result is zero to float precision whatever its exact tiny value. */
#define SITU_REL 4e-6

TEST(situ_matches_the_float64_formula_across_ranges_and_at_the_series_seam) {
    static float g[4001], u[4001], out[4001];
    const int n = 4001;
    for (int i = 0; i < n; i++) {
        g[i] = (float)(-100.0 + 200.0 * i / (n - 1));                  /* saturated both ways */
        u[i] = (float)(i % 7 == 0 ? 0.5 * 25 : -80.0 + 160.0 * i / n); /* seam of tanh(u/25) */
    }
    g[0] = 0.0f;
    g[1] = 2.0f;    /* g / 4 = 0.5: the seam of tanh(g/b1) */
    g[2] = -2.0f;
    g[3] = 1e-6f;
    u[3] = 3e-5f;
    for (int pass = 0; pass < 2; pass++) {
        const float b2 = pass ? 25.0f : 0.0f; /* with and without the cap on the up branch */
        ops_situ(g, u, n, 4.0f, b2, out);
        double worst = 0.0;
        int at = 0;
        for (int i = 0; i < n; i++) {
            const double want = situ_exact(g[i], u[i], 4.0, b2);
            const double err = fabs(out[i] - want) / fmax(fabs(want), 1e-30);
            if (want != 0.0 && err > worst) {
                worst = err;
                at = i;
            }
            if (want == 0.0)
                CHECK(out[i] == 0.0f);
        }
        if (worst > SITU_REL)
            harness_fail(__FILE__, __LINE__, "b2 %g: relative error %.3g at g=%g u=%g", b2, worst, g[at], u[at]);
    }
}

/* The array forms give exactly the one-value forms' bits at every position (vector lanes
 * and the scalar tail alike), within a few ulp of the float64 formulas; the norms' eight
 * partial sums equal a float64 sum to rounding; softmax sums to one. */
TEST(array_activations_equal_the_one_value_forms_bit_for_bit_and_the_formulas_closely) {
    enum { N = 203 };
    float x[N], s[N], e[N], silu[N], gated[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i - 101) * 0.37f;
        e[i] = silu[i] = x[i];
        gated[i] = 2.0f;
    }
    ops_sigmoid_n(x, N, s);
    ops_silu_n(silu, N);
    ops_mul_sigmoid(gated, x, N);
    ops_exp_n(e, N);
    for (int i = 0; i < N; i++) {
        CHECK(s[i] == ops_sigmoid(x[i]));
        CHECK(silu[i] == ops_silu(x[i]));
        CHECK(gated[i] == 2.0f * ops_sigmoid(x[i]));
        const double sig = 1.0 / (1.0 + exp(-(double)x[i]));
        CHECK_NEAR(s[i], sig, 4e-7 * sig);
        CHECK_NEAR(e[i], exp((double)x[i]), 3e-7 * exp((double)x[i]));
    }
    double ss = 0.0;
    for (int i = 0; i < N; i++)
        ss += (double)x[i] * x[i];
    CHECK_NEAR(ops_sum_squares(x, N), ss, 1e-12 * ss);
    float p[N];
    for (int i = 0; i < N; i++)
        p[i] = x[i] * 0.1f;
    ops_softmax(p, N);
    double total = 0.0;
    for (int i = 0; i < N; i++)
        total += p[i];
    CHECK_NEAR(total, 1.0, 1e-6);
}

/* softmax with one running maximum, e^x from ops_exp_n and the sum in ops.c's eight
 * partials: what ops_softmax must equal bit for bit, however it finds the maximum. */
static void softmax_reference(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++)
        x[i] = x[i] - m;
    ops_exp_n(x, n);
    double p[8] = {0};
    for (int i = 0; i < n; i++)
        p[i % 8] += x[i];
    const float inv = (float)(1.0 / (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))));
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

TEST(softmax_equals_the_running_maximum_form_bit_for_bit_with_ties_zeros_and_nan) {
    enum { N = 150 };
    float x[N], got[N], want[N];
    for (int n = 1; n <= N; n++)
        for (int pattern = 0; pattern < 4; pattern++) {
            for (int i = 0; i < n; i++) {
                const unsigned h = (unsigned)(i + 31 * n + 977 * pattern) * 2654435761u;
                x[i] = ((float)(h >> 8) / 16777216.0f - 0.5f) * 40.0f;
                if (pattern == 1)
                    x[i] = -fabsf(x[i]) * (float)(i % 3); /* maximum zero, of both signs */
                if (pattern == 1 && i % 5 == 4)
                    x[i] = -0.0f;
                if (pattern == 2)
                    x[i] = (float)(i % 4); /* ties for the maximum in every lane */
            }
            if (pattern == 3 && n > 2)
                x[n / 2] = NAN; /* past the first: skipped by the maximum, as there */
            memcpy(got, x, sizeof(float) * n);
            memcpy(want, x, sizeof(float) * n);
            ops_softmax(got, n);
            softmax_reference(want, n);
            if (memcmp(got, want, sizeof(float) * n) != 0) {
                harness_fail(__FILE__, __LINE__, "n %d, pattern %d: bits differ", n, pattern);
                return;
            }
        }
    x[0] = NAN;
    x[1] = 3.0f;
    ops_softmax(x, 2);
    CHECK(isnan(x[0]) && isnan(x[1]));
}
