"""evaluate.py - held-out metrics of exported models, computed by the project's engine
(native/build/k3), not by torch, on the held-out packages of training/heldout.json (whole
packages neither v1 nor v2 trained on), with a baseline model beside the model:
  - teacher-forced: next-token accuracy, perplexity and nats per byte over the first
    TF_BYTES bytes of each file (header line included, as the server sends it); nats per
    byte compare models whose tokenizers differ, per-token figures do not;
  - single-line completion, greedy: each file cut after a line's indentation and inside a
    line, the rest of the line completed and compared with the real one (exact match and
    edit similarity), in the plain layout (header and the file above the cursor) and, for a
    model whose tokenizer names the fill-in-the-middle tokens, in the FIM layout (fim.py)
    with the text after the line as suffix. Both heal the prompt as the server does: the
    cursor line's last pre-token is removed and regenerated under a byte-prefix constraint
    (emulated here one constrained step per process, from the engine's logits).
Writes metrics.json and examples.md into the model directory. Line metrics through the
language server (what the editor shows) are `npm run bench -- quality`.

    /usr/bin/python3 training/evaluate.py media/models/k3-mini --baseline V1_DIR

where V1_DIR holds the model shipped before (`git archive bb31221^ media/models/k3-mini`).
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus  # noqa: E402
import data  # noqa: E402
import fim  # noqa: E402
from encoder import Encoder  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "native", "build", "k3")
TF_BYTES = 3000
PROMPT_TOKENS = 1024  # the file above the cursor, lines dropped from the top to fit
LINE_GEN = 48
MAX_TRUTH = 100  # characters; longer lines are not used as cases


def k3(*args):
    r = subprocess.run([K3, *map(str, args)], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"k3 {' '.join(map(str, args))[:200]} failed:\n{r.stderr[-2000:]}")
    return r.stdout


class Model:
    def __init__(self, directory):
        self.dir = directory
        self.enc = Encoder(directory)
        self.fim = all(n in self.enc.special for n in fim.FIM_NAMES)
        self.eos = self.enc.special[fim.EOS_NAME]

    def engine_encode(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            return json.loads(k3("tokenize", "--tok", self.dir, "--prompt-file", f.name, "--no-special")
                              .strip().splitlines()[-1])
        finally:
            os.unlink(f.name)

    def logits(self, ids, all_positions=False):
        with tempfile.TemporaryDirectory() as d:
            dump = os.path.join(d, "logits.f32")
            extra = ("--tf-check",) if all_positions else ("--gen", 1)
            k3(self.dir, "--ids", ",".join(map(str, ids)), *extra, "--dump-logits", dump)
            with open(dump, "rb") as f:
                raw = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        return raw.view(len(ids), -1).double() if all_positions else raw.double()

    def generate(self, ids, n):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            k3(self.dir, "--ids", ",".join(map(str, ids)), "--gen", n, "--incremental", "--out", out)
            with open(out) as f:
                return json.load(f)["generated_ids"]

    def healed(self, ids, removed, n):
        """Bytes generated after ids whose start re-spells `removed` (the backed-off bytes):
        while bytes remain, the best token that is a prefix of them or extends them."""
        out = b""
        ids = list(ids)
        while len(out) < len(removed):
            want = removed[len(out):]
            scores = self.logits(ids)
            ok = [t for t, b in enumerate(self.enc.bytes) if b and (b.startswith(want) or want.startswith(b))]
            best = max(ok, key=lambda t: scores[t].item())
            ids.append(best)
            out += self.enc.bytes[best]
        gen = self.generate(ids, n)
        if self.eos in gen:
            gen = gen[:gen.index(self.eos)]
        return out + self.enc.decode([t for t in gen if t < self.enc.n_ranks])


def teacher_forced(model, files):
    nll, correct, count, nbytes = 0.0, 0, 0, 0
    for entry in files:
        text = corpus.header(entry["language"], entry["name"]) + data.read_doc(entry["path"])
        cut = text.rfind("\n", 0, TF_BYTES) + 1 if len(text) > TF_BYTES else len(text)
        ids = model.engine_encode(text[:cut])
        if len(ids) < 16:
            continue
        logits = model.logits(ids, all_positions=True)
        target = torch.tensor(ids[1:])
        logp = torch.log_softmax(logits[:-1], -1)
        nll += -logp.gather(1, target.unsqueeze(1)).sum().item()
        correct += (logits[:-1].argmax(-1) == target).sum().item()
        count += len(ids) - 1
        nbytes += len(model.enc.decode(ids[1:]))
    return {"positions": count, "bytes": nbytes, "next_token_accuracy": correct / count,
            "perplexity": math.exp(nll / count), "nats_per_token": nll / count, "nats_per_byte": nll / nbytes}


def cases(files, rng, per_file):
    """(entry, text, cursor offset, kind, truth): after the indentation and inside a line."""
    out = []
    for entry in files:
        text = data.read_doc(entry["path"])
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        lines = []
        for s in starts[1:]:
            end = text.find("\n", s)
            end = len(text) if end < 0 else end
            indent = len(text[s:end]) - len(text[s:end].lstrip())
            if 2 <= end - s - indent <= MAX_TRUTH and s >= 200:
                lines.append((s + indent, end))
        rng.shuffle(lines)
        for k, (first, end) in enumerate(lines[:per_file]):
            if k % 2 == 0:
                out.append((entry, text, first, "after indentation", text[first:end]))
            else:
                cursor = rng.randrange(first + 1, end)
                out.append((entry, text, cursor, "mid-line", text[cursor:end]))
    return out


def prompt(model, entry, text, cursor, layout):
    """(ids, removed bytes) of the server's layout at the cursor, healed."""
    head = corpus.header(entry["language"], entry["name"])
    line_start = text.rfind("\n", 0, cursor) + 1
    back = line_start + fim.heal_start(text[line_start:cursor])
    line = model.enc.encode(text[line_start:back])
    above_lines = text[:line_start].split("\n")[:-1]
    if layout == "plain":
        above = fim.above_ids(model.enc, head, above_lines, PROMPT_TOKENS - len(line))
        ids = above + line
    else:
        end = text.find("\n", cursor)
        suffix = fim.suffix_ids(model.enc, text[len(text) if end < 0 else end:])
        above = fim.above_ids(model.enc, head, above_lines, PROMPT_TOKENS - len(line))
        pre, suf, mid = (model.enc.special[n] for n in fim.FIM_NAMES)
        ids = [pre, suf, *suffix, mid, *above, *line]
    return ids, text[back:cursor].encode()


