"""train.py - trains the embedded default model (media/models/k3-mini) from nothing but what a
machine that built this project has: the corpus of corpus.py, a BPE vocabulary learned on it,
the K3 architecture of k3_torch.py. Exports the released checkpoint layout (export.py).

    /usr/bin/python3 training/train.py --size cpu --out media/models/k3-mini --seed 1

Needs Debian's python3-torch and python3-regex, and native/build/k3 (npm run build): the
corpus is tokenized by the engine's own tokenizer, so training sees exactly the ids the
engine will. `--size cuda` (and --device cuda) trains the larger configuration on a GPU.
Everything random is drawn from --seed, so the same command on the same machine, torch
version and thread count should give the same model.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpe  # noqa: E402
import configs  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
from k3_torch import K3ForCausalLM, TextConfig, init_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "native", "build", "k3")
RELEASED_TOKENIZER_CONFIG = os.path.join(ROOT, "test", "data", "kimi-tokenizer", "tokenizer_config.json")
QAT_FRACTION = 0.2  # the last fifth of the steps sees MXFP4-rounded experts
BIAS_RATE = 1e-3  # noaux_tc: the selection bias moves this much per step toward balanced load


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def tokenize_files(tok_dir, files):
    """Engine token ids of each file (k3 tokenize prints them as a JSON array, last line)."""
    out = []
    for f in files:
        r = subprocess.run([K3, "tokenize", "--tok", tok_dir, "--prompt-file", f["path"], "--no-special"],
                           capture_output=True, text=True, check=True)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def prepare(args, work):
    files = corpus.collect(ROOT)
    train_files = [f for f in files if f["split"] == "train"]
    log(f"corpus: {len(files)} files, {sum(f['bytes'] for f in files) / 1e6:.1f} MB "
        f"({len(train_files)} train, {len(files) - len(train_files)} held out)")
    size = configs.SIZES[args.size]
    vocab = bpe.learn((corpus.read_text(f) for f in train_files), size["ranks"])
    os.makedirs(args.out, exist_ok=True)
    n_ranks = bpe.write_tokenizer(args.out, vocab, RELEASED_TOKENIZER_CONFIG)
    log(f"tokenizer: {n_ranks} ranks + 256 special slots")
    eos = n_ranks + 1  # [EOS], the document terminator
    stream = []
    for ids in tokenize_files(args.out, train_files):
        stream.extend(ids)
        stream.append(eos)
    log(f"train stream: {len(stream)} tokens")
    with open(os.path.join(work, "corpus.json"), "w") as f:
        json.dump({"files": files, "train_tokens": len(stream)}, f)
    return files, n_ranks, torch.tensor(stream, dtype=torch.int32)


def lr_at(step, size):
    warm, total, peak = size["warmup"], size["steps"], size["lr"]
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + torch.cos(torch.tensor(progress * 3.141592653589793)).item()))


def train(args, n_ranks, stream):
    size = configs.SIZES[args.size]
    text = configs.text_config(args.size, n_ranks + 256, bos=n_ranks, eos=n_ranks + 2, pad=n_ranks + 255)
    cfg = TextConfig(text)
    model = K3ForCausalLM(cfg)
    init_weights(model, args.seed)
    device = torch.device(args.device)
    model.to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=size["lr"], betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed + 1)
    seq, batch, steps = size["seq_len"], size["batch"], size["steps"]
    history, start = [], time.time()
    log(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters; "
        f"{steps} steps x {batch} x {seq} tokens")
    for step in range(steps):
        qat = step >= int(steps * (1 - QAT_FRACTION))
        for moe in model.moe_layers():
            moe.fake_quant = qat
        for group in opt.param_groups:
            group["lr"] = lr_at(step, size)
        starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=gen)
        window = torch.stack([stream[s : s + seq + 1] for s in starts.tolist()]).long().to(device)
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab).float(), window[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for moe in model.moe_layers():
                load = moe.last_load
                moe.gate.e_score_correction_bias += BIAS_RATE * torch.sign(load.mean() - load)
        history.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            elapsed = time.time() - start
            recent = sum(history[-25:]) / len(history[-25:])
            log(f"step {step}/{steps} loss {recent:.3f} lr {lr_at(step, size):.2e}{' qat' if qat else ''} "
                f"{(step + 1) * batch * seq / elapsed:.0f} tok/s, {elapsed / 60:.1f} min")
    return model, text, history, time.time() - start


def main():
    parser = argparse.ArgumentParser(description="train the embedded default K3 model")
    parser.add_argument("--size", choices=sorted(configs.SIZES), default="cpu")
    parser.add_argument("--out", default=os.path.join(ROOT, "media", "models", "k3-mini"))
    parser.add_argument("--work", default=os.path.join(ROOT, "out", "training"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, help="override the size's step count")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.steps:
        configs.SIZES[args.size]["steps"] = args.steps
    if not os.path.exists(K3):
        sys.exit(f"train.py: {K3} is missing: run `npm run build` first")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    files, n_ranks, stream = prepare(args, args.work)
    model, text, history, seconds = train(args, n_ranks, stream)
    export.write_checkpoint(args.out, model.cpu(), configs.checkpoint_config(text))
    size = configs.SIZES[args.size]
    record = {
        "command": "/usr/bin/python3 training/train.py " + " ".join(sys.argv[1:]),
        "size": args.size, "seed": args.seed, "steps": size["steps"],
        "hyperparameters": size, "device": args.device, "threads": args.threads,
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__, "train_seconds": round(seconds, 1), "train_tokens_seen": size["steps"] * size["batch"] * size["seq_len"],
        "corpus_files": len(files), "corpus_train_tokens": len(stream),
        "loss_every_25_steps": [round(sum(history[i:i + 25]) / len(history[i:i + 25]), 4)
                                for i in range(0, len(history), 25)],
    }
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    log(f"exported to {args.out} after {seconds / 60:.1f} min of training")


if __name__ == "__main__":
    main()
