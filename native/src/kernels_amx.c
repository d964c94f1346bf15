/* kernels_amx.c - bf16 and MXFP4 products on the AMX tile unit, with f32 activations kept
 * exact. This file alone is compiled with AMX-TILE/AMX-BF16 (and AVX-512) enabled;
 * kernels_amx() checks the CPU and asks the OS for the tile state before handing it out.
 * No CPU gets it by default (K3_KERNELS=amx): on the VM measured it is faster for batches
 * and slower for one token (docs/PERFORMANCE.md).
 *
 * The tile unit multiplies bf16 by bf16 (exact in f32) and adds each product to an f32
 * accumulator, rounding every addition (TDPBF16PS: pairs of products in order, subnormal
 * inputs and results flushed to zero). Weights are bf16 already, or MXFP4 values that
 * bf16 holds exactly once scaled (two significant bits times a power of two). The input
 * is not: each f32 x is split into three bf16 parts, x = hi + mid + lo exactly (hi: x
 * truncated to bf16's 8 significant bits; mid: the remainder truncated; lo: what is left,
 * at most 8 bits), so the activations reach the products unrounded, as in the other sets.
 * Each (row, token, part) has its own accumulator, which takes the 32-column chunks of the
 * row in order; a token's result is (hi + mid) + lo. What an accumulator holds depends only
 * on its row, its column of the input and the chunk order, never on the tiles, the batch
 * or the thread: these bits differ from the AVX-512 set's within rounding (another order
 * of additions), never between batch sizes or thread counts.
 *
 * Layout. The weights are tile A (16 rows x 32 columns, 64 bytes a row). The input is
 * tile B in the unit's pair layout: row p of a chunk holds columns 2p and 2p + 1 of each
 * of the tile's 16 columns, and those columns are 5 tokens x 3 parts (the 16th unused), so
 * one token costs one product per weight tile, not three. C tiles (16 rows x 16 columns,
 * f32) stay in the unit across a slice of columns and are kept in memory between slices
 * when a batch's input is too big for L2 in one piece. Tiles: C 0-3 (2 row tiles x 2
 * token tiles), A 4-5, B 6-7.
 *  - Batches (more than 10 tokens): the input is prepared once per product
 *    (kernels_impl.prepare), and each block of 32 rows is staged in L2, bf16 copied and
 *    MXFP4 converted, while the block before computes (stage_lines).
 *  - Few tokens (product_few): bf16 rows are read in place and MXFP4 rows converted a few
 *    chunks ahead into a ring that stays in L1.
 *
 * MXFP4 columns go in another order within each pair of blocks (64 columns, 32 packed
 * bytes): one chunk holds the low nibbles (the even columns) of both blocks, the next the
 * high nibbles (the odd ones), so converting a row needs no shuffle across lanes; a last
 * odd block is one chunk, its even columns then its odd ones. The input is permuted to
 * match (chunk_positions), so each weight still meets its own activation. */
#define _DEFAULT_SOURCE /* syscall() */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && \
    defined(__AVX512BW__)

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dtype.h"

#define CHUNK 32                 /* columns per tile row: 32 bf16 */
#define TERMS 3                  /* hi, mid, lo */
#define TILE_TOKENS 5            /* tokens per B tile: 5 x 3 terms of its 16 columns */
#define TILE_COLS (TERMS * TILE_TOKENS)
#define B_SLICE_BYTES (1 << 20)  /* the input slice of a call, all tokens and terms: L2 */
#define A_SLICE_BYTES (512 << 10) /* 32 rows of a slice, converted (MXFP4) or staged (bf16) */

/* The tile palette: eight tiles of 16 rows x 64 bytes. */
typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void tiles_configure(void) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* Per-thread buffers, grown as calls need them and freed when the thread ends. */
typedef struct {
    void *b, *a, *c, *prep;
    size_t b_cap, a_cap, c_cap, prep_cap;
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch *s = p;
    free(s->b);
    free(s->a);
    free(s->c);
    free(s->prep);
    free(s);
}

static void scratch_key_make(void) {
    (void)pthread_key_create(&scratch_key, scratch_free);
}

/* A buffer of at least `bytes` (plus 64 that a tile row may read past the last one). */
static void *grow(void **p, size_t *cap, size_t bytes) {
    bytes = (bytes + 64 + 63) / 64 * 64;
    if (*cap >= bytes)
        return *p;
    free(*p);
    *p = aligned_alloc(64, bytes);
    *cap = *p ? bytes : 0;
    if (*p)
        memset(*p, 0, bytes);
    return *p;
}

static scratch *scratch_here(void) {
    pthread_once(&scratch_once, scratch_key_make);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (s && pthread_setspecific(scratch_key, s)) {
            free(s);
            s = NULL;
        }
    }
    return s;
}

/* A 16 x 16 matrix of 32-bit elements, one row per vector, transposed in registers: pairs
 * of rows interleaved by 32 bits, then by 64, then 128-bit lanes gathered in two rounds. */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4g + j], lane L: column 4L + j, rows 4g..4g+3. */
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        const __m512i vlo = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), vhi = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
        const __m512i wlo = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44),
                      whi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
        r[j] = _mm512_shuffle_i32x4(vlo, wlo, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(vlo, wlo, 0xdd);
        r[8 + j] = _mm512_shuffle_i32x4(vhi, whi, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(vhi, whi, 0xdd);
    }
}

