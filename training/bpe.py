"""bpe.py - learns a byte-level BPE vocabulary in tiktoken's form (ranks 0..255 are the single
bytes, each later rank the merge learned at that step) with K3's pre-tokenizer split, so the
engine's tokenizer (native/src/tokenizer.c) encodes with it exactly as it encodes with the
released vocabulary. Writes tiktoken.model (`<base64 bytes> <rank>` lines) and
tokenizer_config.json with the K3 special-token names in the 256 slots after the ranks.
"""
import base64
import heapq
import json
import os
from collections import Counter, defaultdict

import regex

# docs/k3-architecture.md §5.2, with the class intersections (&&[^\p{Han}]) written in the
# regex module's V1 set syntax (--\p{Han}).
_UPPER = r"[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]--\p{Han}]"
_LOWER = r"[[\p{Ll}\p{Lm}\p{Lo}\p{M}]--\p{Han}]"
_SUFFIX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
SPLIT = regex.compile(
    "|".join([r"[\p{Han}]+",
              rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_SUFFIX}",
              rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_SUFFIX}",
              r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]),
    regex.V1)


def learn(texts, n_ranks):
    """The byte strings of ranks 0..n_ranks-1, learned from an iterable of texts."""
    pieces = Counter()
    for text in texts:
        pieces.update(SPLIT.findall(text))
    vocab = [bytes([b]) for b in range(256)]
    known = set(vocab)
    words = [list(p.encode()) for p in pieces]
    freq = list(pieces.values())
    pair_count = defaultdict(int)
    where = defaultdict(set)
    for w, (syms, f) in enumerate(zip(words, freq)):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += f
            where[(a, b)].add(w)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    token_bytes = {i: vocab[i] for i in range(256)}
    next_id = 256
    while len(vocab) < n_ranks and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg < 2:
            if pair_count.get(pair, 0) >= 2 and pair_count[pair] != -neg:
                heapq.heappush(heap, (-pair_count[pair], pair))
            continue
        new = next_id
        next_id += 1
        merged = token_bytes[pair[0]] + token_bytes[pair[1]]
        token_bytes[new] = merged
        if merged not in known:  # two merge paths can spell the same bytes: one rank for both
            known.add(merged)
            vocab.append(merged)
        touched = set()  # pairs whose counts moved: their heap entries are renewed
        for w in where.pop(pair):
            syms, f = words[w], freq[w]
            for a, b in zip(syms, syms[1:]):
                pair_count[(a, b)] -= f
                touched.add((a, b))
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == pair:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[w] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += f
                where[(a, b)].add(w)
                touched.add((a, b))
        pair_count.pop(pair, None)
        for p in touched:
            if pair_count.get(p, 0) >= 2:
                heapq.heappush(heap, (-pair_count[p], p))
    return vocab


def write_tokenizer(directory, vocab, specials_config, extra=None):
    """tiktoken.model for `vocab`, and tokenizer_config.json whose added_tokens_decoder moves
    the released special names (specials_config: the release's tokenizer_config.json) to the
    256 ids after len(vocab). extra: {slot: name} names for reserved slots (0..255 after the
    ranks), e.g. fill-in-the-middle tokens; naming a slot the release already names is an error."""
    with open(os.path.join(directory, "tiktoken.model"), "w") as f:
        for rank, b in enumerate(vocab):
            f.write(f"{base64.b64encode(b).decode()} {rank}\n")
    with open(specials_config) as f:
        released = json.load(f)
    released_base = min(int(k) for k in released["added_tokens_decoder"])
    base = len(vocab)
    decoder = {str(int(k) - released_base + base): v for k, v in released["added_tokens_decoder"].items()}
    for slot, name in (extra or {}).items():
        old = decoder[str(base + slot)]
        if not old["content"].startswith("<|reserved_token_"):
            raise ValueError(f"special slot {slot} is {old['content']}, not a reserved slot")
        decoder[str(base + slot)] = dict(old, content=name)
    config = {k: v for k, v in released.items() if k != "added_tokens_decoder"}
    config["added_tokens_decoder"] = decoder
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return base
