/* test_dtype.c - bf16 and MXFP4 conversions against hand-computed values. */
#include "dtype.h"
#include "harness.h"

TEST(bf16_widening_is_exact_and_narrowing_rounds_to_nearest_even) {
    CHECK_NEAR(dtype_bf16_to_f32(0x3f80), 1.0, 0);
    CHECK_NEAR(dtype_bf16_to_f32(0xc040), -3.0, 0);
    CHECK_INT(dtype_f32_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties go to even. */
    CHECK_INT(dtype_f32_to_bf16(1.00390625f), 0x3f80);
    /* 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even). */
    CHECK_INT(dtype_f32_to_bf16(1.01171875f), 0x3f82);
    CHECK_INT(dtype_f32_to_bf16(-2.5f), 0xc020);
}

TEST(e2m1_codes_decode_to_the_eight_magnitudes_with_bit3_as_sign) {
    static const double want[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    for (unsigned c = 0; c < 16; c++)
        CHECK_NEAR(dtype_e2m1_value(c), want[c], 0);
}

TEST(e8m0_scale_is_a_power_of_two_biased_by_127) {
    CHECK_NEAR(dtype_e8m0_value(127), 1.0, 0);
    CHECK_NEAR(dtype_e8m0_value(128), 2.0, 0);
    CHECK_NEAR(dtype_e8m0_value(120), 1.0 / 128, 0);
    CHECK_NEAR(dtype_e8m0_value(1), ldexp(1.0, -126), 0);
}

TEST(mxfp4_row_low_nibble_is_the_even_column_and_scale_covers_32_columns) {
    uint8_t packed[32], scale[2] = {127, 125};
    float out[64];
    for (int i = 0; i < 32; i++)
        packed[i] = (uint8_t)((i & 15) | ((15 - (i & 15)) << 4));
    dtype_mxfp4_row_to_f32(packed, scale, 64, out);
    CHECK_NEAR(out[0], 0.0, 0);           /* byte 0xF0: low nibble 0 */
    CHECK_NEAR(out[1], -6.0, 0);          /* high nibble 15 = -6 */
    CHECK_NEAR(out[2], 0.5, 0);           /* byte 1: low nibble 1 */
    CHECK_NEAR(out[30], -6.0, 0);         /* byte 15: low nibble 15 */
    CHECK_NEAR(out[31], 0.0, 0);
    CHECK_NEAR(out[33], -6.0 * 0.25, 0);  /* second block, scale 2^-2: byte 16 high nibble */
    CHECK_NEAR(out[34], 0.5 * 0.25, 0);   /* byte 17 low nibble 1 */
    CHECK_NEAR(out[35], -4.0 * 0.25, 0);  /* byte 17 high nibble 14 = -4 */
}
