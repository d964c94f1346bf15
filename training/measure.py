"""measure.py - training throughput of k3_torch on this machine, before choosing a model size:
tokens per second of whole training steps (forward, backward, clipping, AdamW, the router
bias update) on random ids, for one shape, sequence length, batch and torch thread count.
It does not train anything worth keeping; the first steps (allocation, warm-up) are not
timed. Run it several times, interleaved, on a shared machine: other work only slows a run.

    nice -n 5 /usr/bin/python3 training/measure.py --hidden 192 --layers 8 --seq 1024 --batch 4 --threads 2
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import configs  # noqa: E402
import train  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, required=True, help="width (a multiple of 64)")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6, help="timed steps (after 2 untimed)")
    parser.add_argument("--ranks", type=int, help="BPE ranks (default: the size's)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    size = dict(configs.shape(args.hidden, args.layers), seq_len=args.seq, batch=args.batch)
    if args.ranks:
        size["ranks"] = args.ranks
    model, opt, cfg = train.build(size, size["ranks"], seed=1)
    gen = torch.Generator().manual_seed(2)
    times = []
    for step in range(args.steps + 2):
        window = torch.randint(0, cfg.vocab, (args.batch, args.seq + 1), generator=gen)
        t0 = time.perf_counter()
        train.step(model, opt, cfg, window, lr=1e-3, qat=False)
        times.append(time.perf_counter() - t0)
    timed = sorted(times[2:])
    tokens = args.batch * args.seq
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"hidden": args.hidden, "layers": args.layers, "params_m": round(params / 1e6, 2),
                      "vocab": cfg.vocab, "seq": args.seq,
                      "batch": args.batch, "threads": args.threads,
                      "tok_s_median": round(tokens / timed[len(timed) // 2]), "tok_s_best": round(tokens / timed[0]),
                      "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
