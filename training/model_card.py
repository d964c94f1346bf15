"""model_card.py - writes MODEL_CARD.md of an exported model from what the run recorded, so the
card never disagrees with the files beside it: config.json (shapes), training.json (command,
time, hardware, loss), metrics.json and examples.md (evaluate.py, computed by the engine),
and the corpus as corpus.py selects it (sources and licences).

    /usr/bin/python3 training/model_card.py media/models/k3-mini
"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus  # noqa: E402
from k3_torch import K3ForCausalLM, TextConfig  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(model, name):
    with open(os.path.join(model, name)) as f:
        return json.load(f) if name.endswith(".json") else f.read()


def parameter_counts(tc):
    """Total parameters, and those one token runs through (top-k of the routed experts)."""
    cfg = TextConfig(tc)
    model = K3ForCausalLM(cfg)
    total = sum(p.numel() for p in model.parameters())
    per_expert = sum(p.numel() for p in model.moe_layers()[0].experts[0].parameters())
    idle = len(model.moe_layers()) * per_expert * (cfg.experts - cfg.top_k)
    return total, total - idle


def shapes(tc):
    la = tc["linear_attn_config"]
    mla = la["full_attn_layers"]
    return [
        ("layers", f"{tc['num_hidden_layers']}: KDA at {la['kda_layers']}, gated NoPE MLA at {mla} (1-based)"),
        ("hidden size", tc["hidden_size"]),
        ("vocabulary", f"{tc['vocab_size']} ({tc['vocab_size'] - 256} BPE ranks + 256 K3 special slots)"),
        ("KDA", f"{la['num_heads']} heads x {la['head_dim']}, conv {la['short_conv_kernel_size']} taps, "
                f"gate lower bound {la['gate_lower_bound']}, full-rank output gate"),
        ("MLA", f"{tc['num_attention_heads']} heads, q rank {tc['q_lora_rank']}, kv rank {tc['kv_lora_rank']}, "
                f"qk {tc['qk_nope_head_dim']}+{tc['qk_rope_head_dim']} (no RoPE), v {tc['v_head_dim']}, output gate"),
        ("layer 0", f"dense SiTU-GLU, width {tc['intermediate_size']}"),
        ("MoE (layers 2..)", f"{tc['num_experts']} routed experts, top {tc['num_experts_per_token']}, width "
                            f"{tc['moe_intermediate_size']} in a {tc['routed_expert_hidden_size']}-wide latent, "
                            f"MXFP4; {tc['num_shared_experts']} shared expert; sigmoid router with selection bias"),
        ("attention residuals", f"blocks of {tc['attn_res_block_size']} layers"),
    ]


def corpus_tables():
    files = corpus.collect(ROOT)
    by_source = collections.defaultdict(lambda: [0, 0, 0, 0])
    by_licence = collections.defaultdict(lambda: [0, 0, set()])
    for f in files:
        src = "Python 3.11 standard library (Debian python3.11)" if f["source"].startswith("python") \
            else "node_modules after `npm ci` (package-lock.json)"
        row = by_source[src]
        row[0 if f["split"] == "train" else 2] += 1
        row[1 if f["split"] == "train" else 3] += f["bytes"]
        lic = by_licence[f["licence"]]
        lic[0] += 1
        lic[1] += f["bytes"]
        lic[2].add(f["source"])
    return files, by_source, by_licence


def main():
    model = sys.argv[1]
    config, training, metrics = (load(model, n) for n in ("config.json", "training.json", "metrics.json"))
    examples = load(model, "examples.md").split("\n", 3)[3]
    tc = config["text_config"]
    total, active = parameter_counts(tc)
    files = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    weight_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in files)
    all_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))
    corpus_files, by_source, by_licence = corpus_tables()
    tf, lines, spec = metrics["teacher_forced"], metrics["line_completion"], metrics["speculative"]
    hp = training["hyperparameters"]
    losses = training["loss_every_25_steps"]
    out = [
        "# k3-mini: model card",
        "",
        "The embedded default model of k3-code: a small code model with Kimi K3's exact architecture, trained "
        "from scratch by this project, in K3's released checkpoint layout. The extension runs it when "
        "`k3.modelPath` is empty. It is a demo-scale model, not K3: it completes code in the languages of its "
        "corpus, has never seen a conversation (chat replies are noise), and knows nothing beyond its corpus.",
        "",
        "This card is written by `training/model_card.py` from the files beside it: `config.json`, "
        "`training.json` (the run), `metrics.json` and `examples.md` (held-out evaluation by the engine).",
        "",
        "## Shapes",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in shapes(tc)],
        f"| parameters | {total / 1e6:.2f} M in all, {active / 1e6:.2f} M used per token |",
        f"| files | {len(files)} safetensors shards, {weight_bytes / 1e6:.1f} MB of weights "
        f"(BF16 trunk, F32 gate parameters, MXFP4 experts); {all_bytes / 1e6:.1f} MB with tokenizer and records |",
        "",
        "## Corpus",
        "",
        f"{len(corpus_files)} files selected by `training/corpus.py`: permissively licensed sources that every "
        "machine building this project has offline. Minified or generated files (lines over 400 characters), "
        "files over 200 KB and exact duplicates are dropped. 1 file in 40 (by a hash of its path) is held out "
        "for evaluation. The project's own code is not used.",
        "",
        "| source | train files | train MB | held-out files | held-out MB |",
        "|---|---|---|---|---|",
        *[f"| {k} | {v[0]} | {v[1] / 1e6:.1f} | {v[2]} | {v[3] / 1e6:.2f} |" for k, v in sorted(by_source.items())],
        "",
        "| licence | files | MB | packages |",
        "|---|---|---|---|",
        *[f"| {k} | {v[0]} | {v[1] / 1e6:.2f} | {len(v[2])} |"
          for k, v in sorted(by_licence.items(), key=lambda kv: -kv[1][1])],
        "",
        "Packages are kept only if their package.json licence is one of "
        f"{', '.join(sorted(corpus.PERMISSIVE))}. The tokenizer is a byte-level BPE of "
        f"{tc['vocab_size'] - 256} ranks learned on the train split with K3's split pattern (`training/bpe.py`), "
        "in tiktoken form, followed by K3's 256 special-token slots with their released names; the engine's "
        "own tokenizer encodes the corpus for training.",
        "",
        "## Training",
        "",
        f"- command: `{training['command']}`",
        f"- hardware: {training['machine']}, {training['threads']} torch thread(s), device `{training['device']}`; "
        f"torch {training['torch']} (Debian python3-torch with OpenBLAS)",
        f"- time: {training['train_seconds'] / 60:.1f} minutes of training (plus about 2 minutes to select the "
        "corpus, learn the vocabulary and tokenize)",
        f"- {training['steps']} steps of {hp['batch']} x {hp['seq_len']} tokens = "
        f"{training['train_tokens_seen'] / 1e6:.2f} M tokens seen, of {training['corpus_train_tokens'] / 1e6:.2f} M "
        "in the train split",
        f"- AdamW (beta 0.9/0.95, weight decay 0.1 on matrices), peak learning rate {hp['lr']}, {hp['warmup']} "
        "warm-up steps, cosine decay to 10 %, gradient clipping 1.0; router selection bias moved toward balanced "
        "load after each step (K3's aux-loss-free balancing); the last 20 % of steps quantization-aware (experts "
        "seen through MXFP4 rounding, straight-through gradients), so the exported MXFP4 experts are the weights "
        "the model finished training with",
        f"- seed {training['seed']}: every random draw comes from it, so the same command on the same machine, "
        "torch version and thread count should give the same model. Checked for the vocabulary (relearned "
        "byte for byte); the 80-minute training run itself has not been repeated",
        "- training loss (nats per token, mean over 25 steps): "
        + ", ".join(f"step {i * 25}: {losses[i]:.2f}" for i in range(0, len(losses), max(1, len(losses) // 8)))
        + f", last: {losses[-1]:.2f}",
        "",
        "## Held-out metrics (computed by the engine, `training/evaluate.py`)",
        "",
        f"On {tf['files']} held-out files (seed {metrics['seed']}), never seen in training:",
        "",
        "| metric | value |",
        "|---|---|",
        f"| next-token accuracy (greedy, teacher-forced, the first {tf.get('window', 512)} tokens of each file at most, "
        f"{tf['positions']} positions) | {100 * tf['next_token_accuracy']:.1f} % |",
        f"| perplexity (same positions) | {tf['perplexity']:.2f} ({tf['mean_nll_nats']:.3f} nats per token) |",
        f"| single-line exact match ({lines['lines']} lines: files cut at random line starts, the line completed "
        f"greedily from up to 1,500 characters before it) | {100 * lines['exact_match']:.1f} % |",
        f"| speculative decoding, `--spec {spec['spec']}` ({spec['files']} files cut at a line past 40 %, "
        f"{spec['generated_per_file']} tokens each, the rest of the file as drafting material) | "
        f"{spec['accepted']} of {spec['drafted']} drafted tokens accepted ({100 * spec['acceptance']:.1f} %), "
        f"{spec['speedup']:.2f}x end-to-end against serial decode, output identical: {spec['all_identical']} |",
        "",
        "## Sample completions of held-out code",
        "",
        examples.strip(),
        "",
        "## Reproducing it",
        "",
        "```sh",
        "apt-get install -y python3-torch python3-regex libopenblas0-pthread",
        "npm ci && npm run build",
        training["command"],
        f"/usr/bin/python3 training/evaluate.py {os.path.relpath(model, ROOT)}",
        f"/usr/bin/python3 training/model_card.py {os.path.relpath(model, ROOT)}",
        "```",
        "",
    ]
    with open(os.path.join(model, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
