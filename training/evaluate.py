"""evaluate.py - held-out metrics of an exported model, computed by the project's engine
(native/build/k3), not by torch, on the held-out split of corpus.py:
  - next-token accuracy and perplexity: teacher-forced passes over the first WINDOW tokens
    of each held-out file (`k3 --tf-check --dump-logits`);
  - single-line exact match: each file cut at random line starts, the line completed
    greedily from the code before it, compared with the real line;
  - speculative decoding: the same files cut at a line, `--spec 8` against serial decode with
    the rest of the file as drafting material: acceptance and end-to-end speedup.
Writes metrics.json and examples.md into the model directory.

    /usr/bin/python3 training/evaluate.py media/models/k3-mini
"""
import argparse
import base64
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "native", "build", "k3")
WINDOW = 512
LINE_CONTEXT_CHARS = 1500
LINE_GEN = 40
SPEC_GEN = 64
SPEC_N = 8


def k3(*args):
    r = subprocess.run([K3, *map(str, args)], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"k3 {' '.join(map(str, args))[:200]} failed:\n{r.stderr[-2000:]}")
    return r.stdout + r.stderr


class Vocab:
    def __init__(self, model):
        self.bytes = {}
        with open(os.path.join(model, "tiktoken.model")) as f:
            for line in f:
                b64, rank = line.split()
                self.bytes[int(rank)] = base64.b64decode(b64)
        self.model = model

    def encode(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            return json.loads(k3("tokenize", "--tok", self.model, "--prompt-file", f.name, "--no-special")
                              .strip().splitlines()[-1])
        finally:
            os.unlink(f.name)

    def decode(self, ids):
        return b"".join(self.bytes.get(i, b"") for i in ids).decode("utf-8", "replace")


def generate(model, ids, n, extra=()):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        text = k3(model, "--ids", ",".join(map(str, ids)), "--gen", n, "--out", out, *extra)
        with open(out) as f:
            return json.load(f), text


def teacher_forced(model, vocab, files):
    import torch

    nll, correct, count = 0.0, 0, 0
    for entry in files:
        ids = vocab.encode(corpus.read_text(entry))[:WINDOW]
        if len(ids) < 16:
            continue
        with tempfile.TemporaryDirectory() as d:
            dump = os.path.join(d, "logits.f32")
            k3(model, "--ids", ",".join(map(str, ids)), "--tf-check", "--dump-logits", dump)
            with open(dump, "rb") as f:
                logits = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).view(len(ids), -1).double()
        target = torch.tensor(ids[1:])
        logp = torch.log_softmax(logits[:-1], -1)
        nll += -logp.gather(1, target.unsqueeze(1)).sum().item()
        correct += (logits[:-1].argmax(-1) == target).sum().item()
        count += len(ids) - 1
    return {"files": len(files), "window": WINDOW, "positions": count, "next_token_accuracy": correct / count,
            "perplexity": math.exp(nll / count), "mean_nll_nats": nll / count}


def line_cuts(text, rng, per_file):
    """Offsets of line starts that have context before them and a non-blank line after."""
    starts = [m.end() for m in re.finditer("\n", text)]
    good = [s for s in starts if s >= 200 and text[s:].split("\n", 1)[0].strip() and "\n" in text[s:]]
    rng.shuffle(good)
    return sorted(good[:per_file])


def line_completion(model, vocab, files, rng, per_file):
    results = []
    for entry in files:
        text = corpus.read_text(entry)
        for cut in line_cuts(text, rng, per_file):
            truth = text[cut:].split("\n", 1)[0]
            prompt = vocab.encode(text[max(0, cut - LINE_CONTEXT_CHARS) : cut])
            out, _ = generate(model, prompt, LINE_GEN, ("--incremental",))
            got = vocab.decode(out["generated_ids"]).split("\n", 1)[0]
            results.append({"file": entry["name"], "prefix": text[max(0, cut - 160) : cut], "truth": truth,
                            "completion": got, "exact": got.rstrip() == truth.rstrip()})
    exact = sum(r["exact"] for r in results)
    return {"lines": len(results), "exact_match": exact / max(1, len(results))}, results


