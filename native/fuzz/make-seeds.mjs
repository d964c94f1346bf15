// make-seeds.mjs - writes the fuzz harnesses' seed corpus, native/fuzz/corpus/<harness>/,
// the checked-in starting points of `npm run fuzz` (docs/FUZZING.md): small well-formed
// inputs of each format (JSON documents, configs taken from the embedded default model,
// safetensors folders, a tokenizer, HTTP requests, chat bodies) and a few broken ones. The
// same files every time: `node native/fuzz/make-seeds.mjs` after changing a format.
// Inputs the fuzzer found and that were fixed are kept beside them as regression-* files.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const out = path.join(here, 'corpus');

function write(harness, name, bytes) {
  const dir = path.join(out, harness);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), bytes);
}

/** The harnesses' archive: records of [file number][u32 LE length][bytes]. */
function archive(files) {
  return Buffer.concat(
    files.flatMap(([id, bytes]) => {
      const head = Buffer.alloc(5);
      head[0] = id;
      head.writeUInt32LE(bytes.length, 1);
      return [head, Buffer.from(bytes)];
    }),
  );
}

/** A safetensors shard of the given tensors ({ name: [dtype, shape, bytes] }). */
function shard(tensors, metadata) {
  const header = {};
  const data = [];
  let at = 0;
  for (const [name, [dtype, shape, bytes]] of Object.entries(tensors)) {
    header[name] = { dtype, shape, data_offsets: [at, at + bytes.length] };
    data.push(bytes);
    at += bytes.length;
  }
  if (metadata) header.__metadata__ = metadata;
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, Buffer.from(json), ...data]);
}

const f32 = (...xs) => Buffer.from(new Float32Array(xs).buffer);
const bf16 = (n) => Buffer.alloc(2 * n, 0x3f);

// ---- json
write('json', 'object', '{"a": [1, 2.5e3, "x\\u00e9\\ud83d\\ude00", null, true, {"b": false}], "c": {}}');
write('json', 'nested', '[[[[[[[[[[]]]]]]]]]]');
write('json', 'numbers', '[0, -0, 1e308, -1.5E-7, 9007199254740993, 123456789012345678901234567890]');
write('json', 'bom-string', '\ufeff"tab\\tnew\\nline \\"quoted\\" \\\\ slash \\/"');
write('json', 'broken', '{"a": [1, 2,}');

// ---- config: the embedded model's, and variants other tools write
const k3mini = JSON.parse(fs.readFileSync(path.join(root, 'media/models/k3-mini/config.json'), 'utf8'));
write('config', 'k3-mini', JSON.stringify(k3mini, null, 1));
const flat = { ...k3mini.text_config };
delete flat.quantization_config;
write('config', 'flat-dense', JSON.stringify(flat));
const sparse = structuredClone(k3mini);
for (const k of ['moe_layer_freq', 'moe_renormalize', 'routed_scaling_factor', 'num_expert_group', 'topk_group', 'mla_use_output_gate'])
  delete sparse.text_config[k];
write('config', 'defaults-taken', JSON.stringify(sparse));
const softplus = structuredClone(k3mini);
delete softplus.text_config.linear_attn_config.gate_lower_bound;
softplus.text_config.eos_token_id = [8194, 8193];
softplus.text_config.attn_res_block_size = null;
write('config', 'softplus-eos-list', JSON.stringify(softplus));

// ---- safetensors: one file, and an index with two shards
const tensors = { 'a.weight': ['F32', [2, 3], f32(1, 2, 3, 4, 5, 6)], 'b.bias': ['BF16', [4], bf16(4)], 'c.scale': ['U8', [2, 2], Buffer.from([1, 2, 3, 4])] };
write('safetensors', 'single', archive([[0, shard(tensors, { format: 'pt' })]]));
write(
  'safetensors',
  'indexed',
  archive([
    [1, JSON.stringify({ metadata: { total_size: 40 }, weight_map: { 'a.weight': 'model-00001-of-00002.safetensors', 'b.bias': 'model-00002-of-00002.safetensors' } })],
    [2, shard({ 'a.weight': tensors['a.weight'] })],
    [3, shard({ 'b.bias': tensors['b.bias'] })],
  ]),
);
write('safetensors', 'scalar-and-empty', archive([[0, shard({ s: ['F32', [], f32(7)], e: ['F32', [0, 4], Buffer.alloc(0)] })]]));

// ---- tokenizer: 256 byte ranks, a few merges, the special slots named
const b64 = (s) => Buffer.from(s, 'latin1').toString('base64');
const ranks = Array.from({ length: 256 }, (_, b) => `${Buffer.from([b]).toString('base64')} ${b}`);
const merges = ['ab', 'abc', ' t', 'th', 'the', ' the', 'in', 'ing', '  ', '    ', 'de', 'def', '\n\n'].map((m, i) => `${b64(m)} ${256 + i}`);
const n = 256 + merges.length;
const specials = ['[BOS]', '[EOS]', '<|open|>', '<|close|>', '<|sep|>', '<|end_of_msg|>'];
const config = { added_tokens_decoder: Object.fromEntries(specials.map((name, i) => [String(n + i), { content: name, special: true }])) };
write('tokenizer', 'small', archive([[0, `${[...ranks, ...merges].join('\n')}\n`], [1, JSON.stringify(config)]]));
write('tokenizer', 'bytes-only', archive([[0, `${ranks.join('\n')}\n`], [1, '{"added_tokens_decoder": {}}']]));

// ---- state: the harness saves a valid one at start; these are the broken shapes
write('state', 'bad-magic', Buffer.from('K3STATX\0hello'));
const header = Buffer.alloc(96);
header.write('K3STATE\0', 0, 'latin1');
header.writeUInt32LE(1, 8);
header.writeUInt32LE(96, 12);
write('state', 'header-only', header);

// ---- http
write('http', 'get-health', 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
write('http', 'post-length', 'POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"prompt": "hi"}\n');
write('http', 'post-chunked', 'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nTrailer: y\r\n\r\n');
write('http', 'expect-auth', 'POST /v1/completions HTTP/1.0\r\nExpect: 100-continue\r\nAuthorization: bearer  sesame\r\nContent-Length: 2\r\n\r\n{}');
write('http', 'lf-only-query', '\r\nGET /v1/models?x=1 HTTP/1.1\nX: y\n\n');

// ---- chat
write('chat', 'thinking', JSON.stringify({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi <|open|>' }], reasoning_effort: 'low' }));
write(
  'chat',
  'assistant-turns',
  JSON.stringify({
    messages: [
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4', reasoning_content: 'add "2" & 2' },
      { role: 'developer', content: '<|end_of_msg|><|close|>message<|sep|>' },
      { role: 'user', content: '\u00e9\ud83d\ude00 and \u0000' },
    ],
    chat_template_kwargs: { thinking: false },
  }),
);
write('chat', 'no-prompt', JSON.stringify({ messages: [{ role: 'assistant', content: '' }], k3_no_generation_prompt: true }));
console.log(`make-seeds: wrote ${out}`);
