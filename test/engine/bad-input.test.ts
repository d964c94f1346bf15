// bad-input.test.ts - broken checkpoints and bad requests get their own clear error and a
// non-zero exit from the k3 CLI, never a crash: each case runs on the plain build and on
// the AddressSanitizer + UBSan build, which turns any memory error into a failure.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { editTensor, linkCopy, readShard, rewrite, shardOf, writeShard } from '../support/checkpoint-edit';
import { k3Binaries } from '../support/engine';
import { ensureFixture } from '../support/fixtures';

const Q_PROJ = 'language_model.model.layers.1.self_attn.q_proj.weight';

interface Case {
  name: string;
  /** Breaks the linked copy in `dir`; returns the extra CLI arguments, if any. */
  breakIt: (dir: string) => string[] | void;
  /** What stderr must say. */
  expect: RegExp[];
}

const cases: Case[] = [
  {
    name: 'a truncated shard',
    breakIt: (dir) => {
      const file = shardOf(dir, Q_PROJ);
      const bytes = fs.readFileSync(file);
      rewrite(file, bytes.subarray(0, bytes.length - 1000));
    },
    expect: [/\(format\)/, /model-\d{5}-of-\d{6}\.safetensors/, /past the data region|past the end|truncated/],
  },
  {
    name: 'a header length pointing past the end of the file',
    breakIt: (dir) => {
      const file = shardOf(dir, Q_PROJ);
      const bytes = Buffer.from(fs.readFileSync(file));
      bytes.writeBigUInt64LE(BigInt(bytes.length * 2), 0);
      rewrite(file, bytes);
    },
    expect: [/\(format\)/, /header/],
  },
  {
    name: 'a missing tensor',
    breakIt: (dir) => {
      const file = shardOf(dir, Q_PROJ);
      const { header, data } = readShard(file);
      delete header[Q_PROJ];
      writeShard(file, header, data);
      const indexFile = path.join(dir, 'model.safetensors.index.json');
      const index = JSON.parse(fs.readFileSync(indexFile, 'utf8'));
      delete index.weight_map[Q_PROJ];
      rewrite(indexFile, JSON.stringify(index));
    },
    expect: [/\(tensor\)/, /missing tensor 'language_model\.model\.layers\.1\.self_attn\.q_proj\.weight'/],
  },
  {
    name: 'a tensor of the wrong shape',
    breakIt: (dir) =>
      editTensor(dir, Q_PROJ, (t) => {
        t.shape = [t.shape[1], t.shape[0]];
      }),
    expect: [/\(tensor\)/, /q_proj\.weight': shape \[64, 128\], expected \[128, 64\]/],
  },
  {
    name: 'a tensor of the wrong dtype',
    breakIt: (dir) =>
      editTensor(dir, Q_PROJ, (t) => {
        t.dtype = 'F16';
      }),
    expect: [/\(tensor\)/, /q_proj\.weight': dtype F16, expected BF16 or F32/],
  },
  {
    name: 'an inconsistent config',
    breakIt: (dir) => {
      const file = path.join(dir, 'config.json');
      const config = JSON.parse(fs.readFileSync(file, 'utf8'));
      config.text_config.num_experts_per_token = config.text_config.num_experts + 1;
      rewrite(file, JSON.stringify(config));
    },
    expect: [/\(config\)/, /num_experts_per_token/, /9/],
  },
  {
    name: 'a layer list that misses a layer',
    breakIt: (dir) => {
      const file = path.join(dir, 'config.json');
      const config = JSON.parse(fs.readFileSync(file, 'utf8'));
      config.text_config.linear_attn_config.kda_layers = config.text_config.linear_attn_config.kda_layers.slice(1);
      rewrite(file, JSON.stringify(config));
    },
    expect: [/\(config\)/, /layer/],
  },
  // One rule for config keys (issue 18): an absent key takes the KimiLinearConfig default,
  // and the checkpoint's tensors must then match exactly. A default (or a value) that
  // switches a feature off while the checkpoint carries its weights is refused.
  {
    name: 'a config without mla_use_output_gate for a checkpoint with MLA output gates',
    breakIt: (dir) => editConfig(dir, (t) => delete t.mla_use_output_gate),
    expect: [
      /\(tensor\)/,
      /tensor 'language_model\.model\.layers\.\d+\.self_attn\.g_proj\.weight' \(model-\d+-of-\d+\.safetensors\) is not used by the model config\.json describes: the output gate of MLA layer \d+, which mla_use_output_gate false switches off/,
      /config\.json leaves out text_config\.mla_use_output_gate false: the KimiLinearConfig defaults were taken/,
    ],
  },
  {
    name: 'a config without attn_res_block_size for a checkpoint with attention residuals',
    breakIt: (dir) => editConfig(dir, (t) => delete t.attn_res_block_size),
    expect: [/\(tensor\)/, /_res_(norm|proj)\.weight' .* attention residuals, which attn_res_block_size null switches off/, /leaves out text_config\.attn_res_block_size null/],
  },
  {
    name: 'num_shared_experts 0 for a checkpoint with shared experts',
    breakIt: (dir) => editConfig(dir, (t) => (t.num_shared_experts = 0)),
    expect: [/\(tensor\)/, /block_sparse_moe\.shared_experts\.\w+\.weight' .* shared experts, which num_shared_experts 0 switches off/],
  },
  {
    name: 'a config without hidden_size (the default 4096 does not fit the tensors)',
    breakIt: (dir) => editConfig(dir, (t) => delete t.hidden_size),
    expect: [/\(tensor\)/, /embed_tokens\.weight': shape \[163840, 64\], expected \[163840, 4096\]/, /leaves out text_config\.hidden_size 4096/],
  },
  {
    name: 'a token id outside the vocabulary',
    breakIt: () => ['--ids', '5,163840'],
    expect: [/\(token\)/, /token id 163840 at input position 1 is outside the vocabulary \[0, 163840\)/],
  },
];

/** Rewrites the copy's config.json after edit(text_config). */
function editConfig(dir: string, edit: (text: Record<string, unknown>) => void): void {
  const file = path.join(dir, 'config.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8'));
  edit(config.text_config);
  rewrite(file, JSON.stringify(config));
}

for (const c of cases) {
  test(`${c.name} is refused with a clear error, plain and under AddressSanitizer`, () => {
    const dir = linkCopy(ensureFixture({ gate: 'lowerbound' }));
    try {
      const extra = c.breakIt(dir) ?? ['--ids', '1,2,3'];
      for (const [build, bin] of Object.entries(k3Binaries)) {
        const r = spawnSync(bin, [dir, ...extra, '--gen', '2'], { encoding: 'utf8' });
        assert.equal(r.signal, null, `${build}: killed by ${r.signal}\n${r.stderr}`);
        assert.equal(r.status, 1, `${build}: exit ${r.status}\n${r.stderr}`);
        assert.doesNotMatch(r.stderr, /AddressSanitizer|runtime error|LeakSanitizer/, `${build}: ${r.stderr}`);
        for (const re of c.expect) assert.match(r.stderr, re, `${build}: ${r.stderr}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('a config written without keys whose defaults fit the checkpoint runs, with the same tokens as the full config', () => {
  // moe_layer_freq (1), moe_renormalize (true), routed_scaling_factor (1.0), num_expert_group
  // and topk_group (1): KimiLinearConfig defaults them; k3 once refused "is missing".
  const full = ensureFixture({ gate: 'lowerbound' });
  const dir = linkCopy(full);
  try {
    editConfig(dir, (t) => {
      for (const key of ['moe_layer_freq', 'moe_renormalize', 'routed_scaling_factor', 'num_expert_group', 'topk_group', 'moe_router_activation_func']) delete t[key];
    });
    const args = ['--ids', '1512,12,19,4', '--gen', '6'];
    const want = spawnSync(k3Binaries.plain, [full, ...args], { encoding: 'utf8' });
    for (const [build, bin] of Object.entries(k3Binaries)) {
      const r = spawnSync(bin, [dir, ...args], { encoding: 'utf8' });
      assert.equal(r.status, 0, `${build}: ${r.stderr}`);
      assert.equal(/^generated: .*$/m.exec(r.stdout)?.[0], /^generated: .*$/m.exec(want.stdout)?.[0], build);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