/* One token's chunk c as 32 f32 positions (p0: 0-15, p1: 16-31): columns 32c.. in place
 * (zero past `cols`), or MXFP4's order (see the file comment). */
static inline void chunk_positions(const float *xt, int cols, int c, int mx, __m512 *p0, __m512 *p1) {
    if (!mx) {
        const int c0 = c * CHUNK, left = cols - c0;
        if (left >= CHUNK) {
            *p0 = _mm512_loadu_ps(xt + c0);
            *p1 = _mm512_loadu_ps(xt + c0 + 16);
        } else {
            const __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
            const __mmask16 m1 = left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
            *p0 = _mm512_maskz_loadu_ps(m0, xt + c0);
            *p1 = _mm512_maskz_loadu_ps(m1, xt + c0 + 16);
        }
        return;
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                  odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const int nb = cols / DTYPE_MXFP4_BLOCK;
    if (c >= nb / 2 * 2) { /* the last, odd block: even columns, then odd */
        const __m512 v0 = _mm512_loadu_ps(xt + 32 * c), v1 = _mm512_loadu_ps(xt + 32 * c + 16);
        *p0 = _mm512_permutex2var_ps(v0, even, v1);
        *p1 = _mm512_permutex2var_ps(v0, odd, v1);
        return;
    }
    const float *base = xt + 64 * (c / 2);
    const __m512i pick = c & 1 ? odd : even;
    *p0 = _mm512_permutex2var_ps(_mm512_loadu_ps(base), pick, _mm512_loadu_ps(base + 16));
    *p1 = _mm512_permutex2var_ps(_mm512_loadu_ps(base + 32), pick, _mm512_loadu_ps(base + 48));
}

/* The three bf16 parts of 32 positions as tile B words: pair p (positions 2p, 2p+1) in
 * dword p of out[s]. hi + mid + lo = x exactly: hi is x with its low 16 bits cleared,
 * mid the same of the remainder, lo what is left (at most 8 significant bits, so its low
 * 16 bits are zero); both subtractions are exact. */
static inline void split3(__m512 p0, __m512 p1, __m512i out[TERMS]) {
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i high_words = _mm512_setr_epi32(0x00030001, 0x00070005, 0x000b0009, 0x000f000d, 0x00130011,
                                                 0x00170015, 0x001b0019, 0x001f001d, 0x00230021, 0x00270025,
                                                 0x002b0029, 0x002f002d, 0x00330031, 0x00370035, 0x003b0039,
                                                 0x003f003d);
    const __m512 h0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(p0), top));
    const __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(p1), top));
    const __m512 r0 = _mm512_sub_ps(p0, h0), r1 = _mm512_sub_ps(p1, h1);
    const __m512 m0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r0), top));
    const __m512 m1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r1), top));
    const __m512 l0 = _mm512_sub_ps(r0, m0), l1 = _mm512_sub_ps(r1, m1);
    out[0] = _mm512_permutex2var_epi16(_mm512_castps_si512(h0), high_words, _mm512_castps_si512(h1));
    out[1] = _mm512_permutex2var_epi16(_mm512_castps_si512(m0), high_words, _mm512_castps_si512(m1));
    out[2] = _mm512_permutex2var_epi16(_mm512_castps_si512(l0), high_words, _mm512_castps_si512(l1));
}

/* The input of chunks [c0, c0 + nc) for tokens [0, n) in tile B layout. Token tile tt
 * (TILE_TOKENS tokens, nt of them in the last) starts at tt * nc * 16 * TILE_COLS dwords;
 * in it, chunk k's pair p of token i, term s is dword (k * 16 + p) * 3nt + 3i + s: rows of
 * 3nt columns, which a tile load reads 16 at a time (the columns past 3nt are the next
 * rows', never used). A whole token tile is transposed in registers; fewer tokens go a
 * dword at a time. */
static void b_prepare(const float *x, int ldx, int n, int cols, int c0, int nc, int mx, uint32_t *b) {
    for (int t0 = 0; t0 < n; t0 += TILE_TOKENS) {
        const int nt = n - t0 < TILE_TOKENS ? n - t0 : TILE_TOKENS, width = TERMS * nt;
        uint32_t *tile = b + (long)(t0 / TILE_TOKENS) * nc * 16 * TILE_COLS;
        for (int k = 0; k < nc; k++) {
            __m512i v[16];
            for (int i = 0; i < nt; i++) {
                __m512 p0, p1;
                chunk_positions(x + (long)(t0 + i) * ldx, cols, c0 + k, mx, &p0, &p1);
                split3(p0, p1, v + TERMS * i);
            }
            uint32_t *dst = tile + (long)k * 16 * width;
            if (nt == TILE_TOKENS) {
                v[15] = _mm512_setzero_si512();
                transpose16(v);
                for (int p = 0; p < 16; p++)
                    _mm512_mask_storeu_epi32(dst + p * width, 0x7fff, v[p]);
            } else {
                uint32_t words[15][16] __attribute__((aligned(64)));
                for (int j = 0; j < width; j++)
                    _mm512_store_si512(words[j], v[j]);
                for (int p = 0; p < 16; p++)
                    for (int j = 0; j < width; j++)
                        dst[p * width + j] = words[j][p];
            }
        }
    }
}

