/* dtype.h - the number formats the checkpoint stores: bf16 and MXFP4 (E2M1 nibbles with
 * an E8M0 scale per 32 columns). Conversion only; the matrix kernels live in kernels.h. */
#ifndef K3_DTYPE_H
#define K3_DTYPE_H

#include <stdint.h>
#include <string.h>

/* MXFP4 packs 32 logical columns per scale byte; a row of C columns is C/2 bytes. */
#define DTYPE_MXFP4_BLOCK 32

/* bf16 is the top half of an f32: widening is exact. */
static inline float dtype_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round-to-nearest-even narrowing, NaN kept a quiet NaN (what torch does). */
uint16_t dtype_f32_to_bf16(float f);

/* The value of one E2M1 code (bit 3 = sign, bits 0-2 = magnitude index). */
float dtype_e2m1_value(unsigned code);

/* 2^(e - 127) for an E8M0 scale byte; e = 255 (NaN in the format) is the caller's error. */
float dtype_e8m0_value(uint8_t e);

/* Dequantize one MXFP4 row of `cols` logical columns (cols % 32 == 0): low nibble of each
 * packed byte is the even column. out: (cols) */
void dtype_mxfp4_row_to_f32(const uint8_t *packed, const uint8_t *scale, int cols, float *out);

#endif
