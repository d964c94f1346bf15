/* kernels_avx512.c - AVX-512 products of bf16 / f32 / MXFP4 weights with f32 activations.
 * This file alone is compiled with AVX-512 F/BW/VL/DQ enabled; kernels_avx512() checks the
 * CPU (and the OS's support for the 512-bit state) before handing it out.
 *
 * One dot product, one instruction sequence (kernels.h): for a (row, token) pair a single
 * 16-lane accumulator takes acc = fma(w[c..c+16), x[c..c+16), acc) for c = 0, 16, 32, ...,
 * the last partial step with both operands masked to zero, then a fixed horizontal sum.
 * MXFP4 weights go 128 columns at a time: the chunk's eight products of unscaled weights
 * are summed, then that sum times each lane's block scale is added to the accumulator
 * (the input rearranged to match; see tile_mxfp4). So every tile shape below computes the
 * same bits per pair; the shapes differ only in how many weight and input vectors each
 * load serves:
 *  - one token (decode) runs one row at a time, one sequential stream (MXFP4: tiles of 8
 *    short rows, the next rows prefetched);
 *  - a batch (prefill, verification) runs tiles of 4 rows x 6 tokens (MXFP4: 4 x 4): each
 *    weight vector, converted once, feeds every token of the tile, each input vector every
 *    row, 24 accumulators in registers. Token tiles are the outer loop, so a thread's chunk
 *    of rows (a few hundred kB at most) stays in L2 while the batch's tiles stream past it.
 * These results differ from the AVX2 and scalar kernels within rounding (another order of
 * additions), never between batch sizes, tiles or threads. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__)

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "threads.h"

/* The fixed horizontal sum: halves added down to 128 bits, then lanes (0+2, 1+3), then the
 * two left. */
static inline float hsum16(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* hsum16 of four accumulators at once, to y[0..3]: the same additions in the same tree
 * (each pair of lanes hsum16 adds is added here too, operands as there or swapped, which
 * gives the same bits), with the four vectors' steps sharing registers: 9 shuffles and 5
 * adds instead of 16 and 16. Where a tile's outputs are 4 consecutive rows of one token
 * this is its epilogue, which at K3's fixtures' widths (128-1536 columns: 1-12 steps of
 * MXFP4, 8-96 of bf16) was a fifth to a half of a tile's instructions. */
static inline void store_hsum16x4(__m512 a, __m512 b, __m512 c, __m512 d, float *y) {
    /* Lanes 0-7 of a register hold one vector's low 256 + high 256 bits, lanes 8-15 the next's. */
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
    /* 128-bit lane k: vector k's low 128 + high 128 of those 256. */
    const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
    /* Within each 128-bit lane: (0 + 2, 1 + 3), then the two. */
    const __m512 t = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm_storeu_ps(y, _mm512_castps512_ps128(_mm512_permutexvar_ps(first, u)));
}

static inline __m512 load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __m512 load_bf16_masked(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

static inline __m512 load_f32(const float *p) {
    return _mm512_loadu_ps(p);
}

static inline __m512 load_f32_masked(const float *p, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, p);
}

/* The body for NR rows x NT tokens of bf16 or f32 weights, constants at every call so the
 * accumulators stay in registers. */
#define DOT_TILE(NAME, WT, LOAD, LOAD_MASKED)                                                                        \
    static inline __attribute__((always_inline)) void NAME(const WT *rows, int cols, const float *x, int ldx,      \
                                                           float *y, int ldy, const int NR, const int NT) {        \
        __m512 acc[4][6];                                                                                           \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                        \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();                  \
        const int body = cols & ~15;                                                                                \
        for (int c = 0; c < body; c += 16) {                                                                        \
            if (NR == 1 && NT == 1) /* one token: a stream from memory (kernels.h) */                               \
                _mm_prefetch((const char *)(rows + c) + KERNELS_ONE_TOKEN_PREFETCH_BYTES, _MM_HINT_T1);             \
            __m512 w[4];                                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) w[r] = LOAD(rows + (long)r * cols + c);            \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                                  \
                const __m512 xv = _mm512_loadu_ps(x + (long)t * ldx + c);                                           \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                                    \
                    _mm512_fmadd_ps(w[r], xv, acc[r][t]);                                                           \
            }                                                                                                       \
        }                                                                                                           \
        if (body < cols) {                                                                                          \
            const __mmask16 m = (__mmask16)((1u << (cols - body)) - 1);                                             \
            __m512 w[4];                                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) w[r] = LOAD_MASKED(rows + (long)r * cols + body, m); \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                                  \
                const __m512 xv = _mm512_maskz_loadu_ps(m, x + (long)t * ldx + body);                               \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                                    \
                    _mm512_fmadd_ps(w[r], xv, acc[r][t]);                                                           \
            }                                                                                                       \
        }                                                                                                           \
        if (NR == 4) {                                                                                              \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++)                                                    \
                store_hsum16x4(acc[0][t], acc[1][t], acc[2][t], acc[3][t], y + (long)t * ldy);                      \
        } else {                                                                                                    \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                                    \
                _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) y[(long)t * ldy + r] = hsum16(acc[r][t]);     \
        }                                                                                                           \
    }