def edit_similarity(a, b):
    if not a and not b:
        return 1.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1 - prev[-1] / max(len(a), len(b))


def line_completion(model, all_cases, layout):
    rows = []
    for entry, text, cursor, kind, truth in all_cases:
        ids, removed = prompt(model, entry, text, cursor, layout)
        got = model.healed(ids, removed, LINE_GEN)[len(removed):].decode("utf-8", "replace").split("\n")[0]
        rows.append({"file": entry["path"], "kind": kind, "prefix": text[max(0, cursor - 160):cursor],
                     "truth": truth, "completion": got, "exact": got.rstrip() == truth.rstrip(),
                     "edit_similarity": edit_similarity(got.rstrip(), truth.rstrip())})
    table = {}
    for kind in ("after indentation", "mid-line", "all"):
        mine = [r for r in rows if kind in ("all", r["kind"])]
        table[kind] = {"lines": len(mine), "exact_match": sum(r["exact"] for r in mine) / max(1, len(mine)),
                       "edit_similarity": sum(r["edit_similarity"] for r in mine) / max(1, len(mine))}
    return table, rows


def pick_files(n, seed):
    """n held-out files, taken in turn from each package (shuffled by seed within it)."""
    rng = random.Random(seed)
    by_package = {}
    for f in corpus.read_held_out():
        by_package.setdefault(f["source"], []).append(f)
    for fs in by_package.values():
        rng.shuffle(fs)
    out = []
    while len(out) < n and any(by_package.values()):
        for fs in by_package.values():
            if fs and len(out) < n:
                out.append(fs.pop())
    return out


def evaluate(directory, files, all_cases):
    model = Model(directory)
    result = {"model": os.path.relpath(os.path.abspath(directory), ROOT), "fim": model.fim,
              "teacher_forced": teacher_forced(model, files)}
    print(json.dumps({directory: result["teacher_forced"]}), flush=True)
    layouts = ["plain", "fim"] if model.fim else ["plain"]
    examples = []
    for layout in layouts:
        result[f"lines_{layout}"], rows = line_completion(model, all_cases, layout)
        examples += [dict(r, layout=layout) for r in rows]
        print(json.dumps({directory: {layout: result[f"lines_{layout}"]}}), flush=True)
    return result, examples


def main():
    parser = argparse.ArgumentParser(description="held-out metrics of exported models, by the engine")
    parser.add_argument("model")
    parser.add_argument("--baseline", help="another model directory evaluated on the same cases (v1)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--files", type=int, default=45, help="held-out files (spread over the packages)")
    parser.add_argument("--lines-per-file", type=int, default=4)
    args = parser.parse_args()
    files = pick_files(args.files, args.seed)
    all_cases = cases(files, random.Random(args.seed), args.lines_per_file)
    metrics = {"seed": args.seed, "files": len(files), "packages": sorted({f["source"] for f in files}),
               "tf_bytes_per_file": TF_BYTES, "prompt_tokens": PROMPT_TOKENS}
    metrics["model"], examples = evaluate(args.model, files, all_cases)
    if args.baseline:
        metrics["baseline"], _ = evaluate(args.baseline, files, all_cases)
    with open(os.path.join(args.model, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.model, "examples.md"), "w") as f:
        f.write("# Single-line completions of held-out code by the engine (greedy)\n\n"
                "Each: the layout, the end of the text before the cursor, the real rest of the line, the "
                "model's.\n\n")
        for r in examples[:: max(1, len(examples) // 24)][:24]:
            mark = "exact" if r["exact"] else "differs"
            f.write(f"## {os.path.relpath(r['file'], ROOT)}, {r['kind']}, {r['layout']} layout ({mark})\n\n"
                    f"```\n{r['prefix'][-160:]}\n```\n\n"
                    f"- real:  `{r['truth']}`\n- model: `{r['completion']}`\n\n")


if __name__ == "__main__":
    main()
