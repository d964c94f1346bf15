"""check_reference.py - runs the torch K3 (k3_torch.py) on a checkpoint in float64 and writes
the logits at every prompt position as raw little-endian float64 (positions x vocab), so
test/training/torch-reference.test.ts can hold it against the TypeScript reference.
    /usr/bin/python3 training/check_reference.py DIR --ids 1,2,3 --out logits.f64
"""
import argparse
import sys

import torch

from load import load_checkpoint


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ids = [int(x) for x in args.ids.split(",")]
    torch.set_num_threads(1)
    try:
        model = load_checkpoint(args.dir, torch.float64)
    except (OSError, ValueError) as e:
        sys.exit(f"check_reference: {e}")
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    with open(args.out, "wb") as f:
        f.write(logits.contiguous().numpy().astype("<f8").tobytes())
    print(f"check_reference: {len(ids)} positions x {logits.shape[1]} logits -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
