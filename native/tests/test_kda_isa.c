/* test_kda_isa.c - a KDA layer gives the same bits at every instruction-set level this CPU
 * runs (isa.h): its state passes are written once per register width, with head widths
 * that leave columns past the last whole block in each. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "isa.h"
#include "kda.h"

enum { H = 2, D = 80, HIDDEN = 48, K = 4, RANK = 8, P = H * D };

static float value(unsigned i, float scale) {
    const unsigned h = i * 2654435761u;
    return ((float)(h >> 8) / 16777216.0f - 0.5f) * scale;
}

static kernels_matrix matrix(float *data, int rows, int cols, unsigned seed) {
    for (int i = 0; i < rows * cols; i++)
        data[i] = value(seed + (unsigned)i, 0.3f);
    return (kernels_matrix){KERNELS_F32, rows, cols, data, NULL};
}

/* Six tokens in one batch, then one alone, from a zero state: the outputs and the state. */
static void run(const kda_dims *dm, const kda_weights *w, float *out, float *state) {
    static float x[7 * HIDDEN], scratch[1 << 16];
    for (int i = 0; i < 7 * HIDDEN; i++)
        x[i] = value(77u + (unsigned)i, 2.0f);
    memset(state, 0, sizeof(float) * (size_t)kda_state_floats(dm));
    const kernels_impl *impl = kernels_best();
    kda_forward(dm, w, state, x, 6, out, scratch, NULL, impl, NULL);
    kda_forward(dm, w, state, x + 6 * HIDDEN, 1, out + 6 * HIDDEN, scratch, NULL, impl, NULL);
}

TEST(kda_layer_gives_the_same_bits_at_every_instruction_set_level) {
    static float q[P * HIDDEN], k[P * HIDDEN], v[P * HIDDEN], g[P * HIDDEN], o[HIDDEN * P], fa[RANK * HIDDEN],
        fb[P * RANK], b[H * HIDDEN], conv[3][K * P], a_log[H], dt[P], o_norm[D];
    const kda_dims dm = {HIDDEN, H, D, K, RANK, 1, -5.0f, 1e-6f};
    kda_weights w = {matrix(q, P, HIDDEN, 1), matrix(k, P, HIDDEN, 2),  matrix(v, P, HIDDEN, 3),
                     matrix(fa, RANK, HIDDEN, 4), matrix(fb, P, RANK, 5), matrix(b, H, HIDDEN, 6),
                     matrix(g, P, HIDDEN, 7), matrix(o, HIDDEN, P, 8), {NULL, NULL, NULL}, a_log, dt, o_norm};
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < K * P; i++)
            conv[c][i] = value(1000u * (unsigned)c + (unsigned)i, 1.0f);
        w.conv[c] = conv[c];
    }
    for (int i = 0; i < H; i++)
        a_log[i] = value(9u + (unsigned)i, 1.0f);
    for (int i = 0; i < P; i++)
        dt[i] = value(11u + (unsigned)i, 1.0f);
    for (int i = 0; i < D; i++)
        o_norm[i] = 1.0f + value(13u + (unsigned)i, 0.5f);
    CHECK(kda_scratch_floats(&dm, 6) <= (1 << 16));
    const long state_floats = kda_state_floats(&dm);
    float *want_state = malloc(sizeof(float) * (size_t)state_floats), *state = malloc(sizeof(float) * (size_t)state_floats);
    static float want[7 * HIDDEN], out[7 * HIDDEN];
    CHECK(want_state && state);
    isa_force(ISA_BASE);
    run(&dm, &w, want, want_state);
    for (int level = ISA_AVX2; level <= ISA_AVX512; level++) {
        if (!isa_supported((isa_level)level))
            continue;
        isa_force(level);
        run(&dm, &w, out, state);
        if (memcmp(out, want, sizeof out) != 0 || memcmp(state, want_state, sizeof(float) * (size_t)state_floats) != 0) {
            isa_force(-1);
            free(state);
            free(want_state);
            harness_fail(__FILE__, __LINE__, "level %d: outputs or state differ from the baseline's", level);
            return;
        }
    }
    isa_force(-1);
    free(state);
    free(want_state);
}
