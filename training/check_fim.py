"""check_fim.py - checks the fill-in-the-middle training examples (fim.py) against the layout
the server sends, on a small tokenizer learned here (no corpus needed), and prints what it
found as JSON for test/training/fim.test.ts:
  - the tokenizer names <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> in reserved slots and
    the engine maps those names to those ids (`k3 tokenize` with specials allowed);
  - encoder.py gives the engine's ids (`k3 tokenize --no-special`) on every piece of every
    example, so the pieces are what the server's encoder produces;
  - every example reassembles the document: the middle run (P_above, P_line, M) decodes to
    the header and the document up to j, the suffix to a prefix of the document from j, the
    healed line stops at the start of the last pre-token before the cursor, the example ends
    with [EOS], and it fits its budget.
    /usr/bin/python3 training/check_fim.py OUT_DIR
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import bpe
import fim
from encoder import Encoder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "native", "build", "k3")
RELEASED = os.path.join(ROOT, "test", "data", "kimi-tokenizer", "tokenizer_config.json")
SLOTS = {10: fim.FIM_NAMES[0], 11: fim.FIM_NAMES[1], 12: fim.FIM_NAMES[2]}
DOC = '''import { readFile } from 'node:fs/promises';

/** Counts the words of a file: an example for the FIM check. */
export async function countWords(path: string): Promise<number> {
  const text = await readFile(path, 'utf8');
  let count = 0;
  for (const word of text.split(/\\s+/)) {
    if (word.length > 0) count++;
  }
  return count;
}

export const names = ['alpha', 'beta', 'gamma'].map((n) => n.toUpperCase());
'''
HEAD = "// src/words.ts\n"


def engine_ids(tok, text, special):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        args = [K3, "tokenize", "--tok", tok, "--prompt-file", f.name]
        args += [] if special else ["--no-special"]
        r = subprocess.run(args, capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(f.name)


def main():
    tok = sys.argv[1]
    os.makedirs(tok, exist_ok=True)
    bpe.write_tokenizer(tok, bpe.learn([DOC * 3], 400), RELEASED, SLOTS)
    enc = Encoder(tok)
    ids = {n: enc.special[n] for n in (*fim.FIM_NAMES, fim.EOS_NAME)}
    report = {"fim_ids": [ids[n] for n in fim.FIM_NAMES], "n_ranks": enc.n_ranks,
              "engine_fim_ids": engine_ids(tok, "".join(fim.FIM_NAMES), True), "examples": 0,
              "pieces_checked": 0, "piece_mismatches": 0, "layout_errors": [], "single_line": 0, "multi_line": 0,
              "mid_line": 0, "healed_bytes": 0}
    rng = random.Random(11)
    budget = 120
    while report["examples"] < 60:
        state = rng.getstate()
        i, j = fim.split_points(DOC, rng)
        rng.setstate(state)
        ex = fim.fim_example(enc, DOC, HEAD, rng, budget, ids)
        if ex is None:
            continue
        report["examples"] += 1
        line_start = DOC.rfind("\n", 0, i) + 1
        back = line_start + fim.heal_start(DOC[line_start:i])
        line_end = DOC.find("\n", i)
        same_line = "\n" not in DOC[i:j] and DOC[j:j + 1] not in ("\n", "")
        kind = "single_line" if j == line_end else "mid_line" if same_line else "multi_line"
        report[kind] += 1
        report["healed_bytes"] += i - back
        mid = ex.index(ids["<|fim_middle|>"])
        suffix, rest = ex[2:mid], ex[mid + 1:-1]
        errors = []
        if ex[:2] != [ids["<|fim_prefix|>"], ids["<|fim_suffix|>"]] or ex[-1] != ids["[EOS]"]:
            errors.append("specials out of place")
        if len(ex) > budget:
            errors.append(f"{len(ex)} tokens over the budget {budget}")
        whole = enc.decode(rest).decode()
        kept = whole[len(HEAD):]
        start = j - len(kept)
        if not whole.startswith(HEAD) or DOC[start:j] != kept or (start > 0 and DOC[start - 1] != "\n"):
            errors.append(f"middle run {whole!r} is not the header + whole lines of the document up to j")
        if not DOC[j:].startswith(enc.decode(suffix).decode()):
            errors.append("suffix is not the document from j")
        if not (back == line_start or back < i):
            errors.append("healing did not back off")
        for text in (DOC[j:].split("\n")[0], DOC[line_start:back], DOC[back:j], DOC[j:]):
            report["pieces_checked"] += 1
            report["piece_mismatches"] += enc.encode(text) != engine_ids(tok, text, False)
        if errors:
            report["layout_errors"].append({"i": i, "j": j, "errors": errors})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
