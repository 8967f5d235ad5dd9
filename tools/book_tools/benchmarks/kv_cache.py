"""The key-value cache's speed-up as a table and a record (lesson 10 runs one row of it).

    python -m book_tools.benchmarks.kv_cache [--presets small base] [--batch-sizes 1 32 128]
                                             [--tokens 40] [--device cpu] [--threads 2] [--json FILE]

What each column times is :func:`transformer_lib.benchmarks.kv_cache.benchmark`'s docstring.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from book_tools.benchmarks import provenance, write_record
from transformer_lib.benchmarks.kv_cache import benchmark
from transformer_lib.utils import environment


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 32, 128])
    parser.add_argument("--tokens", type=int, default=40, help="output length limit")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: PyTorch's)")
    parser.add_argument("--json", type=Path, help="also write the rows, with the device and commit, to this file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    name = env["device"] if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"greedy decoding, up to {args.tokens} output tokens; torch {torch.__version__}; {name}\n")
    rows = []
    static = "graphed (s)" if device.type == "cuda" else "static (s)"
    print(
        f"{'model':<6} {'batch':>5} {'generated':>9} {'no cache (s)':>12} {'cache (s)':>9} {'speed-up':>8} "
        f"{static:>11} {'speed-up':>8}"
    )
    for preset in args.presets:
        for batch_size in args.batch_sizes:
            r = benchmark(preset, batch_size, args.tokens, device)
            rows.append({**provenance(env), **r})
            print(
                f"{preset:<6} {batch_size:>5} {r['generated']:>9.1f} {r['no_cache_s']:>12.3f} {r['cache_s']:>9.3f} "
                f"{r['no_cache_s'] / r['cache_s']:>7.1f}x {r['static_s']:>11.3f} "
                f"{r['no_cache_s'] / r['static_s']:>7.1f}x",
                flush=True,
            )

    if args.json:
        write_record(args.json, env, rows)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
