"""model_card.py - writes MODEL_CARD.md of an exported model from what the run recorded, so the
card never disagrees with the files beside it: config.json (shapes), tokenizer_config.json
(fill-in-the-middle tokens), training.json (command, time, hardware, loss, and every corpus
source with its version, licence and size), metrics.json and examples.md (evaluate.py,
computed by the engine, with the baseline model beside it).

    /usr/bin/python3 training/model_card.py media/models/k3-mini
"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fim  # noqa: E402
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


def corpus_section(training):
    rows = training["corpus_sources"]
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "held_out"]
    by_licence = collections.defaultdict(lambda: [0, 0, 0, set()])
    for r in train:
        lic = by_licence[r["licence"]]
        lic[0] += r["files"]
        lic[1] += r["bytes"]
        lic[2] += r["tokens"]
        lic[3].add(r["source"])
    groups = training["train_tokens_by_group"]
    total_tokens = sum(groups.values())
    out = [
        f"{sum(r['files'] for r in train)} training files, {sum(r['bytes'] for r in train) / 1e6:.1f} MB, "
        f"{total_tokens / 1e6:.1f} M tokens (each file with its header line and [EOS]), selected by "
        "`training/corpus.py` from the fixed list of `training/sources.py` (fetched by `corpus.py --fetch`), the "
        "node_modules of `npm ci` and Debian's Python 3.11 standard library. Files over 200 KB, minified or "
        "generated files (a line over 400 characters, a generated-code marker near the top), exact duplicates "
        "(ignoring whitespace) and near duplicates (MinHash of line sets, 70 %) are dropped; a package keeps at "
        "most 6 MB (Go and Rust standard libraries 16 MB). The project's own code is not used.",
        "",
        "Tokens by language group, and the share of training batches drawn from each "
        f"(`training/data.py`): " + ", ".join(
            f"{g} {n / 1e6:.1f} M ({100 * training['group_weights'].get(g, 0):.0f} % of rows)"
            for g, n in sorted(groups.items(), key=lambda kv: -kv[1])) + ".",
        "",
        "| licence | files | MB | M tokens | sources |",
        "|---|---|---|---|---|",
        *[f"| {k} | {v[0]} | {v[1] / 1e6:.2f} | {v[2] / 1e6:.2f} | {len(v[3])} |"
          for k, v in sorted(by_licence.items(), key=lambda kv: -kv[1][1])],
        "",
        "Every source (train split), with the version used and how its licence was checked:",
        "",
        "| source | version | licence (checked against) | files | MB | M tokens |",
        "|---|---|---|---|---|---|",
        *[f"| {r['source']} | {r['version']} | {r['licence']} ({r['licence_checked']}) | {r['files']} | "
          f"{r['bytes'] / 1e6:.2f} | {r['tokens'] / 1e6:.2f} |" for r in train],
        "",
        "Held out for evaluation: whole packages, new in v2, so neither v1 nor v2 trained on them "
        f"(`training/heldout.json`; {training['held_out_dropped_as_v1_copies']} files dropped from it as copies "
        "of v1's corpus):",
        "",
        "| package | version | licence | files | MB |",
        "|---|---|---|---|---|",
        *[f"| {r['source']} | {r['version']} | {r['licence']} | {r['files']} | {r['bytes'] / 1e6:.2f} |" for r in held],
    ]
    return out


def metrics_section(metrics):
    runs = [("this model", metrics["model"])] + ([("baseline", metrics["baseline"])] if "baseline" in metrics else [])
    head = "| metric | " + " | ".join(f"{n} (`{m['model']}`)" for n, m in runs) + " |"
    out = [f"On {metrics['files']} files of the held-out packages ({', '.join(metrics['packages'])}), seed "
           f"{metrics['seed']}; the baseline is the previous k3-mini on the same files and cases.", "",
           head, "|---|" + "---|" * len(runs)]

    def row(name, fn):
        cells = []
        for _, m in runs:
            try:
                cells.append(fn(m))
            except KeyError:
                cells.append("n/a (no FIM tokens)")
        out.append(f"| {name} | " + " | ".join(cells) + " |")

    row(f"next-token accuracy (teacher-forced, the first {metrics['tf_bytes_per_file']} bytes of each file)",
        lambda m: f"{100 * m['teacher_forced']['next_token_accuracy']:.1f} %")
    row("perplexity per token (each model's own tokens)", lambda m: f"{m['teacher_forced']['perplexity']:.2f}")
    row("nats per byte (comparable across tokenizers)", lambda m: f"{m['teacher_forced']['nats_per_byte']:.3f}")
    for layout in ("plain", "fim"):
        for kind in ("after indentation", "mid-line"):
            row(f"single-line exact match, {layout} layout, cursor {kind}",
                lambda m, k=kind, lay=layout: f"{100 * m[f'lines_{lay}'][k]['exact_match']:.1f} % of "
                                              f"{m[f'lines_{lay}'][k]['lines']}")
            row(f"single-line edit similarity, {layout} layout, cursor {kind}",
                lambda m, k=kind, lay=layout: f"{m[f'lines_{lay}'][k]['edit_similarity']:.3f}")
    return out


def main():
    model = sys.argv[1]
    config, training, metrics, tok = (load(model, n) for n in
                                      ("config.json", "training.json", "metrics.json", "tokenizer_config.json"))
    examples = load(model, "examples.md").split("\n", 3)[3]
    tc = config["text_config"]
    total, active = parameter_counts(tc)
    files = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    weight_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in files)
    all_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))
    special = {v["content"]: k for k, v in tok["added_tokens_decoder"].items()}
    hp = training["hyperparameters"]
    losses = training["loss_every_25_steps"]
    long = (f"; from step {int(hp['steps'] * hp['long_from'])} on, {hp['long_batch']} x {hp['long_seq_len']}"
            if "long_seq_len" in hp else "")
    out = [
        "# k3-mini: model card",
        "",
        "The embedded default model of k3-code: a small code model with Kimi K3's exact architecture, trained "
        "from scratch by this project, in K3's released checkpoint layout. The extension runs it when "
        "`k3.modelPath` is empty. It is a demo-scale model, not K3: it completes code in the languages of its "
        "corpus, in the plain layout and filling in the middle, has never seen a conversation (its config.json "
        "says `\"k3_code\": {\"chat\": false}`), and knows nothing beyond its corpus.",
        "",
        "This card is written by `training/model_card.py` from the files beside it: `config.json`, "
        "`tokenizer_config.json`, `training.json` (the run and its corpus), `metrics.json` and `examples.md` "
        "(held-out evaluation by the engine, `training/evaluate.py`).",
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
        "## Fill-in-the-middle",
        "",
        "The tokenizer names " + ", ".join(f"`{n}` ({special[n]})" for n in fim.FIM_NAMES) + " in reserved "
        "special slots, which is how the server knows to use the FIM layout (suffix first, so typing at the "
        "cursor extends a checkpointed prompt):",
        "",
        "```",
        "<|fim_prefix|> <|fim_suffix|> encode(S) <|fim_middle|> encode(P_above) encode(P_line) encode(M) [EOS]",
        "```",
        "",
        f"{100 * training['fim_rate']:.0f} % of training rows start with such an example "
        f"({training['fim_tokens_seen'] / 1e6:.2f} M of the tokens seen); training/README.md gives the exact "
        "rule for each piece.",
        "",
        "## Corpus",
        "",
        *corpus_section(training),
        "",
        "## Training",
        "",
        f"- command: `{training['command']}`" + (f" (resumed {training['resumes']} times with the same command)"
                                                 if training["resumes"] else ""),
        f"- hardware: {training['machine']}, {training['threads']} torch thread(s), device `{training['device']}`; "
        f"torch {training['torch']} (Debian python3-torch with OpenBLAS), on a machine shared with other work",
        f"- time: {training['train_seconds'] / 3600:.2f} hours of training steps (plus the corpus selection, the "
        "vocabulary and tokenizing every file through the engine took 5 minutes on this run)",
        f"- {training['steps_done']} of {training['steps']} steps of {hp['batch'] * hp['seq_len']} tokens "
        f"({hp['batch']} x {hp['seq_len']}{long}) = {training['train_tokens_seen'] / 1e6:.2f} M tokens seen, "
        f"of {training['corpus_train_tokens'] / 1e6:.1f} M in the corpus; "
        f"{training['train_tokens_seen'] / total:.2f} tokens per parameter",
        f"- AdamW (beta 0.9/0.95, weight decay 0.1 on matrices), peak learning rate {hp['lr']}, {hp['warmup']} "
        f"warm-up steps, then constant, then a cosine fall to 10 % over the last "
        f"{100 * training['decay_fraction']:.0f} % (warmup-stable-decay); gradient clipping 1.0; router selection "
        "bias moved toward balanced load after each step (K3's aux-loss-free balancing); the last "
        f"{100 * training['qat_fraction']:.0f} % of steps quantization-aware (experts seen through MXFP4 rounding, "
        "straight-through gradients), so the exported MXFP4 experts are the weights the model finished with",
        f"- seed {training['seed']}: batches are a function of seed and step, and checkpoints hold model, "
        "optimizer and step, so a resumed run gives the bits of an uninterrupted one (checked at test size)",
        "- training loss (nats per token, mean over 25 steps): "
        + ", ".join(f"step {i * 25}: {losses[i]:.2f}" for i in range(0, len(losses), max(1, len(losses) // 8)))
        + f", last: {losses[-1]:.2f}",
        "",
        "## Held-out metrics (computed by the engine, `training/evaluate.py`)",
        "",
        *metrics_section(metrics),
        "",
        "Both layouts heal the prompt as the server does (the cursor line's last pre-token is regenerated under "
        "a byte-prefix constraint). Completion quality through the language server is "
        "`npm run bench -- quality`.",
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
        "/usr/bin/python3 training/corpus.py --fetch",
        training["command"],
        f"/usr/bin/python3 training/train.py --run <run folder> --export {os.path.relpath(model, ROOT)}",
        f"/usr/bin/python3 training/evaluate.py {os.path.relpath(model, ROOT)} --baseline <previous k3-mini>",
        f"/usr/bin/python3 training/model_card.py {os.path.relpath(model, ROOT)}",
        "```",
        "",
    ]
    with open(os.path.join(model, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
