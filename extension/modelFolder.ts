// modelFolder.ts - checks that a folder holds a Kimi K3 checkpoint in the released layout
// before the extension accepts it or starts the engine on it: config.json, the safetensors
// index and every shard it names, tiktoken.model. It reads only names, sizes and the two
// small JSON files; whether the tensors inside are right is the engine's job.
import * as fs from 'node:fs';
import * as path from 'node:path';

export type FolderCheck = { ok: true } | { ok: false; problem: string };

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

export function checkModelFolder(dir: string): FolderCheck {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(dir);
  } catch {
    return { ok: false, problem: `The model folder ${dir} does not exist` };
  }
  if (!stat.isDirectory()) return { ok: false, problem: `${dir} is a file, not a model folder` };
  for (const name of ['config.json', 'tiktoken.model']) {
    if (!isFile(path.join(dir, name))) return { ok: false, problem: `${dir} has no ${name}: it is not a K3 checkpoint folder` };
  }
  try {
    JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  } catch (e) {
    return { ok: false, problem: `${path.join(dir, 'config.json')} is not valid JSON (${(e as Error).message})` };
  }
  const index = path.join(dir, 'model.safetensors.index.json');
  if (!isFile(index)) {
    if (isFile(path.join(dir, 'model.safetensors'))) return { ok: true };
    return { ok: false, problem: `${dir} has neither model.safetensors.index.json nor model.safetensors` };
  }
  let shards: string[];
  try {
    const map = (JSON.parse(fs.readFileSync(index, 'utf8')) as { weight_map?: Record<string, unknown> }).weight_map;
    if (!map || typeof map !== 'object') return { ok: false, problem: `${index} has no weight_map` };
    shards = [...new Set(Object.values(map).filter((v): v is string => typeof v === 'string'))];
  } catch (e) {
    return { ok: false, problem: `${index} is not valid JSON (${(e as Error).message})` };
  }
  const missing = shards.filter((s) => !isFile(path.join(dir, s)));
  if (missing.length > 0) {
    return {
      ok: false,
      problem: `${dir} lacks ${missing.length} of its ${shards.length} shards (first: ${missing[0]}); the download may be incomplete`,
    };
  }
  return { ok: true };
}