DOT_TILE(tile_bf16, uint16_t, load_bf16, load_bf16_masked)
DOT_TILE(tile_f32, float, load_f32, load_f32_masked)

/* One token takes one bf16/f32 row at a time: a single sequential stream. Tiles of 4 rows
 * (four interleaved streams of 1-2 kB rows) read memory at half the rate: lm_head-shaped
 * 163840 x 1024 product 17-19 against 36-37 GB/s, one-token decode on small 1.6x the CPU
 * time; from cache 4 rows were faster (latency-bound chains), but a decode step reads every
 * weight from memory.
 * Bytes of weights from which one token's rows are read as two streams, the first half of
 * the rows alternating with the second (as in kernels_avx2.c: lm_head-sized products). */
#define TWO_STREAMS_BYTES (2L << 20)

/* Tokens per tile of a batch, and rows per tile. */
#define BATCH_NT 6
#define TILE_NR 4

/* Rows [0, nr) for one token, one row at a time; lm_head-sized products as two streams. */
#define ONE_TOKEN(TILE, WT, rows, nr, x, cols, y)                                                                    \
    do {                                                                                                            \
        int r_ = 0;                                                                                                 \
        if ((long)(nr) * (cols) * (long)sizeof(WT) >= TWO_STREAMS_BYTES) {                                          \
            const int half_ = (nr) / 2;                                                                             \
            for (; r_ < half_; r_++) {                                                                              \
                TILE((rows) + (long)r_ * (cols), cols, x, 0, (y) + r_, 0, 1, 1);                                    \
                TILE((rows) + (long)(r_ + half_) * (cols), cols, x, 0, (y) + r_ + half_, 0, 1, 1);                  \
            }                                                                                                       \
            r_ = 2 * half_;                                                                                         \
        }                                                                                                           \
        for (; r_ < (nr); r_++)                                                                                     \
            TILE((rows) + (long)r_ * (cols), cols, x, 0, (y) + r_, 0, 1, 1);                                        \
    } while (0)

/* One row tile of NR rows against tokens [0, n) of x, NT tokens at a time. */
#define ROW_TILE_TOKENS(TILE, rows, cols, x, ldx, n, y, ldy, NR, NTMAX)                                              \
    do {                                                                                                            \
        int t_ = 0;                                                                                                 \
        for (; t_ + (NTMAX) <= (n); t_ += (NTMAX))                                                                  \
            TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, NTMAX);                  \
        switch ((n) - t_) {                                                                                         \
        case 5: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 5); break;            \
        case 4: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 4); break;            \
        case 3: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 3); break;            \
        case 2: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 2); break;            \
        case 1: TILE(rows, cols, (x) + (long)t_ * (ldx), ldx, (y) + (long)t_ * (ldy), ldy, NR, 1); break;            \
        default: break;                                                                                             \
        }                                                                                                           \
    } while (0)

/* A batch: token tiles outer (the rows of this call stay in cache between them), row tiles
 * inner. */
