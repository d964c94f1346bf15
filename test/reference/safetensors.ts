// safetensors.ts - the reference's own reader for a sharded safetensors checkpoint:
// `model.safetensors.index.json` plus shards (or a single `model.safetensors`). It parses
// every shard header, checks each tensor's byte range against its dtype, shape and the file
// length, and returns raw bytes by name. It does not decode values (dtypes.ts does).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Dtype } from './tensors';

export interface TensorEntry {
  name: string;
  dtype: Dtype;
  shape: number[];
  file: string;
  /** Absolute byte offset of the data in `file`. */
  offset: number;
  byteLength: number;
}

export interface ShardHeader {
  file: string;
  /** Tensors in data order. */
  tensors: TensorEntry[];
  fileSize: number;
}

const DTYPE_BYTES: Record<string, number> = { BF16: 2, F32: 4, U8: 1 };

/** Parses one shard's header and validates every tensor's range. */
export function readShardHeader(file: string): ShardHeader {
  const fd = fs.openSync(file, 'r');
  try {
    const fileSize = fs.fstatSync(fd).size;
    if (fileSize < 8) throw new Error(`${file}: ${fileSize} bytes, too short for a safetensors header`);
    const lenBuf = Buffer.alloc(8);
    fs.readSync(fd, lenBuf, 0, 8, 0);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen > fileSize - 8 || headerLen > 100_000_000) {
      throw new Error(`${file}: header length ${headerLen} does not fit in ${fileSize} bytes`);
    }
    const hdr = Buffer.alloc(headerLen);
    fs.readSync(fd, hdr, 0, headerLen, 8);
    const json = JSON.parse(hdr.toString('utf8')) as Record<string, unknown>;
    const base = 8 + headerLen;
    const tensors: TensorEntry[] = [];
    for (const [name, v] of Object.entries(json)) {
      if (name === '__metadata__') continue;
      const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof e.dtype !== 'string' || !(e.dtype in DTYPE_BYTES)) {
        throw new Error(`${file}: tensor ${name} has dtype ${JSON.stringify(e.dtype)}, expected BF16, F32 or U8`);
      }
      const shape = e.shape as number[];
      const [begin, end] = e.data_offsets as [number, number];
      const count = shape.reduce((a, b) => a * b, 1);
      if (end - begin !== count * DTYPE_BYTES[e.dtype]) {
        throw new Error(`${file}: tensor ${name} spans ${end - begin} bytes, but ${e.dtype} ${JSON.stringify(shape)} needs ${count * DTYPE_BYTES[e.dtype]}`);
      }
      if (begin < 0 || base + end > fileSize) {
        throw new Error(`${file}: tensor ${name} ends at byte ${base + end}, past the end of the file (${fileSize})`);
      }
      tensors.push({ name, dtype: e.dtype as Dtype, shape, file, offset: base + begin, byteLength: end - begin });
    }
    tensors.sort((a, b) => a.offset - b.offset);
    return { file, tensors, fileSize };
  } finally {
    fs.closeSync(fd);
  }
}

export interface IndexFile {
  metadata: { total_size: number };
  weight_map: Record<string, string>;
}

/** All tensors of a checkpoint directory, by name. Checks the index against the shard headers. */
export class Checkpoint {
  readonly tensors = new Map<string, TensorEntry>();
  readonly shards: ShardHeader[] = [];

  constructor(readonly dir: string) {
    const indexPath = path.join(dir, 'model.safetensors.index.json');
    let files: string[];
    let index: IndexFile | null = null;
    if (fs.existsSync(indexPath)) {
      index = JSON.parse(fs.readFileSync(indexPath, 'utf8')) as IndexFile;
      files = [...new Set(Object.values(index.weight_map))].sort();
    } else if (fs.existsSync(path.join(dir, 'model.safetensors'))) {
      files = ['model.safetensors'];
    } else {
      throw new Error(`${dir}: neither model.safetensors.index.json nor model.safetensors exists`);
    }
    for (const f of files) {
      const shard = readShardHeader(path.join(dir, f));
      this.shards.push(shard);
      for (const t of shard.tensors) {
        if (this.tensors.has(t.name)) throw new Error(`${dir}: tensor ${t.name} appears in two shards`);
        this.tensors.set(t.name, t);
      }
    }
    if (index) {
      for (const [name, f] of Object.entries(index.weight_map)) {
        const t = this.tensors.get(name);
        if (!t || path.basename(t.file) !== f) throw new Error(`${indexPath}: ${name} is mapped to ${f} but that shard does not hold it`);
      }
      if (Object.keys(index.weight_map).length !== this.tensors.size) {
        throw new Error(`${indexPath}: maps ${Object.keys(index.weight_map).length} tensors, the shards hold ${this.tensors.size}`);
      }
    }
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  entry(name: string): TensorEntry {
    const t = this.tensors.get(name);
    if (!t) throw new Error(`${this.dir}: the checkpoint has no tensor ${name}`);
    return t;
  }

  /** The tensor's raw little-endian bytes. */
  read(name: string): Uint8Array {
    const t = this.entry(name);
    const out = new Uint8Array(t.byteLength);
    const fd = fs.openSync(t.file, 'r');
    try {
      let done = 0;
      while (done < out.length) {
        const n = fs.readSync(fd, out, done, out.length - done, t.offset + done);
        if (n <= 0) throw new Error(`${t.file}: short read of ${name}`);
        done += n;
      }
    } finally {
      fs.closeSync(fd);
    }
    return out;
  }
}