/* The E2M1 values as bf16, by code (sign in bit 3), padded to a vpermw table's 32 words. */
static const uint16_t e2m1_bf16[32] = {0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
                                       0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0};

/* One value exactly as bf16, scalar: code (sign in bit 3) times 2^(e - 127). Scales 0 and 1
 * give 0 (as the AVX-512 and AVX2 kernels: the values would be subnormal), 253-255 the f32
 * product, infinite for the large codes; the rest add e - 127 to the exponent field. */
static uint16_t mx_word(unsigned code, uint8_t e) {
    const uint16_t v = e2m1_bf16[code & 15u];
    if (!(code & 7u))
        return v;
    if (e < 2)
        return (uint16_t)(v & 0x8000);
    if (e > 252) {
        const float f = dtype_e2m1_value(code) * dtype_e8m0_value(e);
        uint32_t u;
        memcpy(&u, &f, 4);
        return (uint16_t)(u >> 16); /* exact: two significant bits, or infinite */
    }
    return (uint16_t)(v + (e - 127) * 128);
}

/* Chunks [k0, k1) of one MXFP4 row's slice starting at chunk c0 (c0 and k0 even; k1 even
 * or the slice's end), as bf16 into out (the row's chunk k at out + 32k). */
static inline __attribute__((always_inline)) void convert_row(const uint8_t *row, const uint8_t *sc, int cols, int c0,
                                                               int k0, int k1, uint16_t *out) {
    const int pairs_end = cols / DTYPE_MXFP4_BLOCK / 2 * 2;
    const __m512i table = _mm512_loadu_si512(e2m1_bf16), low4 = _mm512_set1_epi16(0x0f),
                  magnitude_code = _mm512_set1_epi16(7);
    for (int k = k0; k < k1; k += 2) {
        const int c = c0 + k;
        uint16_t *o = out + (long)k * CHUNK;
        if (c >= pairs_end) { /* the last, odd block: its even columns, then its odd ones */
            for (int q = 0; q < CHUNK; q++) {
                const uint8_t byte = row[16 * c + (q & 15)];
                o[q] = mx_word(q < 16 ? byte & 15u : byte >> 4, sc[c]);
            }
            continue;
        }
        /* Blocks c and c + 1: low nibbles to chunk k, high nibbles to chunk k + 1. */
        const uint8_t e0 = sc[c], e1 = sc[c + 1];
        if ((unsigned)(e0 - 2) > 250u || (unsigned)(e1 - 2) > 250u) {
            for (int q = 0; q < CHUNK; q++) {
                const uint8_t byte = row[16 * c + q], e = q < 16 ? e0 : e1;
                o[q] = mx_word(byte & 15u, e);
                o[CHUNK + q] = mx_word(byte >> 4, e);
            }
            continue;
        }
        const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(row + 16 * c)));
        const __m512i lo = _mm512_and_si512(bytes, low4), hi = _mm512_srli_epi16(bytes, 4);
        const __m512i delta = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16((short)((e0 - 127) * 128)),
                                                      _mm512_set1_epi16((short)((e1 - 127) * 128)));
        __m512i vlo = _mm512_permutexvar_epi16(lo, table), vhi = _mm512_permutexvar_epi16(hi, table);
        vlo = _mm512_mask_add_epi16(vlo, _mm512_test_epi16_mask(lo, magnitude_code), vlo, delta);
        vhi = _mm512_mask_add_epi16(vhi, _mm512_test_epi16_mask(hi, magnitude_code), vhi, delta);
        _mm512_store_si512(o, vlo);
        _mm512_store_si512(o + CHUNK, vhi);
    }
}

/* Where a product's pieces live during one call. Token groups of up to `tg` tokens, row
 * groups of up to `rg` rows, slices of `kc` chunks (even): the input of one slice and
 * token group is prepared once and serves every row of the group; C tiles go to `spill`
 * between slices. The blocking only decides what is in cache when: every accumulator sees
 * the same chunks in the same order whatever it is. */
typedef struct {
    uint32_t *b;   /* one group's slice of input (b_prepare), unless prepared per product */
    uint16_t *a;   /* two blocks of 32 rows x kc chunks, staged or converted */
    float *spill;  /* rg rows (16-row tiles) x tg tokens (5-token tiles), 1 kB a tile */
    int tg, rg, kc;
} plan;

/* A block of 32 rows being staged as tile A's source: bf16 rows copied, MXFP4 rows
 * converted, nc 64-byte lines (chunks) a row, zero past `valid` columns and past `rows`
 * rows, in the order memory holds them. It runs in pieces inside the previous block's tile
 * loop, for two reasons. A tile load reads a line from each of 16 rows at once: 32 such
 * streams from memory held one-token bf16 products to 60-80 % of the triad, where the same
 * bytes read one row after another reach the AVX-512 kernels' 90-97 %. And a tile load of
 * lines just written by vector stores waits for them to reach L1 (a block converted and
 * then loaded at once spent a fifth of an MXFP4 product's time there). */
typedef struct {
    const uint16_t *src;  /* bf16: the block's first row at the slice's first column */
    const uint8_t *packed, *scale; /* MXFP4: the block's first row */
    int rows, valid, nc, cols, c0;
    uint16_t *dst;        /* 32 x nc x 32 elements */
    int row, line;        /* the next line to stage */
} staging;

