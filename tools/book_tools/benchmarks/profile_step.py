"""Where the time of one training step goes: ``torch.profiler`` over a few steps of the Trainer.

    python -m book_tools.benchmarks.profile_step --preset small --variants fp32 bf16 [bf16+compile]

Prints, per variant, the operators with the most self time on the CPU and on the device: the
first thing to read before changing anything for speed (the profiles are kept in
``results/speed_h100.tar.gz``; ``experiments/NOTES.md`` reads them).
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from book_tools.benchmarks.training_speed import make_batches
from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.training import TrainConfig, Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--variants", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16", "bf16+compile"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (allocator, kernels, compilation)")
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    task, batches, vocab = make_batches(args.vocab_size, args.max_tokens, args.steps + args.warmup)
    config = TransformerConfig.preset(args.preset, vocab_size=vocab)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for variant in args.variants:
        torch.manual_seed(0)
        recipe = TrainConfig(bf16="bf16" in variant, compile="compile" in variant, progress=False)
        trainer = Trainer(Transformer(config), task, recipe, device=device)
        for indices in batches[: args.warmup]:  # allocator, kernel selection, compilation: untimed
            trainer.train_step([indices])
        with profile(activities=activities) as prof:
            for indices in batches[args.warmup :]:
                trainer.train_step([indices])
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        for key in ["self_cpu_time_total"] + (["self_cuda_time_total"] if device.type == "cuda" else []):
            print(f"\n== {args.preset} {variant}: {args.steps} steps, by {key} ==")
            print(prof.key_averages().table(sort_by=key, row_limit=args.rows, max_name_column_width=50))


if __name__ == "__main__":
    main()
