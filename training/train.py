"""train.py - trains the embedded default model (media/models/k3-mini) from the corpus of
corpus.py: a BPE vocabulary with fill-in-the-middle specials learned on it, the K3
architecture of k3_torch.py, batches of plain and FIM examples (data.py, fim.py). One run
lives in one folder (--run): the prepared data, the tokenizer, checkpoints every
CHECKPOINT_MINUTES and a progress file. Running the same command again resumes from the last
checkpoint (model, optimizer, step, loss history; batches are a function of seed and step),
so an interrupted run ends where an uninterrupted one would, on the same torch and thread
count. At the end the model is exported into <run>/export; --export exports the latest
checkpoint anywhere (media/models/k3-mini when the run is done).

    nice -n 5 /usr/bin/python3 training/train.py --size v2 --run training/.runs/v2 --threads 1
    /usr/bin/python3 training/train.py --run training/.runs/v2 --export media/models/k3-mini

Needs Debian's python3-torch and python3-regex, `npm run build` (the engine tokenizes the
corpus, so training sees the ids the engine will) and `training/corpus.py --fetch`.
"""
import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpe  # noqa: E402
import configs  # noqa: E402
import corpus  # noqa: E402
import data  # noqa: E402
import export  # noqa: E402
import fim  # noqa: E402
from encoder import Encoder  # noqa: E402
from k3_torch import K3ForCausalLM, TextConfig, init_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "native", "build", "k3")
RELEASED_TOKENIZER_CONFIG = os.path.join(ROOT, "test", "data", "kimi-tokenizer", "tokenizer_config.json")
FIM_SLOTS = {10: fim.FIM_NAMES[0], 11: fim.FIM_NAMES[1], 12: fim.FIM_NAMES[2]}  # reserved slots 10..12
QAT_FRACTION = 0.2  # the last fifth of the steps sees MXFP4-rounded experts
DECAY_FRACTION = 0.25  # warmup-stable-decay: the learning rate falls over the last quarter
BIAS_RATE = 1e-3  # noaux_tc: the selection bias moves this much per step toward balanced load
CHECKPOINT_MINUTES = 8
BPE_SAMPLE_MB = 40  # text the vocabulary is learned on, split between groups by data.WEIGHTS
LOG_EVERY = 25


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


# ---------------------------------------------------------------- data

def engine_ids(tok_dir, text):
    """The engine's ids of text (`k3 tokenize --no-special`, the last line is a JSON array)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        r = subprocess.run([K3, "tokenize", "--tok", tok_dir, "--prompt-file", f.name, "--no-special"],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(f.name)


def bpe_sample(train_files):
    """Texts for learning the vocabulary: each group's files in hash order up to its share."""
    budget = {g: BPE_SAMPLE_MB * 1e6 * w for g, w in data.WEIGHTS.items()}
    for f in sorted(train_files, key=lambda f: hashlib.sha1(f["name"].encode()).hexdigest()):
        g = data.GROUPS[f["language"]]
        if budget[g] > 0:
            budget[g] -= f["bytes"]
            yield data.read_doc(f["path"])