static inline void stage_lines(staging *g, int count) {
    int row = g->row, line = g->line;
    while (count > 0 && row < 32) {
        int run = g->nc - line < count ? g->nc - line : count;
        uint16_t *d = g->dst + ((long)row * g->nc + line) * CHUNK;
        if (g->packed && row < g->rows) {
            if (line + run < g->nc && (run & 1))
                run++; /* whole pairs of blocks */
            convert_row(g->packed + (long)row * (g->cols / 2), g->scale + (long)row * (g->cols / DTYPE_MXFP4_BLOCK),
                        g->cols, g->c0, line, line + run, d - (long)line * CHUNK);
        } else if (!g->packed && row < g->rows && (line + run) * CHUNK <= g->valid) { /* whole bf16 lines */
            const uint16_t *sp = g->src + (long)row * g->cols + line * CHUNK;
            for (int i = 0; i < run; i++) {
                _mm_prefetch((const char *)(sp + i * CHUNK) + KERNELS_ONE_TOKEN_PREFETCH_BYTES, _MM_HINT_T1);
                _mm512_store_si512(d + i * CHUNK, _mm512_loadu_si512(sp + i * CHUNK));
            }
        } else
            for (int i = 0; i < run; i++) {
                const int left = !g->packed && row < g->rows ? g->valid - (line + i) * CHUNK : 0;
                const __mmask32 m = left >= CHUNK ? 0xffffffffu : left > 0 ? (__mmask32)((1u << left) - 1) : 0;
                _mm512_store_si512(d + i * CHUNK,
                                   m ? _mm512_maskz_loadu_epi16(m, g->src + (long)row * g->cols + (line + i) * CHUNK)
                                     : _mm512_setzero_si512());
            }
        count -= run;
        line += run;
        if (line == g->nc) {
            line = 0;
            row++;
        }
    }
    g->row = row;
    g->line = line;
}

/* The staging of rows [r, r + n) (n <= 32) of slice c0 (nc chunks) into dst. */
static staging staging_of(const uint16_t *rows, const uint8_t *packed, const uint8_t *scale, int r, int n, int cols,
                          int c0, int nc, uint16_t *dst) {
    staging g = {0};
    if (packed) {
        g.packed = packed + (long)r * (cols / 2);
        g.scale = scale + (long)r * (cols / DTYPE_MXFP4_BLOCK);
    } else
        g.src = rows + (long)r * cols + (long)c0 * CHUNK;
    g.rows = n;
    g.valid = cols - c0 * CHUNK;
    g.nc = nc;
    g.cols = cols;
    g.c0 = c0;
    g.dst = dst;
    return g;
}

/* One chunk: C tiles 0-3 (row tile i, token tile j at 2i + j) += A (4, 5) x B (6, 7) for
 * the tiles in use; a0p/a1p the row tiles' lines of this chunk (lda bytes between rows),
 * b0p/b1p the token tiles' (w0/w1 columns). */
#define CHUNK_STEP(RT, TT, a0p, a1p, b0p, b1p)                                                       \
    do {                                                                                             \
        _tile_loadd(6, b0p, 4 * w0);                                                                 \
        _tile_loadd(4, a0p, lda);                                                                    \
        _tile_dpbf16ps(0, 4, 6);                                                                     \
        if (TT > 1) {                                                                                \
            _tile_loadd(7, b1p, 4 * w1);                                                             \
            _tile_dpbf16ps(1, 4, 7);                                                                 \
        }                                                                                            \
        if (RT > 1) {                                                                                \
            _tile_loadd(5, a1p, lda);                                                                \
            _tile_dpbf16ps(2, 5, 6);                                                                 \
            if (TT > 1)                                                                              \
                _tile_dpbf16ps(3, 5, 7);                                                             \
        }                                                                                            \
    } while (0)

/* The chunks of a slice: a0/a1 the row tiles' first chunk, b0/b1 the token tiles' input;
 * next: a block to stage meanwhile (32 lines a chunk, the rest after), or NULL. */
#define TILE_LOOP(RT, TT)                                                                            \
    for (int k = 0; k < nc; k++) {                                                                   \
        if (next)                                                                                    \
            stage_lines(next, 32);                                                                   \
        CHUNK_STEP(RT, TT, a0 + k * CHUNK, a1 + k * CHUNK, b0 + (long)k * 16 * w0, b1 + (long)k * 16 * w1); \
    }

static void tiles_run(int rt, int tt, const uint16_t *a0, const uint16_t *a1, long lda, const uint32_t *b0,
                      const uint32_t *b1, int w0, int w1, int nc, staging *next) {
    if (rt > 1 && tt > 1) {
        TILE_LOOP(2, 2)
    } else if (rt > 1) {
        TILE_LOOP(2, 1)
    } else if (tt > 1) {
        TILE_LOOP(1, 2)
    } else {
        TILE_LOOP(1, 1)
    }
}

/* The C tiles of row tile i (< rt), token tile j (< tt) to or from memory: p(i, j). */
#define TILES_IO(OP, P)            \
    do {                           \
        OP(0, P(0, 0), 64);        \
        if (tt > 1)                \
            OP(1, P(0, 1), 64);    \
        if (rt > 1)                \
            OP(2, P(1, 0), 64);    \
        if (rt > 1 && tt > 1)      \
            OP(3, P(1, 1), 64);    \
    } while (0)