#define MM_DISPATCH(NAME, TILE, WT)                                                                                  \
    static void NAME(const WT *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {         \
        if (n == 1) {                                                                                               \
            ONE_TOKEN(TILE, WT, rows, nr, x, cols, y);                                                              \
            return;                                                                                                 \
        }                                                                                                           \
        for (int t = 0; t < n; t += BATCH_NT) {                                                                     \
            const int nt = n - t < BATCH_NT ? n - t : BATCH_NT;                                                     \
            const float *xt = x + (long)t * ldx;                                                                    \
            float *yt = y + (long)t * ldy;                                                                          \
            int r = 0;                                                                                              \
            for (; r + TILE_NR <= nr; r += TILE_NR)                                                                 \
                ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, TILE_NR, BATCH_NT);    \
            switch (nr - r) {                                                                                       \
            case 3: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 3, BATCH_NT); break; \
            case 2: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 2, BATCH_NT); break; \
            case 1: ROW_TILE_TOKENS(TILE, rows + (long)r * cols, cols, xt, ldx, nt, yt + r, ldy, 1, BATCH_NT); break; \
            default: break;                                                                                         \
            }                                                                                                       \
        }                                                                                                           \
    }

MM_DISPATCH(avx512_mm_bf16_direct, tile_bf16, uint16_t)
MM_DISPATCH(avx512_mm_f32, tile_f32, float)

/* A batch of bf16 rows with short rows is widened to f32 first, WIDE_ROWS rows at a time,
 * into an aligned buffer on the stack, and runs the f32 tiles over it: widening is exact,
 * and the f32 tile does the same multiply-adds in the same order as the bf16 one (DOT_TILE),
 * so the bits are those of the direct path and of one token. What it saves: each weight
 * vector is widened once per call instead of once per tile of tokens, and the tiles read
 * aligned vectors, where the mapped shards leave bf16 rows wherever the file put them (16
 * or 8 bytes past a cache line on the generated fixtures). 1-thread prefill of 512 tokens
 * on small: 0.91x the CPU time (8 alternating pairs, 0.89-0.97). The kernel alone, 512 x
 * 256 and 512 x 512 with 128 tokens, rows 48 bytes past a line: 4-12 % faster; with 16
 * tokens 22 % slower (the widening no longer amortised), hence WIDE_MIN_TOKENS. Rows wider
 * than WIDE_FLOATS / WIDE_ROWS go direct: a block of fewer rows would make every block
 * read all the batch's inputs again. */
#define WIDE_FLOATS (32 * 1024) /* 128 kB of stack */
#define WIDE_ROWS 32
#define WIDE_MIN_TOKENS 48

/* The widening is a batch's one read of its bf16 weights from memory, so it asks for them
 * ahead as the one-token kernels do (a line per two vectors). */
static void widen_rows(const uint16_t *rows, long count, float *out) {
    long i = 0;
    for (; i + 32 <= count; i += 32) {
        _mm_prefetch((const char *)(rows + i) + KERNELS_ONE_TOKEN_PREFETCH_BYTES, _MM_HINT_T1);
        _mm512_storeu_ps(out + i, load_bf16(rows + i));
        _mm512_storeu_ps(out + i + 16, load_bf16(rows + i + 16));
    }
    for (; i + 16 <= count; i += 16)
        _mm512_storeu_ps(out + i, load_bf16(rows + i));
    for (; i < count; i++)
        out[i] = dtype_bf16_to_f32(rows[i]);
}