def prepare(run, ranks, every=1):
    """The run's tokenizer and token streams, made once (tokenizing the corpus through the
    engine takes minutes) and read back on resume."""
    out = os.path.join(run, "data")
    ready = os.path.join(out, "ready.json")
    tok = os.path.join(run, "tokenizer")
    if os.path.exists(ready):
        with open(ready) as f:
            meta = json.load(f)
        streams = {g: np.load(os.path.join(out, f"stream-{g.replace('/', '_')}.npy")) for g in meta["files"]}
        return meta, streams, Encoder(tok)
    os.makedirs(out, exist_ok=True)
    os.makedirs(tok, exist_ok=True)
    files, dropped = corpus.collect()
    train_files = [f for f in files if f["split"] == "train"][::every]
    held_out = [f for f in files if f["split"] == "held_out"]
    log(f"corpus: {len(files)} files, {sum(f['bytes'] for f in files) / 1e6:.1f} MB; {len(held_out)} held out "
        f"in {len(corpus.sources.HELD_OUT)} packages; training on {len(train_files)} files")
    vocab = bpe.learn(bpe_sample(train_files), ranks)
    n_ranks = bpe.write_tokenizer(tok, vocab, RELEASED_TOKENIZER_CONFIG, FIM_SLOTS)
    enc = Encoder(tok)
    eos = enc.special[fim.EOS_NAME]
    log(f"tokenizer: {n_ranks} ranks + 256 special slots (FIM at {[enc.special[n] for n in fim.FIM_NAMES]})")

    def one(f):
        text = corpus.header(f["language"], f["name"]) + data.read_doc(f["path"])
        ids = engine_ids(tok, text)
        return ids, ids == enc.encode(text)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, train_files))
    differ = [f["path"] for f, (_, same) in zip(train_files, results) if not same]
    if differ:
        raise SystemExit(f"train.py: encoder.py and the engine disagree on {len(differ)} files, e.g. {differ[:3]}")
    groups, streams = {}, {}
    for f, (ids, _) in zip(train_files, results):
        g = data.GROUPS[f["language"]]
        chunk = streams.setdefault(g, [])
        groups.setdefault(g, []).append({"path": f["path"], "header": corpus.header(f["language"], f["name"]),
                                         "offset": sum(len(c) for c in chunk), "tokens": len(ids) + 1,
                                         "source": f["source"], "licence": f["licence"], "bytes": f["bytes"]})
        chunk.append(np.array(ids + [eos], dtype=np.uint16))
    arrays = {g: np.concatenate(c) for g, c in streams.items()}
    for g, a in arrays.items():
        np.save(os.path.join(out, f"stream-{g.replace('/', '_')}.npy"), a)
    meta = {"files": groups, "n_ranks": n_ranks, "held_out_dropped_as_v1_copies": dropped,
            "corpus": [dict(f, path=os.path.relpath(f["path"], ROOT)) for f in files]}
    with open(ready, "w") as f:
        json.dump(meta, f)
    log("train streams: " + ", ".join(f"{g} {len(a) / 1e6:.2f}M" for g, a in arrays.items()) + " tokens; "
        f"encoder.py matched the engine on all {len(train_files)} files")
    return meta, arrays, enc


# ---------------------------------------------------------------- model and steps

class CrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of logits [n, vocab] against targets [n], the same value as
    F.cross_entropy with a backward that reuses the forward's exponentials: Debian's torch
    took 1.2 s of a 9 s step in log_softmax's backward at vocab 12544 (4096 positions)."""

    @staticmethod
    def forward(ctx, logits, targets):
        top = logits.max(-1, keepdim=True).values
        e = torch.exp(logits - top)
        total = e.sum(-1, keepdim=True)
        loss = (torch.log(total) + top).squeeze(-1) - logits.gather(1, targets.unsqueeze(1)).squeeze(1)
        ctx.save_for_backward(e, total, targets)
        return loss.mean()

    @staticmethod
    def backward(ctx, grad):
        e, total, targets = ctx.saved_tensors
        g = e.div_(total)
        g[torch.arange(len(targets)), targets] -= 1
        return g.mul_(grad / len(targets)), None


def text_config(size, n_ranks):
    return configs.text_config(size, n_ranks + 256, bos=n_ranks, eos=n_ranks + 2, pad=n_ranks + 255)


def build(size, n_ranks, seed):
    """The model of a size at its initialisation, its AdamW optimizer, and its TextConfig."""
    cfg = TextConfig(text_config(size, n_ranks))
    model = K3ForCausalLM(cfg)
    init_weights(model, seed)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=size["lr"], betas=(0.9, 0.95))
    return model, opt, cfg