/* A stored C tile (out[m][j]: row m, column j = token j / 3's term j % 3) into y[q * ldy
 * + m] for rows_here rows and nt tokens: each token's three sums added, (hi + mid) + lo. */
static void tile_to_y(const float *out, int rows_here, int nt, float *y, int ldy) {
    const __mmask16 m = rows_here >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows_here) - 1);
    __m512 col[16];
    if (nt == 1) {
        const __m512i column = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
        for (int s = 0; s < TERMS; s++)
            col[s] = _mm512_i32gather_ps(_mm512_add_epi32(column, _mm512_set1_epi32(s)), out, 4);
    } else {
        __m512i v[16];
        for (int i = 0; i < 16; i++)
            v[i] = _mm512_load_si512(out + 16 * i);
        transpose16(v);
        for (int j = 0; j < 16; j++)
            col[j] = _mm512_castsi512_ps(v[j]);
    }
    for (int q = 0; q < nt; q++) {
        const __m512 sum = _mm512_add_ps(_mm512_add_ps(col[3 * q], col[3 * q + 1]), col[3 * q + 2]);
        _mm512_mask_storeu_ps(y + (long)q * ldy, m, sum);
    }
}

/* C tiles stored after a block's last slice, written to y only after the next block's
 * tile loop has been issued: a vector load of lines a tile store has just written waits
 * for them (that wait was a sixth of a one-token product's time). */
typedef struct {
    float c[4][256] __attribute__((aligned(64))); /* so that every element of an array is */
    float *y; /* the block's first row and token */
    int rt, tt, nrb, nt0, nt1, live;
} pending;

static void pending_flush(pending *q, int ldy) {
    if (!q->live)
        return;
    for (int i = 0; i < q->rt; i++)
        for (int j = 0; j < q->tt; j++)
            tile_to_y(q->c[2 * i + j], q->nrb - 16 * i < 16 ? q->nrb - 16 * i : 16, j ? q->nt1 : q->nt0,
                      q->y + (long)TILE_TOKENS * j * ldy + 16 * i, ldy);
    q->live = 0;
}

/* The C tiles in use into pend[*cur] (y: the block's first row and token), then the
 * other one, the block before, out to y. */
static void pending_push(pending pend[2], int *cur, float *y, int rt, int tt, int nrb, int nt0, int nt1, int ldy) {
    pending *q = &pend[*cur];
#define PENDING(i, j) q->c[2 * (i) + (j)]
    TILES_IO(_tile_stored, PENDING);
#undef PENDING
    q->y = y;
    q->rt = rt;
    q->tt = tt;
    q->nrb = nrb;
    q->nt0 = nt0;
    q->nt1 = nt1;
    q->live = 1;
    *cur ^= 1;
    pending_flush(&pend[*cur], ldy);
}

/* Few tokens: one pair of token tiles (decode, short verification batches). Nothing is
 * reused across token tiles, so nothing is staged in L2: bf16 rows are read in place, and
 * MXFP4 rows are converted four chunks at a time into a ring that stays in L1 (16 kB),
 * one fill ahead of the products that read it. Stores to an L2-sized buffer cost about
 * 1.35 ns a line next to the tile unit (32 lines: 15 -> 56 ns a chunk), to an L1 ring about
 * 0.2. The next block of 32 rows, one contiguous range, is asked for into L2 meanwhile, in
 * the order memory holds it. Per accumulator: the same chunks in the same order as a batch. */
#define FEW_TOKENS (2 * TILE_TOKENS)

/* Chunks [k0, k0 + RING_CHUNKS) (those < nc) of rows [r, r + nrb) into ring (32 rows x
 * RING_CHUNKS chunks): MXFP4 converted (convert_row), bf16 copied (zero past cols); rows
 * past nrb zero. Four chunks a row per fill: with two, the per-row bookkeeping was most of
 * a fill's instructions. */
#define RING_CHUNKS 4

static void ring_fill(const uint16_t *rows, const uint8_t *packed, const uint8_t *scale, int r, int nrb, int cols,
                      int nc, int k0, uint16_t *ring) {
    const int k1 = k0 + RING_CHUNKS < nc ? k0 + RING_CHUNKS : nc, nb = cols / DTYPE_MXFP4_BLOCK;
    for (int i = nrb; i < 32; i++)
        for (int k = 0; k < RING_CHUNKS; k++)
            _mm512_store_si512(ring + (i * RING_CHUNKS + k) * CHUNK, _mm512_setzero_si512());
    if (!packed) {
        for (int i = 0; i < nrb; i++)
            for (int k = k0; k < k1; k++) {
                const int left = cols - k * CHUNK;
                const __mmask32 m = left >= CHUNK ? 0xffffffffu : (__mmask32)((1u << left) - 1);
                _mm512_store_si512(ring + (i * RING_CHUNKS + k - k0) * CHUNK,
                                   _mm512_maskz_loadu_epi16(m, rows + (long)(r + i) * cols + (long)k * CHUNK));
            }
        return;
    }
    for (int i = 0; i < nrb; i++)
        convert_row(packed + (long)(r + i) * (cols / 2), scale + (long)(r + i) * nb, cols, 0, k0, k1,
                    ring + ((long)i * RING_CHUNKS - k0) * CHUNK);
}

