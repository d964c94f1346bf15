"""check_export.py - exports a randomly initialised model of the `test` size (configs.py) the way
train.py exports the trained one, reloads the export into torch and writes its float64 logits,
so test/training/export.test.ts can hold the engine's logits on the same directory against
them: the export's names, dtypes, MXFP4 packing and config are what the engine reads. Also
checks that quantization-aware training saw exactly the weights the export stores.
    /usr/bin/python3 training/check_export.py OUT_DIR --ids 1,2,3
"""
import argparse
import sys

import torch

import configs
import mxfp4
from export import write_checkpoint
from k3_torch import K3ForCausalLM, TextConfig, init_weights
from load import load_checkpoint


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ids", required=True)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    ids = [int(x) for x in args.ids.split(",")]
    ranks = configs.TEST["ranks"]
    text = configs.text_config(configs.TEST, ranks + 256, bos=ranks, eos=ranks + 2, pad=ranks + 255)
    model = K3ForCausalLM(TextConfig(text))
    init_weights(model, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():  # trained models are not at their init: make every vector matter
        for name, p in model.named_parameters():
            if p.dim() == 1 or name.endswith("_res_proj.weight"):
                p.add_(torch.randn(p.shape, generator=gen) * 0.3)
            elif not name.endswith("_conv1d.weight"):
                p.mul_(8.0)
        for moe in model.moe_layers():
            moe.gate.e_score_correction_bias.copy_(torch.randn(configs.TEST["num_experts"], generator=gen) * 0.1)
    write_checkpoint(args.out, model, configs.checkpoint_config(text))
    reloaded = load_checkpoint(args.out, torch.float64)
    expert = model.moe_layers()[0].experts[1].w2.weight
    stored = reloaded.moe_layers()[0].experts[1].w2.weight.float()
    if not torch.equal(mxfp4.fake_quantize(expert), stored):
        sys.exit("check_export: fake_quantize differs from the exported MXFP4 weights")
    with torch.no_grad():
        logits = reloaded(torch.tensor([ids]))[0]
    with open(f"{args.out}/torch-logits.f64", "wb") as f:
        f.write(logits.contiguous().numpy().astype("<f8").tobytes())


if __name__ == "__main__":
    main()