def step(model, opt, cfg, window, lr, qat):
    """One training step on window [batch, seq + 1] (inputs and shifted targets); the loss."""
    for moe in model.moe_layers():
        moe.fake_quant = qat
    for group in opt.param_groups:
        group["lr"] = lr
    logits = model(window[:, :-1])
    loss = CrossEntropy.apply(logits.reshape(-1, cfg.vocab).float(), window[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    with torch.no_grad():
        for moe in model.moe_layers():
            load = moe.last_load
            moe.gate.e_score_correction_bias += BIAS_RATE * torch.sign(load.mean() - load)
    return loss.item()


def phase(step_index, size):
    """(sequence length, batch) of a step: short sequences first, long ones from long_from on
    (sizes without long_seq_len train at one length). Tokens per step stay the same."""
    if "long_seq_len" in size and step_index >= int(size["steps"] * size["long_from"]):
        return size["long_seq_len"], size["long_batch"]
    return size["seq_len"], size["batch"]


def tokens_per_step(size):
    return size["seq_len"] * size["batch"]


def lr_at(step_index, size):
    """Warmup, a stable peak, then a cosine fall to a tenth over the last DECAY_FRACTION."""
    warm, total, peak = size["warmup"], size["steps"], size["lr"]
    if step_index < warm:
        return peak * (step_index + 1) / warm
    decay_start = int(total * (1 - DECAY_FRACTION))
    if step_index < decay_start:
        return peak
    progress = (step_index - decay_start) / max(1, total - decay_start)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# ---------------------------------------------------------------- checkpoints

def checkpoint_path(run):
    return os.path.join(run, "checkpoint.pt")


def save_checkpoint(run, state):
    """Writes atomically (a temporary file renamed over the last one), keeping the one before."""
    path = checkpoint_path(run)
    tmp = path + ".tmp"
    torch.save(state, tmp)
    if os.path.exists(path):
        os.replace(path, path.replace(".pt", ".prev.pt"))
    os.replace(tmp, path)


def write_progress(run, state, size, tok_s):
    done = state["step"]
    left = (size["steps"] - done) * tokens_per_step(size) / max(tok_s, 1e-9)
    with open(os.path.join(run, "progress.json"), "w") as f:
        json.dump({"step": done, "steps": size["steps"], "train_seconds": round(state["seconds"]),
                   "tokens_seen": done * tokens_per_step(size), "recent_tok_s": round(tok_s),
                   "eta_hours": round(left / 3600, 2), "loss_recent": state["history"][-LOG_EVERY:],
                   "load": os.getloadavg()[0], "time": time.strftime("%Y-%m-%d %H:%M:%S")}, f)


def train(args, size, meta, streams, enc):
    model, opt, cfg = build(size, meta["n_ranks"], args.seed)
    state = {"step": 0, "seconds": 0.0, "history": [], "fim_tokens": 0}
    if os.path.exists(checkpoint_path(args.run)):
        saved = torch.load(checkpoint_path(args.run))
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        state = saved["state"]
        log(f"resumed at step {state['step']} ({state['seconds'] / 60:.1f} min trained)")
    batches = data.Batches(streams, meta["files"], enc, args.seed)
    params = sum(p.numel() for p in model.parameters())
    log(f"model: {params / 1e6:.2f}M parameters; {size['steps']} steps of {tokens_per_step(size)} tokens "
        f"({size['batch']} x {size['seq_len']}" + (f", from step {int(size['steps'] * size['long_from'])} "
        f"{size['long_batch']} x {size['long_seq_len']}" if "long_seq_len" in size else "") +
        f"); {torch.get_num_threads()} torch thread(s)")
    last_save = time.time()
    window_start, window_tokens = time.time(), 0
    tok_s = 0.0
    while state["step"] < size["steps"]:
        i = state["step"]
        t0 = time.time()
        seq, rows = phase(i, size)
        window = batches.batch(i, rows, seq)
        state["fim_tokens"] += batches.fim_tokens
        batches.fim_tokens = 0
        qat = i >= int(size["steps"] * (1 - QAT_FRACTION))
        state["history"].append(step(model, opt, cfg, window, lr_at(i, size), qat))
        state["seconds"] += time.time() - t0
        state["step"] = i + 1
        window_tokens += tokens_per_step(size)
        if state["step"] % LOG_EVERY == 0 or state["step"] == size["steps"]:
            tok_s = window_tokens / (time.time() - window_start)
            window_start, window_tokens = time.time(), 0
            recent = state["history"][-LOG_EVERY:]
            log(f"step {state['step']}/{size['steps']} loss {sum(recent) / len(recent):.3f} lr {lr_at(i, size):.2e}"
                f"{' qat' if qat else ''} {tok_s:.0f} tok/s, {state['seconds'] / 60:.1f} min, load "
                f"{os.getloadavg()[0]:.1f}")
            write_progress(args.run, state, size, tok_s)
        stop = state["step"] == args.stop_after
        if time.time() - last_save > CHECKPOINT_MINUTES * 60 or state["step"] == size["steps"] or stop:
            save_checkpoint(args.run, {"model": model.state_dict(), "optimizer": opt.state_dict(), "state": state,
                                       "size": size, "seed": args.seed, "threads": torch.get_num_threads()})
            last_save = time.time()
            log(f"checkpoint at step {state['step']}")
        if stop:
            return False
    return True


# ---------------------------------------------------------------- export

def export_run(run, out):
    """Writes the run's latest checkpoint in the released layout with its tokenizer and
    training.json (the record model_card.py reads)."""
    saved = torch.load(checkpoint_path(run))
    size, state = saved["size"], saved["state"]
    with open(os.path.join(run, "data", "ready.json")) as f:
        meta = json.load(f)
    model, _, _ = build(size, meta["n_ranks"], saved["seed"])
    model.load_state_dict(saved["model"])
    config = configs.checkpoint_config(text_config(size, meta["n_ranks"]))
    config["k3_code"] = {"chat": False}  # a code model: the server offers completions, not chat
    export.write_checkpoint(out, model, config)
    for name in ("tiktoken.model", "tokenizer_config.json"):
        shutil.copy(os.path.join(run, "tokenizer", name), os.path.join(out, name))
    with open(os.path.join(run, "command.json")) as f:
        command = json.load(f)
    streams = {g: sum(x["tokens"] for x in fs) for g, fs in meta["files"].items()}
    tokens = {os.path.relpath(x["path"], ROOT): x["tokens"] for fs in meta["files"].values() for x in fs}
    seen = state["step"] * tokens_per_step(size)
    record = {
        "command": command["command"], "resumes": command["starts"] - 1, "size": command["size"],
        "seed": saved["seed"], "steps": size["steps"], "steps_done": state["step"], "hyperparameters": size,
        "device": "cpu", "threads": saved["threads"],
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__, "train_seconds": round(state["seconds"], 1), "train_tokens_seen": seen,
        "fim_tokens_seen": state["fim_tokens"], "fim_rate": data.FIM_RATE, "group_weights": data.WEIGHTS,
        "qat_fraction": QAT_FRACTION, "decay_fraction": DECAY_FRACTION,
        "corpus_train_tokens": sum(streams.values()), "train_tokens_by_group": streams,
        "corpus_sources": corpus.source_rows(meta["corpus"], tokens),
        "held_out_dropped_as_v1_copies": meta["held_out_dropped_as_v1_copies"],
        "loss_every_25_steps": [round(sum(state["history"][i:i + 25]) / len(state["history"][i:i + 25]), 4)
                                for i in range(0, len(state["history"]), 25)],
    }
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    log(f"exported step {state['step']}/{size['steps']} to {out}")


def retime(run, old, new):
    """Allows a new step count on resume only while the run has not reached a step whose
    schedule depends on it (the longer sequences, the learning-rate decay, QAT) under either
    count, so the result is the run that count would have given from the start."""
    done = torch.load(checkpoint_path(run))["state"]["step"] if os.path.exists(checkpoint_path(run)) else 0
    firsts = []
    for s in (old, new):
        firsts.append(int(s["steps"] * (1 - DECAY_FRACTION)))
        firsts.append(int(s["steps"] * (1 - QAT_FRACTION)))
        if "long_from" in s:
            firsts.append(int(s["steps"] * s["long_from"]))
    if done >= min(firsts):
        sys.exit(f"train.py: {run} is at step {done}; its schedule already depends on the step count "
                 f"{old['steps']} (step {min(firsts)} on), so it cannot change to {new['steps']}")
    log(f"step count {old['steps']} -> {new['steps']} at step {done}")


def claim(run):
    """Refuses to start while another process trains in the same run (two writers would
    overwrite each other's checkpoints); run/train.pid names the one that does."""
    lock = os.path.join(run, "train.pid")
    if os.path.exists(lock):
        with open(lock) as f:
            pid = int(f.read().strip() or 0)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                alive = b"train.py" in f.read()
        except OSError:
            alive = False
        if alive and pid != os.getpid():
            sys.exit(f"train.py: process {pid} is training in {run} (see {lock}); let it finish or stop it first")
    with open(lock, "w") as f:
        f.write(f"{os.getpid()}\n")


def main():
    parser = argparse.ArgumentParser(description="train the embedded default K3 model")
    parser.add_argument("--size", choices=sorted(configs.SIZES), default="v2")
    parser.add_argument("--run", default=os.path.join(ROOT, "training", ".runs", "v2"),
                        help="the run's folder: data, tokenizer, checkpoints, progress")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, help="override the size's step count (a new run only)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--export", metavar="DIR", help="export the run's latest checkpoint to DIR and stop")
    parser.add_argument("--prepare-only", action="store_true", help="make the run's tokenizer and token "
                        "streams, and stop")
    parser.add_argument("--stop-after", type=int, help="checkpoint after this step and stop (the same command "
                        "without it resumes)")
    parser.add_argument("--every", type=int, default=1, help="train on every n-th corpus file only (for "
                        "testing the pipeline quickly)")
    args = parser.parse_args()
    if args.export:
        export_run(args.run, args.export)
        return
    if not os.path.exists(K3):
        sys.exit(f"train.py: {K3} is missing: run `npm run build` first")
    torch.set_num_threads(args.threads)
    os.makedirs(args.run, exist_ok=True)
    size = dict(configs.SIZES[args.size])
    if args.prepare_only:
        prepare(args.run, size["ranks"], args.every)
        return
    if args.steps:
        size["steps"] = args.steps
    claim(args.run)
    command_file = os.path.join(args.run, "command.json")
    if os.path.exists(command_file):
        with open(command_file) as f:
            command = json.load(f)
        old = command["hyperparameters"]
        if (command["size"], command["seed"], command["every"], dict(old, steps=0)) != \
                (args.size, args.seed, args.every, dict(size, steps=0)):
            sys.exit(f"train.py: {args.run} holds a run of --size {command['size']} --seed {command['seed']} "
                     f"--every {command['every']}; resume it with the same options, or use another --run")
        if not args.steps:
            size["steps"] = old["steps"]
        elif size["steps"] != old["steps"]:
            retime(args.run, old, size)
            command["steps_changed"] = command.get("steps_changed", []) + [[old["steps"], size["steps"]]]
        command["hyperparameters"] = size
        command["starts"] += 1
    else:
        argv = " ".join(sys.argv[1:])
        if args.stop_after is not None:
            argv = argv.replace(f"--stop-after {args.stop_after}", "").replace("  ", " ").strip()
        command = {"command": "nice -n 5 /usr/bin/python3 training/train.py " + argv,
                   "size": args.size, "seed": args.seed, "every": args.every, "hyperparameters": size, "starts": 1}
    with open(command_file, "w") as f:
        json.dump(command, f, indent=1)
    meta, streams, enc = prepare(args.run, size["ranks"], args.every)
    if train(args, size, meta, streams, enc):
        export_run(args.run, os.path.join(args.run, "export"))


if __name__ == "__main__":
    main()