/* Asks for `lines` more lines of [*at, end) into L2. */
static inline void prefetch_ahead(const char **at, const char *end, int lines) {
    for (; lines > 0 && *at < end; lines--, *at += 64)
        _mm_prefetch(*at, _MM_HINT_T1);
}

static void product_few(const uint16_t *rows, const uint8_t *packed, const uint8_t *scale, int nr, const float *x,
                        int ldx, int n, int cols, float *y, int ldy, uint32_t *b) {
    const int mx = packed != NULL, nc = (cols + CHUNK - 1) / CHUNK;
    const int tt = n > TILE_TOKENS ? 2 : 1, nt0 = n < TILE_TOKENS ? n : TILE_TOKENS, nt1 = n - nt0;
    const int w0 = TERMS * nt0, w1 = TERMS * nt1;
    const long row_bytes = mx ? cols / 2 : 2L * cols;
    b_prepare(x, ldx, n, cols, 0, nc, mx, b);
    const uint32_t *b0 = b, *b1 = b + (long)nc * 16 * TILE_COLS;
    uint16_t ring[2][32 * RING_CHUNKS * CHUNK] __attribute__((aligned(64)));
    pending pend[2] __attribute__((aligned(64)));
    int cur = 0;
    pend[0].live = pend[1].live = 0;
    for (int r = 0; r < nr; r += 32) {
        const int nrb = nr - r < 32 ? nr - r : 32, rt = nrb > 16 ? 2 : 1;
        const char *pf = NULL, *pf_end = NULL;
        int pf_lines = 0;
        if (r + 32 < nr) {
            pf = mx ? (const char *)(packed + (long)(r + 32) * (cols / 2)) : (const char *)(rows + (long)(r + 32) * cols);
            const long len = (nr - r - 32 < 32 ? nr - r - 32 : 32) * row_bytes;
            pf_end = pf + len;
            pf_lines = (int)((len / 64 + nc - 1) / nc);
        }
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        if (!mx && nrb == 32 && cols % CHUNK == 0) {
            const uint16_t *a0 = rows + (long)r * cols, *a1 = a0 + 16L * cols;
            const long lda = 2L * cols;
            for (int k = 0; k < nc; k++) {
                prefetch_ahead(&pf, pf_end, pf_lines);
                CHUNK_STEP(rt, tt, a0 + k * CHUNK, a1 + k * CHUNK, b0 + (long)k * 16 * w0, b1 + (long)k * 16 * w1);
            }
        } else {
            const long lda = 2 * RING_CHUNKS * CHUNK; /* bytes: a ring row */
            ring_fill(rows, packed, scale, r, nrb, cols, nc, 0, ring[0]);
            for (int g = 0; g * RING_CHUNKS < nc; g++) {
                if ((g + 1) * RING_CHUNKS < nc)
                    ring_fill(rows, packed, scale, r, nrb, cols, nc, (g + 1) * RING_CHUNKS, ring[(g + 1) & 1]);
                prefetch_ahead(&pf, pf_end, RING_CHUNKS * pf_lines);
                const uint16_t *seg = ring[g & 1], *seg1 = seg + 16 * RING_CHUNKS * CHUNK;
                for (int k = g * RING_CHUNKS, e = 0; k < nc && e < RING_CHUNKS; k++, e++)
                    CHUNK_STEP(rt, tt, seg + e * CHUNK, seg1 + e * CHUNK, b0 + (long)k * 16 * w0,
                               b1 + (long)k * 16 * w1);
            }
        }
        pending_push(pend, &cur, y + r, rt, tt, nrb, nt0, nt1, ldy);
    }
    pending_flush(&pend[0], ldy);
    pending_flush(&pend[1], ldy);
}

/* The product of rows [0, nr) (bf16 `rows`, or MXFP4 `packed` and `scale`) with tokens
 * [0, n) under plan p; the tile configuration is loaded. */
