"""The measurements the lessons run: printed as tables, never asserted in tests.

    from transformer_lib.benchmarks.kv_cache import benchmark              # lesson 10
    from transformer_lib.benchmarks.attention_cost import time_ms         # lesson 12
    from transformer_lib.benchmarks.beam_settings import choose           # the appendix

The command lines of ``kv_cache`` and ``beam_settings``, which write the book's records, are the
book's tools' (``python -m book_tools.benchmarks.NAME``, in the repository's ``tools/`` folder), with
the other benchmarks and the helpers records share. ``attention_cost`` keeps its own here: it
measures each call's memory in a fresh process of itself.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def median_seconds(run: Callable[[], T], repeats: int, device: torch.device) -> tuple[T, float, list[float]]:
    """``run()`` once untimed (kernel choice, allocator), then ``repeats`` times timed, waiting for
    the GPU each time. Returns the first run's result, the median seconds and every time."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    first = run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times), times
