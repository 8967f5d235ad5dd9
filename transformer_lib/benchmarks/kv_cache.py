"""How much faster greedy decoding is with the key-value cache (lesson 10).

:func:`benchmark` times one model size and batch size; ``python -m book_tools.benchmarks.kv_cache``
(the book's tools) prints the table for several and writes it as a record.

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

import torch
from torch import Tensor

from transformer_lib.benchmarks import median_seconds
from transformer_lib.config import TransformerConfig
from transformer_lib.decoding import greedy_decode
from transformer_lib.model import Transformer


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


if __name__ == "__main__":  # its command line moved to the book's tools
    from transformer_lib.errors import moved

    raise SystemExit(moved("book_tools.benchmarks.kv_cache"))