static void product(const uint16_t *rows, const uint8_t *packed, const uint8_t *scale, int nr, const float *x,
                    int ldx, const uint32_t *xp, int n, int cols, float *y, int ldy, const plan *p) {
    const int mx = packed != NULL, nchunks = (cols + CHUNK - 1) / CHUNK;
    const int nslices = (nchunks + p->kc - 1) / p->kc;
    const long block_dwords = (long)((p->tg + TILE_TOKENS - 1) / TILE_TOKENS) * p->kc * 16 * TILE_COLS;
    pending pend[2] __attribute__((aligned(64)));
    int cur = 0;
    pend[0].live = pend[1].live = 0;
    for (int t0 = 0; t0 < n; t0 += p->tg) {
        const int ng = n - t0 < p->tg ? n - t0 : p->tg, ntt = (ng + TILE_TOKENS - 1) / TILE_TOKENS;
        for (int r0 = 0; r0 < nr; r0 += p->rg) {
            const int ngr = nr - r0 < p->rg ? nr - r0 : p->rg;
            for (int c0 = 0; c0 < nchunks; c0 += p->kc) {
                const int nc = nchunks - c0 < p->kc ? nchunks - c0 : p->kc;
                const int first = c0 == 0, last = c0 + nc == nchunks;
                const long block_elems = 32L * nc * CHUNK;
                const uint32_t *bs = p->b;
                if (xp)
                    bs = xp + ((long)(t0 / p->tg) * nslices + c0 / p->kc) * block_dwords;
                else
                    b_prepare(x + (long)t0 * ldx, ldx, ng, cols, c0, nc, mx, p->b);
                for (int rb = 0; rb < ngr; rb += 32) {
                    const int r = r0 + rb, nrb = ngr - rb < 32 ? ngr - rb : 32, rt = nrb > 16 ? 2 : 1;
                    uint16_t *here = p->a + ((rb / 32) & 1) * block_elems,
                             *other = p->a + (((rb / 32) & 1) ^ 1) * block_elems;
                    const uint16_t *a = here;
                    long lda = 2L * nc * CHUNK;
                    if (rb == 0) { /* a group's first block: bf16 in place when whole, else staged now */
                        if (!mx && nrb == 32 && cols % CHUNK == 0) {
                            a = rows + (long)r * cols + (long)c0 * CHUNK;
                            lda = 2L * cols;
                        } else {
                            staging now = staging_of(rows, packed, scale, r, nrb, cols, c0, nc, here);
                            stage_lines(&now, 32 * nc);
                        }
                    }
                    staging ahead, *next = NULL;
                    if (rb + 32 < ngr) {
                        const int nrb_next = ngr - rb - 32 < 32 ? ngr - rb - 32 : 32;
                        ahead = staging_of(rows, packed, scale, r + 32, nrb_next, cols, c0, nc, other);
                        next = &ahead;
                    }
                    for (int tb = 0; tb < ntt; tb += 2) {
                        const int tt = ntt - tb > 1 ? 2 : 1;
                        const int nt0 = ng - TILE_TOKENS * tb < TILE_TOKENS ? ng - TILE_TOKENS * tb : TILE_TOKENS;
                        const int nt1 = tt > 1 ? (ng - TILE_TOKENS * (tb + 1) < TILE_TOKENS ? ng - TILE_TOKENS * (tb + 1)
                                                                                            : TILE_TOKENS)
                                               : 0;
                        const uint32_t *b0 = bs + (long)tb * nc * 16 * TILE_COLS,
                                       *b1 = bs + (long)(tb + 1) * nc * 16 * TILE_COLS;
                        float *sp = p->spill + ((long)(rb / 16) * ntt + tb) * 256;
#define SPILL(i, j) (sp + ((long)(i) * ntt + (j)) * 256)
                        if (first) {
                            _tile_zero(0);
                            _tile_zero(1);
                            _tile_zero(2);
                            _tile_zero(3);
                        } else
                            TILES_IO(_tile_loadd, SPILL);
                        tiles_run(rt, tt, a, (const uint16_t *)((const char *)a + 16 * lda), lda, b0, b1, TERMS * nt0,
                                  TERMS * nt1, nc, tb == 0 ? next : NULL);
                        if (next && tb == 0)
                            stage_lines(next, 32 * nc); /* what the loop's 32 lines a chunk left */
                        if (!last) {
                            TILES_IO(_tile_stored, SPILL);
                            continue;
                        }
#undef SPILL
                        pending_push(pend, &cur, y + (long)(t0 + TILE_TOKENS * tb) * ldy + r, rt, tt, nrb, nt0, nt1,
                                     ldy);
                    }
                }
            }
        }
    }
    pending_flush(&pend[0], ldy);
    pending_flush(&pend[1], ldy);
}

/* Tokens a group (tg) and chunks a slice (kc, even) of a batch of n tokens and `cols`
 * columns: the input of a slice and group, all three parts, in about 1 MB (L2), and a
 * block of 32 rows of a slice converted or staged in A_SLICE_BYTES. */
static void plan_shape(int n, int cols, int *tg, int *kc) {
    const int nchunks = (cols + CHUNK - 1) / CHUNK;
    *tg = n <= 130 ? n : 130; /* whole pairs of token tiles */
    int k = (int)(B_SLICE_BYTES / ((long)*tg * TERMS * 64));
    k = k < 2 ? 2 : k / 2 * 2;
    if (k > (int)(A_SLICE_BYTES / (32 * 64)))
        k = A_SLICE_BYTES / (32 * 64);
    *kc = k >= nchunks ? nchunks + (nchunks & 1) : k;
}

/* The dwords of one group's slice of prepared input, at most. */
static long block_dwords_of(int tg, int kc) {
    return (long)((tg + TILE_TOKENS - 1) / TILE_TOKENS) * kc * 16 * TILE_COLS;
}

/* A plan for nr rows, n tokens and `cols` columns in the thread's scratch, or 0 when it
 * cannot grow (then the caller runs a small plan on its stack: same bits, more passes).
 * With the input prepared (xp), no room for it. */
static int plan_heap(int nr, int n, int cols, int prepared, plan *p) {
    scratch *s = scratch_here();
    if (!s)
        return 0;
    const int nchunks = (cols + CHUNK - 1) / CHUNK;
    plan_shape(n, cols, &p->tg, &p->kc);
    p->rg = nr;
    const int ntt = (p->tg + TILE_TOKENS - 1) / TILE_TOKENS;
    const size_t b_bytes = prepared ? 64 : (size_t)block_dwords_of(p->tg, p->kc) * 4;
    const size_t a_bytes = (size_t)2 * 32 * p->kc * 64; /* bf16: two staged blocks */
    const size_t spill_bytes = p->kc >= nchunks ? 0 : (size_t)((nr + 31) / 32 * 2) * ntt * 1024;
    p->b = grow(&s->b, &s->b_cap, b_bytes);
    p->a = grow(&s->a, &s->a_cap, a_bytes);
    p->spill = spill_bytes ? grow(&s->c, &s->c_cap, spill_bytes) : NULL;
    return p->b && p->a && (p->spill || !spill_bytes);
}