static void avx512_mm_bf16(const uint16_t *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {
    if (n < WIDE_MIN_TOKENS || (long)cols * WIDE_ROWS > WIDE_FLOATS) {
        avx512_mm_bf16_direct(rows, nr, x, ldx, n, cols, y, ldy);
        return;
    }
    float wide[WIDE_FLOATS] __attribute__((aligned(64)));
    const int block = WIDE_FLOATS / cols / TILE_NR * TILE_NR;
    for (int r = 0; r < nr; r += block) {
        const int m = nr - r < block ? nr - r : block;
        widen_rows(rows + (long)r * cols, (long)m * cols, wide);
        avx512_mm_f32(wide, m, x, ldx, n, cols, y + r, ldy);
    }
}

/* MXFP4. Weights are taken 128 columns (four blocks, 64 packed bytes) at a time: the 64
 * bytes load as 16 dwords, dword j holding columns 8j..8j+7, and vpermps, which reads only
 * the low four bits of each index, looks up nibble k of every dword (after a shift by 4k):
 * eight lookups give the 128 columns as eight vectors, vector k holding columns 8j + k,
 * with no widening. The table holds twice the E2M1 values, unscaled: each lane of a chunk
 * belongs to block j / 4 of it, so the eight products are summed first (one multiply,
 * seven multiply-adds) and that sum, times each lane's block's 2^(scale - 128) (exact: a
 * power of two), is added to the accumulator with one more. Columns past the last whole
 * chunk (1-3 blocks) go a block at a time: its 16 bytes widened, low nibbles (the even
 * columns) then high (the odd), the same sum-then-scale. The input is rearranged to match
 * once per call and token (x_split), so each (row, token) pair computes the same chain in
 * every tile shape. */
#define MX_CHUNK 128

/* Each chunk's load also asks for the same columns 32 rows further on (into L2; an address
 * past the matrix is only a hint, never read). A tile's rows are several interleaved
 * streams that the hardware prefetcher alone kept at 12-13 GB/s for one token on one
 * thread (release-shaped experts, 16 x 3 matrices of 3072 x 3584 from memory, bf16 one
 * stream 17-20); asking 16-64 rows ahead gave 17-19 (two threads: 21-25 -> 29-32). */
#define MX_PREFETCH_ROWS 32

/* cols columns of one token's x in the kernel's order: each whole chunk of 128 as its
 * eight vectors (vector k: columns 8j + k), then each remaining block as even 16 | odd 16.
 * A chunk is a 16 x 8 matrix (row j: columns 8j..8j+7) to be transposed: three rounds of
 * two-source permutes, 24 for its 128 floats, where the scalar loop made 128 loads and
 * stores. On the Intel VM, the kernel alone with 4 tokens: 0.95-0.96x the time at 512 x
 * 512 (an expert of `medium`), 0.84-0.86x at 32 x 512. Moves only: the scalar loop's bits. */
static void x_split(const float *x, int cols, float *out) {
    const int whole = cols / MX_CHUNK * MX_CHUNK;
    /* Round 1: rows 4p..4p+3 from vectors 2p, 2p+1, columns 4h..4h+3 (lane 4(k - 4h) + j - 4p). */
    const __m512i by4[2] = {_mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27),
                            _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31)};
    /* Round 2: rows 8q..8q+7, columns 4h + 2g, +1 (lane 8(k - 4h - 2g) + j - 8q). */
    const __m512i by2[2] = {_mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23),
                            _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31)};
    /* Round 3: all 16 rows of column k (lane j). */
    const __m512i by1[2] = {_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                            _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31)};
    for (int c = 0; c < whole; c += MX_CHUNK) {
        __m512 in[8], four[4][2], two[2][2][2];
        for (int m = 0; m < 8; m++)
            in[m] = _mm512_loadu_ps(x + c + 16 * m);
        for (int p = 0; p < 4; p++)
            for (int h = 0; h < 2; h++)
                four[p][h] = _mm512_permutex2var_ps(in[2 * p], by4[h], in[2 * p + 1]);
        for (int q = 0; q < 2; q++)
            for (int h = 0; h < 2; h++)
                for (int g = 0; g < 2; g++)
                    two[q][h][g] = _mm512_permutex2var_ps(four[2 * q][h], by2[g], four[2 * q + 1][h]);
        for (int k = 0; k < 8; k++)
            _mm512_storeu_ps(out + c + 16 * k,
                             _mm512_permutex2var_ps(two[0][k / 4][k % 4 / 2], by1[k % 2], two[1][k / 4][k % 4 / 2]));
    }
    for (int c = whole; c < cols; c += DTYPE_MXFP4_BLOCK)
        for (int j = 0; j < 16; j++) {
            out[c + j] = x[c + 2 * j];
            out[c + 16 + j] = x[c + 2 * j + 1];
        }
}

