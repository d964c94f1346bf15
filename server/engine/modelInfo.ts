// modelInfo.ts - the one place that reads what a model folder says about itself beyond its
// architecture: its name, the bytes of its weights, and whether it was trained for chat.
// The last comes from config.json's optional top-level key `"k3_code": {"chat": false}`
// (docs/PROTOCOL.md, "Models"); absent means chat-trained, as the released K3 is. The
// engine's config parser reads past the key. A malformed key is refused naming the file
// and field, like every other config error. It loads no weights.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { K3Failure } from '../errors';
import type { ModelInfo } from '../../protocol/lsp';
import { readRegularFile } from '../state/files';

/** Most bytes of a config.json read here (the released K3's is a few KB). */
const MAX_CONFIG_BYTES = 4 * 1024 ** 2;

/** The safetensors shards of a checkpoint folder, with their sizes, in name order. */
export function shards(dir: string): { file: string; bytes: number }[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort()
    .map((f) => ({ file: f, bytes: fs.statSync(path.join(dir, f)).size }));
}

/** What the folder `dir` holds. Throws a K3Failure (`model-invalid`) naming the file and
 * field when config.json cannot be read or its `k3_code` key is malformed. */
export function readModelInfo(dir: string): ModelInfo {
  const file = path.join(dir, 'config.json');
  const read = readRegularFile(file, MAX_CONFIG_BYTES);
  if ('problem' in read) throw new K3Failure('model-invalid', `${file} ${read.problem}.`, 'config', file);
  let config: unknown;
  try {
    config = JSON.parse(read.text);
  } catch (e) {
    throw new K3Failure('model-invalid', `${file} is not JSON: ${(e as Error).message}.`, 'config', file);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new K3Failure('model-invalid', `${file} is not a JSON object.`, 'config', file);
  }
  const k3 = (config as Record<string, unknown>).k3_code;
  let chat = true;
  if (k3 !== undefined) {
    if (k3 === null || typeof k3 !== 'object' || Array.isArray(k3)) {
      throw new K3Failure('model-invalid', `${file}: k3_code is ${JSON.stringify(k3)}, expected an object such as {"chat": false}.`, 'config', file);
    }
    const v = (k3 as Record<string, unknown>).chat;
    if (v !== undefined && typeof v !== 'boolean') {
      throw new K3Failure('model-invalid', `${file}: k3_code.chat is ${JSON.stringify(v)}, expected true or false.`, 'config', file);
    }
    if (v === false) chat = false;
  }
  return { name: path.basename(dir), path: dir, bytes: shards(dir).reduce((n, s) => n + s.bytes, 0), chat };
}