/* kernels_impl.prepare: a batch's input for every group and slice, in the calling thread's
 * scratch; NULL for few tokens (product_few makes its own: it is small) or without memory
 * (each call then makes its own: the same bits). */
static const void *amx_prepare(const float *x, int ldx, int n, int cols, kernels_wtype type) {
    if (n <= FEW_TOKENS)
        return NULL;
    scratch *s = scratch_here();
    int tg, kc;
    plan_shape(n, cols, &tg, &kc);
    const int nchunks = (cols + CHUNK - 1) / CHUNK, nslices = (nchunks + kc - 1) / kc, ngroups = (n + tg - 1) / tg;
    const long block = block_dwords_of(tg, kc);
    uint32_t *xp = s ? grow(&s->prep, &s->prep_cap, (size_t)ngroups * nslices * block * 4) : NULL;
    if (!xp)
        return NULL;
    for (int g = 0; g < ngroups; g++)
        for (int sl = 0; sl < nslices; sl++) {
            const int t0 = g * tg, c0 = sl * kc;
            b_prepare(x + (long)t0 * ldx, ldx, n - t0 < tg ? n - t0 : tg, cols, c0,
                      nchunks - c0 < kc ? nchunks - c0 : kc, type == KERNELS_MXFP4, xp + ((long)g * nslices + sl) * block);
        }
    return xp;
}

static void amx_product(const uint16_t *rows, const uint8_t *packed, const uint8_t *scale, int nr, const float *x,
                        int ldx, const uint32_t *xp, int n, int cols, float *y, int ldy) {
    tiles_configure();
    plan p;
    scratch *few = n <= FEW_TOKENS ? scratch_here() : NULL;
    const size_t few_bytes = (size_t)2 * ((cols + CHUNK - 1) / CHUNK) * 16 * TILE_COLS * 4;
    if (few && grow(&few->b, &few->b_cap, few_bytes))
        product_few(rows, packed, scale, nr, x, ldx, n, cols, y, ldy, few->b);
    else if (plan_heap(nr, n, cols, xp != NULL, &p))
        product(rows, packed, scale, nr, x, ldx, xp, n, cols, y, ldy, &p);
    else { /* without the heap plan, xp's layout is not this plan's: x it is */
        enum { TG = 2 * TILE_TOKENS, RG = 32, KC = 4 };
        uint32_t b[2 * KC * 16 * TILE_COLS + 16] __attribute__((aligned(64)));
        uint16_t a[2 * 32 * KC * CHUNK + 32] __attribute__((aligned(64)));
        float spill[2 * 256] __attribute__((aligned(64)));
        const plan small = {b, a, spill, TG, RG, KC};
        product(rows, packed, scale, nr, x, ldx, NULL, n, cols, y, ldy, &small);
    }
    _tile_release();
}

static void amx_mm_bf16(const uint16_t *rows, int nr, const float *x, int ldx, int n, int cols, float *y, int ldy) {
    amx_product(rows, NULL, NULL, nr, x, ldx, NULL, n, cols, y, ldy);
}

static void amx_mm_mxfp4(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx, int n,
                         int cols, float *y, int ldy) {
    amx_product(NULL, packed, scale, nr, x, ldx, NULL, n, cols, y, ldy);
}

static void amx_mm_bf16_prepared(const uint16_t *rows, int nr, const float *x, int ldx, const void *xp, int n,
                                 int cols, float *y, int ldy) {
    amx_product(rows, NULL, NULL, nr, x, ldx, xp, n, cols, y, ldy);
}

static void amx_mm_mxfp4_prepared(const uint8_t *packed, const uint8_t *scale, int nr, const float *x, int ldx,
                                  const void *xp, int n, int cols, float *y, int ldy) {
    amx_product(NULL, packed, scale, nr, x, ldx, xp, n, cols, y, ldy);
}

static kernels_impl amx_impl;
static const kernels_impl *amx_chosen;

/* AMX-TILE and AMX-BF16 (CPUID 7.0 EDX bits 24 and 22), the AVX-512 kernels this set
 * borrows its f32 products, argmax and peak loop from, and the OS's permission for the
 * tile state (Linux asks each process to request it; refused, e.g., where a thread's
 * signal stack is too small for the larger state). */
static void amx_init(void) {
    unsigned a, b, c, d;
    const kernels_impl *wide = kernels_avx512();
    if (!wide || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
        return;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return;
    amx_impl = *wide;
    amx_impl.name = "amx";
    amx_impl.mm_bf16 = amx_mm_bf16;
    amx_impl.mm_mxfp4 = amx_mm_mxfp4;
    amx_impl.prepare = amx_prepare;
    amx_impl.mm_bf16_prepared = amx_mm_bf16_prepared;
    amx_impl.mm_mxfp4_prepared = amx_mm_mxfp4_prepared;
    amx_chosen = &amx_impl;
}

const kernels_impl *kernels_amx(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_init);
    return amx_chosen;
}

#else

const kernels_impl *kernels_amx(void) {
    return NULL;
}

#endif
