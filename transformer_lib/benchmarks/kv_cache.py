"""How much faster greedy decoding is with the key-value cache (lesson 10).

    python -m transformer_lib.benchmarks.kv_cache [--presets small base] [--batch-sizes 1 32 128]
                                                  [--tokens 40] [--device cpu] [--threads 2] [--json FILE]

Without the cache, step t of decoding runs the decoder over all t tokens so far, and producing
T tokens costs O(T^2) token-positions of work; with it, each step processes one new token and
reads the stored keys and values, O(T). The models have random weights (speed does not depend
on what they learned); the source is a random sentence of ``tokens // 2`` ids and the output is
limited to ``tokens`` ids (the last one ``<eos>``). The table reports the tokens generated before
``<eos>``, so an early stop would show. Expect a small speed-up for one sentence at a time, whose
steps are bound by reading the weights and by per-step overhead rather than by arithmetic, and a
large one for batches.

A third column decodes with ``cuda_graph=True``: the cache in fixed buffers and, on a GPU, each
step after the first replayed as one CUDA graph (:class:`~transformer_lib.decoding.StaticStep`),
which removes the per-step overhead that bounds a small model's cached step there. On a CPU it
measures the fixed buffers alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import Tensor

from transformer_lib.benchmarks import median_seconds, provenance, write_record
from transformer_lib.config import TransformerConfig
from transformer_lib.decoding import greedy_decode
from transformer_lib.model import Transformer
from transformer_lib.utils import environment


def time_greedy(
    model: Transformer, src: Tensor, max_extra: int, use_cache: bool, repeats: int = 3, cuda_graph: bool = False
) -> tuple[float, float]:
    """Median seconds of ``greedy_decode`` over ``repeats`` runs (after one warm-up), and mean output length."""

    outputs, seconds, _ = median_seconds(
        lambda: greedy_decode(model, src, max_extra=max_extra, use_cache=use_cache, cuda_graph=cuda_graph),
        repeats,
        src.device,
    )
    return seconds, sum(map(len, outputs)) / len(outputs)


def benchmark(
    preset: str, batch_size: int, tokens: int, device: torch.device, vocab_size: int = 8000, repeats: int = 3
) -> dict:
    """One row of the table: seconds without the cache, with it, and with it in fixed buffers (graphed
    on a GPU), for one model size and batch size."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset(preset, vocab_size=vocab_size)).to(device).eval()
    src_len = tokens // 2
    src = torch.randint(4, vocab_size, (batch_size, src_len), device=device)
    max_extra = tokens - src_len
    slow, length = time_greedy(model, src, max_extra, use_cache=False, repeats=repeats)
    fast, length_cached = time_greedy(model, src, max_extra, use_cache=True, repeats=repeats)
    static, length_static = time_greedy(model, src, max_extra, use_cache=True, repeats=repeats, cuda_graph=True)
    assert length == length_cached == length_static, "the cache must not change the output"
    return {
        "preset": preset,
        "batch": batch_size,
        "generated": length,
        "no_cache_s": slow,
        "cache_s": fast,
        "static_s": static,
        "cuda_graph": device.type == "cuda",  # whether static_s replayed CUDA graphs
    }


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