def spec_stats(text):
    m = re.search(r"spec: (\d+) rounds, (\d+) drafted, (\d+) accepted .*?, ([\d.]+) tokens per forward pass", text)
    return {"drafted": int(m.group(2)), "accepted": int(m.group(3)), "tokens_per_pass": float(m.group(4))}


def speculative(model, vocab, files):
    rows = []
    for entry in files:
        text = corpus.read_text(entry)
        starts = [m.end() for m in re.finditer("\n", text)]
        cut = next((s for s in starts if s >= 0.4 * len(text)), None)
        if cut is None or len(text) < 3000:
            continue
        prompt = vocab.encode(text[max(0, cut - LINE_CONTEXT_CHARS) : cut])
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(text[cut:])
        try:
            timing = {}
            for mode, extra in (("serial", ("--incremental",)), ("spec", ("--spec", SPEC_N, "--context-file", f.name))):
                best = None
                for _ in range(3):  # best of three: other work only slows a run
                    out, log = generate(model, prompt, SPEC_GEN, extra)
                    if best is None or out["seconds_per_token"] < best[0]["seconds_per_token"]:
                        best = (out, log)
                timing[mode] = best
        finally:
            os.unlink(f.name)
        same = timing["serial"][0]["generated_ids"] == timing["spec"][0]["generated_ids"]
        stats = spec_stats(timing["spec"][1])
        rows.append({"file": entry["name"], "serial_s_per_token": timing["serial"][0]["seconds_per_token"],
                     "spec_s_per_token": timing["spec"][0]["seconds_per_token"], "identical_output": same, **stats})
    drafted = sum(r["drafted"] for r in rows)
    accepted = sum(r["accepted"] for r in rows)
    serial = sum(r["serial_s_per_token"] for r in rows)
    spec = sum(r["spec_s_per_token"] for r in rows)
    return {"files": len(rows), "spec": SPEC_N, "generated_per_file": SPEC_GEN, "drafted": drafted,
            "accepted": accepted, "acceptance": accepted / max(1, drafted), "speedup": serial / spec,
            "all_identical": all(r["identical_output"] for r in rows), "rows": rows}


def main():
    parser = argparse.ArgumentParser(description="held-out metrics of an exported model, by the engine")
    parser.add_argument("model")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--files", type=int, default=40, help="held-out files per metric")
    parser.add_argument("--lines-per-file", type=int, default=5)
    args = parser.parse_args()
    held_out = [f for f in corpus.collect(ROOT) if f["split"] == "held_out"]
    rng = random.Random(args.seed)
    rng.shuffle(held_out)
    files = held_out[: args.files]
    vocab = Vocab(args.model)
    metrics = {"held_out_files_available": len(held_out), "seed": args.seed}
    metrics["teacher_forced"] = teacher_forced(args.model, vocab, files)
    print(json.dumps(metrics["teacher_forced"]), flush=True)
    metrics["line_completion"], examples = line_completion(args.model, vocab, files, rng, args.lines_per_file)
    print(json.dumps(metrics["line_completion"]), flush=True)
    metrics["speculative"] = speculative(args.model, vocab, files)
    print(json.dumps({k: v for k, v in metrics["speculative"].items() if k != "rows"}), flush=True)
    with open(os.path.join(args.model, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.model, "examples.md"), "w") as f:
        f.write("# Single-line completions of held-out code by the engine (greedy)\n\n"
                "Each: the end of the prefix the model saw, the real line, the model's line.\n\n")
        for r in examples[:: max(1, len(examples) // 24)][:24]:
            mark = "exact" if r["exact"] else "differs"
            f.write(f"## {r['file']} ({mark})\n\n```\n{r['prefix'][-160:]}\n```\n\n"
                    f"- real:  `{r['truth']}`\n- model: `{r['completion']}`\n\n")


if __name__ == "__main__":
    main()