/* 2^(scale - 128) for 16 blocks' scale bytes (n of them valid) as f32, built in the
 * exponent field (scale 0 and 1 would need a subnormal and give 0, as in kernels_avx2.c;
 * they never occur in a valid checkpoint). */
static inline __m512 mx_pow2(const uint8_t *s, int n) {
    const __m512i e = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), s)),
                                       _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_max_epi32(e, _mm512_setzero_si512()), 23));
}

/* NR rows x NT tokens; xs holds the tokens' rearranged inputs, ldxs floats apart. */
static inline __attribute__((always_inline)) void tile_mxfp4(const uint8_t *packed, const uint8_t *scale, int cols,
                                                             const float *xs, int ldxs, float *y, int ldy,
                                                             const int NR, const int NT) {
    const __m512 twice = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, -0.0f, -1, -2, -3, -4, -6, -8, -12);
    /* Lane j of a chunk takes block j / 4's factor. */
    const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const int n_blocks = cols / DTYPE_MXFP4_BLOCK, n_chunks = cols / MX_CHUNK, row_bytes = cols / 2;
    __m512 acc[8][4];
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
    /* Whole chunks, four at a time: one load of 16 blocks' scales per row. */
    for (int g = 0; g < n_chunks; g += 4) {
        const int nc = n_chunks - g < 4 ? n_chunks - g : 4;
        __m512 pow2[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) pow2[r] =
            mx_pow2(scale + (long)r * n_blocks + 4 * g, 4 * nc);
        for (int c = 0; c < nc; c++) {
            const int col = (g + c) * MX_CHUNK;
            __m512i v[8];
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                v[r] = _mm512_loadu_si512(packed + (long)r * row_bytes + col / 2);
                _mm_prefetch((const char *)(packed + (long)(r + MX_PREFETCH_ROWS) * row_bytes + col / 2), _MM_HINT_T1);
            }
            /* Nibble k of every row, then the next: the rows' sums are independent chains. */
            __m512 sum[8][4];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const __m512 xk = _mm512_loadu_ps(xs + (long)t * ldxs + col + 16 * k);
                    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                        const __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(v[r], 4 * k), twice);
                        sum[r][t] = k ? _mm512_fmadd_ps(w, xk, sum[r][t]) : _mm512_mul_ps(w, xk);
                    }
                }
            }
            const __m512i sidx = _mm512_add_epi32(quarter, _mm512_set1_epi32(4 * c));
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                const __m512 f = _mm512_permutexvar_ps(sidx, pow2[r]);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_fmadd_ps(sum[r][t], f, acc[r][t]);
            }
        }
    }
    /* The blocks past the last whole chunk. */
    for (int b = n_chunks * 4; b < n_blocks; b++) {
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
            const __m512i bytes = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(packed + (long)r * row_bytes + b * (DTYPE_MXFP4_BLOCK / 2))));
            const __m512 even = _mm512_permutexvar_ps(bytes, twice);
            const __m512 odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), twice);
            const __m512 f = _mm512_permutexvar_ps(_mm512_setzero_si512(), mx_pow2(scale + (long)r * n_blocks + b, 1));
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const float *xb = xs + (long)t * ldxs + b * DTYPE_MXFP4_BLOCK;
                const __m512 sum = _mm512_fmadd_ps(odd, _mm512_loadu_ps(xb + 16), _mm512_mul_ps(even, _mm512_loadu_ps(xb)));
                acc[r][t] = _mm512_fmadd_ps(sum, f, acc[r][t]);
            }
        }
    }
    if (NR % 4 == 0) {
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r += 4)
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
                store_hsum16x4(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t], y + (long)t * ldy + r);
    } else {
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(long)t * ldy + r] = hsum16(acc[r][t]);
    }
}

/* MXFP4 tiles of a batch take 4 rows x 4 tokens. Its 16 chunk sums, 16 accumulators and
 * 4 rows of packed bytes exceed the 32 registers, yet it was the fastest shape measured
 * (256 x 3584 from cache, 8 tokens: 4 x 4 192 GFLOP/s, 4 x 3 184, 4 x 2 180, 3 x 4 173,
 * 2 x 4 157; accumulators kept in memory instead 174). */
