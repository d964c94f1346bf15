// mxfp4.test.ts - the reference's MXFP4 (E2M1 + E8M0) and bf16 decoding against the
// format's definition: every code, several scale bytes, the nibble order, the grouping.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bf16ToNumber, decodeBf16, decodeMxfp4, e8m0 } from './dtypes';

const CODE_VALUES = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** One row of 32 columns where column c holds code c % 16. */
function allCodesRow(): Uint8Array {
  const packed = new Uint8Array(16);
  for (let k = 0; k < 16; k++) packed[k] = ((2 * k) % 16) | (((2 * k + 1) % 16) << 4);
  return packed;
}

test('mxfp4 decodes every E2M1 code at scale byte 127', () => {
  const w = decodeMxfp4(allCodesRow(), new Uint8Array([127]), 1, 32);
  for (let c = 0; c < 32; c++) assert.ok(Object.is(w[c], CODE_VALUES[c % 16]), `column ${c}: ${w[c]} vs ${CODE_VALUES[c % 16]}`);
});

test('mxfp4 low nibble is the even column', () => {
  const packed = new Uint8Array(16);
  packed[0] = 0x2f; // low nibble 0xf (-6) -> column 0, high nibble 0x2 (1) -> column 1
  const w = decodeMxfp4(packed, new Uint8Array([127]), 1, 32);
  assert.equal(w[0], -6);
  assert.equal(w[1], 1);
});

test('mxfp4 scale byte s multiplies by 2^(s-127); 255 is NaN', () => {
  assert.equal(e8m0(127), 1);
  assert.equal(e8m0(128), 2);
  assert.equal(e8m0(126), 0.5);
  assert.equal(e8m0(0), 2 ** -127);
  assert.equal(e8m0(254), 2 ** 127);
  assert.ok(Number.isNaN(e8m0(255)));
  const w = decodeMxfp4(allCodesRow(), new Uint8Array([130]), 1, 32);
  assert.equal(w[7], 6 * 8);
  assert.equal(w[13], -3 * 8);
});

test('mxfp4 has one scale per row per 32 columns', () => {
  // 2 rows x 64 columns: scales [row0: 127, 129; row1: 125, 127]; every packed byte is 0x77 (6, 6)
  const packed = new Uint8Array(64).fill(0x77);
  const w = decodeMxfp4(packed, new Uint8Array([127, 129, 125, 127]), 2, 64);
  assert.equal(w[31], 6);
  assert.equal(w[32], 24);
  assert.equal(w[64 + 31], 1.5);
  assert.equal(w[64 + 63], 6);
});

test('mxfp4 rejects byte counts that do not fit the logical shape', () => {
  assert.throws(() => decodeMxfp4(new Uint8Array(15), new Uint8Array(1), 1, 32), /do not fit \[1, 32\]/);
  assert.throws(() => decodeMxfp4(new Uint8Array(8), new Uint8Array(1), 1, 16), /not a multiple of 32/);
});

test('bf16 is the top half of an f32, little-endian on disk', () => {
  assert.equal(bf16ToNumber(0x3f80), 1);
  assert.equal(bf16ToNumber(0xc000), -2);
  assert.deepEqual(Array.from(decodeBf16(new Uint8Array([0x80, 0x3f, 0x40, 0xc0]))), [1, -3]);
});
