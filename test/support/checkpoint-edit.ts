// checkpoint-edit.ts - makes broken copies of a generated checkpoint for bad-input tests:
// the copy hard-links every file it does not change (the fixture itself is never touched)
// and rewrites the one it does. Knows the safetensors shard layout (8-byte header length,
// JSON header, data) and nothing about what tensors mean.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export interface ShardHeader {
  [name: string]: { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>;
}

/** A fresh directory holding links to every file of `src`. */
export function linkCopy(src: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-broken-'));
  for (const f of fs.readdirSync(src)) fs.linkSync(path.join(src, f), path.join(dir, f));
  return dir;
}

/** A fresh directory like linkCopy's whose shards are its own files (copies, not links),
 * for tests that truncate or overwrite a shard under a running engine. */
export function independentCopy(src: string): string {
  const dir = linkCopy(src);
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors'))) {
    const file = path.join(dir, f);
    rewrite(file, fs.readFileSync(file));
  }
  return dir;
}

/** The largest shard of a checkpoint directory. */
export function largestShard(dir: string): string {
  const shards = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors'));
  shards.sort((a, b) => fs.statSync(path.join(dir, b)).size - fs.statSync(path.join(dir, a)).size);
  return path.join(dir, shards[0]);
}

/** Replaces a linked file by an independent one with the given bytes. */
export function rewrite(file: string, bytes: Buffer | string): void {
  fs.unlinkSync(file);
  fs.writeFileSync(file, bytes);
}

/** The shard that holds `tensor`, according to the index. */
export function shardOf(dir: string, tensor: string): string {
  const index = JSON.parse(fs.readFileSync(path.join(dir, 'model.safetensors.index.json'), 'utf8'));
  const file = index.weight_map[tensor];
  if (!file) throw new Error(`${tensor} is not in the index of ${dir}`);
  return path.join(dir, file);
}

export function readShard(file: string): { header: ShardHeader; data: Buffer } {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.toString('utf8', 8, 8 + n)), data: buf.subarray(8 + n) };
}

/** Writes a shard with `header` (padded with spaces to 8 bytes) over `data`. */
export function writeShard(file: string, header: ShardHeader, data: Buffer): void {
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  rewrite(file, Buffer.concat([len, Buffer.from(json), data]));
}

/** Changes one tensor's header entry in its shard. */
export function editTensor(dir: string, tensor: string, edit: (entry: { dtype: string; shape: number[] }) => void): void {
  const file = shardOf(dir, tensor);
  const { header, data } = readShard(file);
  edit(header[tensor] as { dtype: string; shape: number[] });
  writeShard(file, header, data);
}