#define MX_BATCH_NT 4

/* One token: tiles of 8 MXFP4 rows (272 bytes each with scales), eight independent
 * accumulation chains whose latency hides behind each other; unlike bf16 rows, 8 such rows
 * are one short contiguous stretch (medium decode, CPU time: 1 row 0.86-0.92 s, 4 rows
 * 0.68-0.95, 8 rows 0.62-0.67 for 16 tokens). */
#define MX_ONE_TOKEN_NR 8

#define MX_TILE(NR, NT) tile_mxfp4(pr, sr, cols, xs, ldxs, yt, ldy, NR, NT)

/* Inside a loop that several threads share, a batch's outputs go through a buffer on the
 * stack, a tile of tokens by MX_STAGE_ROWS rows at a time, and are copied out a token's
 * row at a time. Stored in place, a tile's few values at a time went to lines that the
 * other core had read last (an expert's outputs are summed by tokens, on any thread): in
 * 2-thread prefills of `small`, with a clock around each expert's products, its down
 * product took 1.1-1.9x its one-thread time (1.7-1.9x in most of 8 runs of 30 prefills),
 * staged 1.1-1.2x; whole 2-thread prefills took 0.96x the time on `small` (10 alternating
 * pairs) and 0.97x on `medium` (8). On one thread the copies only cost (the experts'
 * products 1.07x the time), hence the test. The AVX2 kernel staged the same way gained
 * nothing (0.99-1.00x). */
#define MX_STAGE_ROWS 1024

/* Rows [0, nr) against the nt (<= MX_BATCH_NT) tokens whose split inputs are xs. */
static void mxfp4_rows(const uint8_t *packed, const uint8_t *scale, int nr, const float *xs, int ldxs, int nt,
                       int cols, float *y, int ldy) {
    const long row_bytes = cols / 2, row_scales = cols / DTYPE_MXFP4_BLOCK;
    if (nt == 1) {
        int r = 0;
        for (; r + MX_ONE_TOKEN_NR <= nr; r += MX_ONE_TOKEN_NR) {
            const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
            float *yt = y + r;
            MX_TILE(MX_ONE_TOKEN_NR, 1);
        }
        for (; r < nr; r++) {
            const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
            float *yt = y + r;
            MX_TILE(1, 1);
        }
        return;
    }
    for (int r = 0; r < nr; r += TILE_NR) {
        const uint8_t *pr = packed + r * row_bytes, *sr = scale + r * row_scales;
        float *yt = y + r;
        const int rows_here = nr - r < TILE_NR ? nr - r : TILE_NR;
        /* Every (rows, tokens) shape spelled out so each body is specialised. */
        switch (rows_here * 8 + nt) {
        case 4 * 8 + 4: MX_TILE(4, 4); break;
        case 4 * 8 + 3: MX_TILE(4, 3); break;
        case 4 * 8 + 2: MX_TILE(4, 2); break;
        case 3 * 8 + 4: MX_TILE(3, 4); break;
        case 3 * 8 + 3: MX_TILE(3, 3); break;
        case 3 * 8 + 2: MX_TILE(3, 2); break;
        case 2 * 8 + 4: MX_TILE(2, 4); break;
        case 2 * 8 + 3: MX_TILE(2, 3); break;
        case 2 * 8 + 2: MX_TILE(2, 2); break;
        case 1 * 8 + 4: MX_TILE(1, 4); break;
        case 1 * 8 + 3: MX_TILE(1, 3); break;
        default: MX_TILE(1, 2); break;
        }
    }
}

/* The split inputs of a tile of tokens live on the stack when they fit (always for one
 * token: KERNELS_MXFP4_MAX_COLS), else in a heap buffer; without one, one token at a time,
 * which computes the same bits. Either starts on a cache line (kernels.h: cols is a
 * multiple of 32, so every vector of the split inputs is a whole line). */
