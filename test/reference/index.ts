// index.ts - the reference's public API, the one module the engine's tests import:
// loading, full-recompute logits, greedy decoding, the mistakes a port can make, and the
// checkpoint's tensor table.
export { argmax, finalHidden, forwardAll, forwardLast, greedy, loadReferenceModel, topMargin } from './model';
export type { GreedyResult, ReferenceModel } from './model';
export { MISTAKES, MISTAKE_DESCRIPTIONS } from './mistakes';
export type { Mistake, ReferenceOptions } from './mistakes';
export { expectedTensors, tensorBytes, PREFIX } from './tensors';
export type { Dtype, TensorSpec } from './tensors';
export { parseConfig, mixerKind, ffnKind } from './config';
export type { K3Config } from './config';
export { Checkpoint, readShardHeader } from './safetensors';
export { decodeMxfp4, decodeBf16, decodeF32 } from './dtypes';
export { KDA_L2_EPS } from './kda';
export { MLA_LORA_NORM_EPS } from './mla';
export type { Seq } from './attn-res';
