"""fim.py - training examples in the layouts the language server sends k3-mini v2
(training/README.md, "Fill-in-the-middle"; docs/PROMPTS.md):

  plain:  encode(header + document) [EOS]
  FIM:    <|fim_prefix|> <|fim_suffix|> encode(S) <|fim_middle|> encode(P_above) encode(P_line) encode(M) [EOS]

in SPM order (suffix first), so text typed at the cursor extends a prompt the engine has
already checkpointed. The document is split at a character offset i (the cursor) and j (the
end of the middle): P_above is the header line and the lines above i's line; P_line is i's
line up to the start of the last pre-token before i (the server backs the prompt off to
there and the engine regenerates those bytes: token healing), M runs from there to j, and S
is the text from j: the rest of j's line and at most SUFFIX_LINES more lines, cut to at most
SUFFIX_TOKENS tokens by dropping whole lines from its end. Each piece is encoded on its own.
It does not choose files or pack sequences (data.py does).
"""
from bpe import SPLIT

FIM_NAMES = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
EOS_NAME = "[EOS]"
SUFFIX_LINES = 16
SUFFIX_TOKENS = 128
MAX_MIDDLE_LINES = 8
SINGLE_LINE = 0.5  # the middle ends at the end of the cursor's line (ghost text for one line)
MID_LINE = 0.2  # the middle ends inside a line, with text after it on that line: foo(|)


def heal_start(line_before):
    """Offset in line_before (the cursor's line up to the cursor) where the prompt stops:
    the start of its last pre-token, 0 when it is empty."""
    if not line_before:
        return 0
    return len(line_before) - len(SPLIT.findall(line_before)[-1])


def suffix_ids(enc, after):
    """encode(S) for the document text after the middle's end."""
    lines = after.split("\n")[:SUFFIX_LINES + 1]
    while True:
        ids = enc.encode("\n".join(lines))
        if len(ids) <= SUFFIX_TOKENS:
            return ids
        if len(lines) == 1:
            return ids[:SUFFIX_TOKENS]
        lines.pop()


def above_ids(enc, head, lines, budget):
    """encode(header + the last lines of `lines`, each with its newline) within budget tokens,
    dropping lines from the top; None when not even the header fits."""
    # Estimate the window from each line's own token count, then make the exact count fit.
    start, used = len(lines), len(enc.encode(head))
    while start > 0:
        n = len(enc.encode(lines[start - 1] + "\n"))
        if used + n > budget:
            break
        used += n
        start -= 1
    while True:
        ids = enc.encode(head + "".join(l + "\n" for l in lines[start:]))
        if len(ids) <= budget:
            return ids
        if start == len(lines):
            return None
        start += 1


def split_points(text, rng):
    """(i, j): the cursor, at any character, and the middle's end."""
    i = rng.randrange(len(text) + 1)
    line_end = text.find("\n", i)
    line_end = len(text) if line_end < 0 else line_end
    r = rng.random()
    if r < SINGLE_LINE:
        return i, line_end
    ends = [line_end]  # ends of the lines from i's line on, up to MAX_MIDDLE_LINES further
    while len(ends) <= MAX_MIDDLE_LINES and ends[-1] < len(text):
        nxt = text.find("\n", ends[-1] + 1)
        ends.append(len(text) if nxt < 0 else nxt)
    if r < SINGLE_LINE + MID_LINE:
        k = rng.randrange(min(4, len(ends)))
        start = i if k == 0 else ends[k - 1] + 1
        if start < ends[k]:  # some text after j on j's line
            return i, rng.randrange(start, ends[k])
        return i, line_end
    return i, ends[rng.randrange(1, len(ends))] if len(ends) > 1 else line_end


def fim_example(enc, text, head, rng, budget, ids):
    """The ids of one FIM example of at most budget tokens, or None when this split does not
    fit. ids: the special ids {name: id} of FIM_NAMES and EOS_NAME."""
    i, j = split_points(text, rng)
    line_start = text.rfind("\n", 0, i) + 1
    back = line_start + heal_start(text[line_start:i])
    suffix = suffix_ids(enc, text[j:])
    line = enc.encode(text[line_start:back])
    middle = enc.encode(text[back:j])
    fixed = 4 + len(suffix) + len(line) + len(middle)
    above = above_ids(enc, head, text[:line_start].split("\n")[:-1], budget - fixed)
    if above is None:
        return None
    pre, suf, mid = (ids[n] for n in FIM_NAMES)
    return [pre, suf, *suffix, mid, *above, *line, *middle, ids[EOS_NAME]]


def plain_example(enc, text, head, eos):
    return enc.encode(head + text) + [eos]
