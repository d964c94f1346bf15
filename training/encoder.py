"""encoder.py - the engine's tokenizer (native/src/tokenizer.c) in Python, for building
training examples whose pieces are encoded one by one (FIM, fim.py) without starting a
process per piece: K3's split pattern (bpe.SPLIT), then a piece that is a rank is that rank,
otherwise the adjacent pair of lowest rank is merged until none is a rank (ties: leftmost).
Special-token names in the text are never matched (the engine's --no-special). It leaves out
the engine's cuts of texts over 400,000 code points or with whitespace runs over 25,000;
train.py checks that it gives the engine's ids on every training file, so a difference
stops training instead of teaching the model ids the engine would never produce.
"""
import base64
import functools
import json
import os

from bpe import SPLIT


class Encoder:
    def __init__(self, directory):
        self.rank = {}
        self.bytes = []
        with open(os.path.join(directory, "tiktoken.model")) as f:
            for line in f:
                b64, rank = line.split()
                b = base64.b64decode(b64)
                self.rank[b] = int(rank)
                self.bytes.append(b)
        self.n_ranks = len(self.bytes)
        with open(os.path.join(directory, "tokenizer_config.json")) as f:
            decoder = json.load(f)["added_tokens_decoder"]
        self.special = {v["content"]: int(k) for k, v in decoder.items()}
        self._piece = functools.lru_cache(maxsize=1 << 20)(self._piece_ids)

    def _piece_ids(self, piece):
        b = piece.encode()
        if b in self.rank:
            return (self.rank[b],)
        parts = [b[i:i + 1] for i in range(len(b))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = self.rank.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        return tuple(self.rank[p] for p in parts)

    def encode(self, text):
        """Token ids of text, special-token names treated as plain text."""
        ids = []
        for piece in SPLIT.findall(text):
            ids.extend(self._piece(piece))
        return ids

    def decode(self, ids):
        """The bytes of rank ids (special ids decode to their names)."""
        names = {v: k.encode() for k, v in self.special.items()}
        return b"".join(self.bytes[i] if i < self.n_ranks else names.get(i, b"") for i in ids)
