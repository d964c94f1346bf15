/* dtype.c - bf16 and MXFP4 conversions. Exact by construction: every MXFP4 value is a
 * small integer times a power of two, so dequantized values are exact in f32. */
#include "dtype.h"

#include <math.h>

uint16_t dtype_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float dtype_e2m1_value(unsigned code) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float m = mag[code & 7u];
    return (code & 8u) ? -m : m;
}

float dtype_e8m0_value(uint8_t e) {
    return ldexpf(1.0f, (int)e - 127);
}

void dtype_mxfp4_row_to_f32(const uint8_t *packed, const uint8_t *scale, int cols, float *out) {
    for (int c = 0; c < cols; c += 2) {
        const float s = dtype_e8m0_value(scale[c / DTYPE_MXFP4_BLOCK]);
        const uint8_t b = packed[c / 2];
        out[c] = dtype_e2m1_value(b & 0x0fu) * s;
        out[c + 1] = dtype_e2m1_value(b >> 4) * s;
    }
}
