"""dedup.py - exact and near-duplicate detection for the corpus. Exact: the SHA-1 of the text
with all whitespace removed (so re-indented or re-wrapped copies count as the same). Near:
MinHash over the set of a file's stripped, non-blank lines (16 hashes; locality-sensitive
buckets of 4 hashes), and a file is a near-duplicate of an earlier one when at least
NEAR of their 16 hashes agree (an estimate of the Jaccard similarity of their line sets):
an ESM and a CommonJS build of one module, two versions of one vendored library. The first
file seen keeps its place; the caller orders sources by priority. Files of fewer than
MIN_LINES distinct lines are only checked exactly.
"""
import hashlib
import re
import zlib

import numpy as np

HASHES = 16
BAND = 4
NEAR = 0.7
MIN_LINES = 8
_GEN = np.random.Generator(np.random.PCG64(20))
_MUL = _GEN.integers(1, 2 ** 63, HASHES, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_ADD = _GEN.integers(0, 2 ** 63, HASHES, dtype=np.uint64)
_SPACE = re.compile(r"\s+")


def signature(text):
    """(exact key, MinHash array or None) of a text."""
    exact = hashlib.sha1(_SPACE.sub("", text).encode()).hexdigest()
    lines = {zlib.crc32(l.strip().encode()) for l in text.split("\n") if l.strip()}
    if len(lines) < MIN_LINES:
        return exact, None
    h = np.fromiter(lines, dtype=np.uint64, count=len(lines))
    with np.errstate(over="ignore"):
        mixed = h[None, :] * _MUL[:, None] + _ADD[:, None]
    return exact, mixed.min(axis=1)


class Index:
    """The signatures of the files kept so far."""

    def __init__(self):
        self.exact = {}
        self.bands = {}
        self.minhash = []

    def check(self, owner, text):
        """The owner of an earlier (near-)copy of text, or None after recording text as owner's."""
        exact, mh = signature(text)
        if exact in self.exact:
            return self.exact[exact]
        if mh is not None:
            keys = [(b, mh[b * BAND:(b + 1) * BAND].tobytes()) for b in range(HASHES // BAND)]
            for key in keys:
                other = self.bands.get(key)
                if other is not None and np.mean(self.minhash[other[1]] == mh) >= NEAR:
                    return other[0]
            slot = len(self.minhash)
            self.minhash.append(mh)
            for key in keys:
                self.bands.setdefault(key, (owner, slot))
        self.exact[exact] = owner
        return None