static void avx512_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                            int cols, float *y, int ldy) {
    float stack[KERNELS_MXFP4_MAX_COLS] __attribute__((aligned(64)));
    int tile = n < MX_BATCH_NT ? n : MX_BATCH_NT;
    float *xs = stack;
    if ((long)tile * cols > KERNELS_MXFP4_MAX_COLS) {
        xs = aligned_alloc(64, (sizeof(float) * (size_t)tile * (size_t)cols + 63) / 64 * 64);
        if (!xs) {
            xs = stack;
            tile = 1;
        }
    }
    float staged[MX_BATCH_NT * MX_STAGE_ROWS] __attribute__((aligned(64))); /* 16 kB */
    const int staging = n > 1 && threads_in_shared_loop();
    for (int t = 0; t < n; t += tile) {
        const int nt = n - t < tile ? n - t : tile;
        for (int i = 0; i < nt; i++)
            x_split(x + (long)(t + i) * ldx, cols, xs + (long)i * cols);
        if (!staging) { /* one token (a row written in order), or no other thread here */
            mxfp4_rows(packed, scale, nr, xs, cols, nt, cols, y + (long)t * ldy, ldy);
            continue;
        }
        for (int r = 0; r < nr; r += MX_STAGE_ROWS) {
            const int m = nr - r < MX_STAGE_ROWS ? nr - r : MX_STAGE_ROWS;
            mxfp4_rows(packed + (long)r * (cols / 2), scale + (long)r * (cols / DTYPE_MXFP4_BLOCK), m, xs, cols, nt,
                       cols, staged, m);
            for (int i = 0; i < nt; i++)
                memcpy(y + (long)(t + i) * ldy + r, staged + (long)i * m, sizeof(float) * (size_t)m);
        }
    }
    if (xs != stack)
        free(xs);
}

/* The scalar argmax's answer sixteen lanes at a time: as avx2_argmax (kernels_avx2.c), each
 * lane keeps the first position of its largest value, never NaN; the lowest index among
 * the lanes holding the overall largest wins. */
static int avx512_argmax(const float *x, int n) {
    if (x[0] != x[0])
        return 0;
    const __m512 first = _mm512_set1_ps(x[0]);
    const __m512i step = _mm512_set1_epi32(64);
    __m512 best[4];
    __m512i at[4], idx[4];
    for (int k = 0; k < 4; k++) {
        best[k] = first;
        at[k] = _mm512_setzero_si512();
        idx[k] = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                  _mm512_set1_epi32(16 * k));
    }
    int i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++) {
            const __m512 v = _mm512_loadu_ps(x + i + 16 * k);
            const __mmask16 gt = _mm512_cmp_ps_mask(v, best[k], _CMP_GT_OQ);
            best[k] = _mm512_mask_mov_ps(best[k], gt, v);
            at[k] = _mm512_mask_mov_epi32(at[k], gt, idx[k]);
            idx[k] = _mm512_add_epi32(idx[k], step);
        }
    float lane_best[64];
    int lane_at[64];
    for (int k = 0; k < 4; k++) {
        _mm512_storeu_ps(lane_best + 16 * k, best[k]);
        _mm512_storeu_si512(lane_at + 16 * k, at[k]);
    }
    return kernels_argmax_finish(lane_best, lane_at, 64, x, i, n);
}

/* Twelve independent 16-lane FMA chains: enough to cover the FMA latency on both pipes. */
static double avx512_fma_loop(long reps) {
    __m512 a[12];
    const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long r = 0; r < reps; r++)
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, b);
    __m512 sum = a[0];
    for (int i = 1; i < 12; i++)
        sum = _mm512_add_ps(sum, a[i]);
    kernels_fma_sink = hsum16(sum);
    return (double)reps * 12 * 16 * 2;
}

static const kernels_impl avx512_impl = {.name = "avx512",
                                        .mm_f32 = avx512_mm_f32,
                                        .mm_bf16 = avx512_mm_bf16,
                                        .mm_mxfp4 = avx512_mm_mxfp4,
                                        .argmax = avx512_argmax,
                                        .fma_loop = avx512_fma_loop};

const kernels_impl *kernels_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
               ? &avx512_impl
               : NULL;
}

#else

const kernels_impl *kernels_avx512(void) {
    return NULL;
}

#endif
