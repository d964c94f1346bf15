// dtypes.ts - decoding of the checkpoint's number formats into float64: bf16, f32 and the
// compressed-tensors `mxfp4-pack-quantized` experts (§2.8 of docs/k3-architecture.md).
// Every value it produces is exact. It does not read files.

/** bf16 is the top half of an f32. */
export function bf16ToNumber(bits: number): number {
  const dv = new DataView(new ArrayBuffer(4));
  dv.setUint32(0, (bits & 0xffff) << 16, false);
  return dv.getFloat32(0, false);
}

export function decodeBf16(bytes: Uint8Array): Float64Array {
  const n = bytes.byteLength / 2;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // Widen into f32 bit patterns (exact), then read them back as numbers.
  const bits = new Uint32Array(n);
  for (let i = 0; i < n; i++) bits[i] = dv.getUint16(2 * i, true) << 16;
  return Float64Array.from(new Float32Array(bits.buffer));
}

export function decodeF32(bytes: Uint8Array): Float64Array {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float64Array(bytes.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = dv.getFloat32(4 * i, true);
  return out;
}

/** E2M1 magnitudes by the low three bits of a code; bit 3 is the sign. */
export const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6] as const;

export function e2m1(code: number): number {
  const mag = E2M1[code & 7];
  return code & 8 ? -mag : mag;
}

/** E8M0: 2^(s-127); 255 is NaN. */
export function e8m0(s: number): number {
  return s === 255 ? NaN : Math.pow(2, s - 127);
}

/**
 * Dequantizes an MXFP4 weight of logical shape [rows, cols]: `packed` is [rows, cols/2]
 * (the low nibble holds the even column), `scale` is [rows, cols/32] E8M0 bytes.
 */
export function decodeMxfp4(packed: Uint8Array, scale: Uint8Array, rows: number, cols: number): Float64Array {
  if (cols % 32 !== 0) throw new Error(`mxfp4: ${cols} columns is not a multiple of 32`);
  if (packed.length !== (rows * cols) / 2 || scale.length !== (rows * cols) / 32) {
    throw new Error(`mxfp4: ${packed.length} packed and ${scale.length} scale bytes do not fit [${rows}, ${cols}]`);
  }
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const byte = packed[r * (cols / 2) + (c >> 1)];
      const code = c & 1 ? byte >> 4 : byte & 0x0f;
      out[r * cols + c] = e2m1(code) * e8m0(scale[r * (cols / 32) + (c >> 5)]);
    }
  }
  return out;
}
