"""data.py - the training batches of k3-mini v2, a pure function of (seed, step) so a resumed
run sees exactly the batches an uninterrupted one would.

Each row of sequence length + 1 tokens starts, with probability FIM_RATE, with one fill-in-the-middle
example (fim.py) from a file of the row's language group, and is filled up with a window of
that group's plain stream (every train file as header + text + [EOS], back to back, as the
engine tokenized it): v1's windows, now with the header line the server always sends.
Language groups are drawn by WEIGHTS rather than by their share of the corpus, so the
languages the editor sees most get most of the tokens. Files for FIM examples are drawn in
proportion to their length.
"""
import bisect
import random

import numpy as np
import torch

import fim

GROUPS = {"javascript": "js/ts", "typescript": "js/ts", "python": "python", "go": "go", "rust": "rust",
          "c": "c/c++", "cpp": "c/c++"}
WEIGHTS = {"js/ts": 0.45, "python": 0.33, "go": 0.09, "rust": 0.07, "c/c++": 0.06}
FIM_RATE = 0.5
FIM_TRIES = 4


def read_doc(path):
    """A corpus file as training sees it: UTF-8, line ends made \\n (Python's universal newlines)."""
    with open(path, encoding="utf-8") as f:
        return f.read()


class Batches:
    """streams: {group: np.uint16 array}; files: {group: [{path, header, offset, tokens}]} in
    stream order; enc: encoder.Encoder of the run's tokenizer."""

    def __init__(self, streams, files, enc, seed):
        self.streams = {g: torch.from_numpy(s.astype(np.int32)) for g, s in streams.items()}
        self.files = files
        self.ends = {g: np.cumsum([f["tokens"] for f in fs]).tolist() for g, fs in files.items()}
        self.enc = enc
        self.seed = seed
        self.groups = [g for g in WEIGHTS if g in streams]
        self.weights = [WEIGHTS[g] for g in self.groups]
        self.ids = {n: enc.special[n] for n in (*fim.FIM_NAMES, fim.EOS_NAME)}
        self.fim_tokens = 0

    def fim_example(self, group, rng, budget):
        for _ in range(FIM_TRIES):
            at = rng.randrange(self.ends[group][-1])
            entry = self.files[group][bisect.bisect_right(self.ends[group], at)]
            ids = fim.fim_example(self.enc, read_doc(entry["path"]), entry["header"], rng, budget, self.ids)
            if ids is not None:
                return ids
        return []

    def row(self, rng, seq_len):
        group = rng.choices(self.groups, self.weights)[0]
        head = self.fim_example(group, rng, seq_len + 1) if rng.random() < FIM_RATE else []
        self.fim_tokens += len(head)
        rest = seq_len + 1 - len(head)
        stream = self.streams[group]
        start = rng.randrange(len(stream) - rest)
        return torch.cat([torch.tensor(head, dtype=torch.int64), stream[start:start + rest].long()])

    def batch(self, step, rows, seq_len):
        """[rows, seq_len + 1] token ids of training step `step`."""
        rng = random.Random(f"k3-mini/{self.seed}/{step}")
        return torch.stack([self.row(rng, seq_len) for _ in range(rows)])
