"""Time and peak memory of one attention call against sequence length (lesson 12).

    python -m transformer_lib.benchmarks.attention_cost [--lengths 1024 2048 4096] [--heads 4]
                                                        [--d-head 64] [--threads 2]

Three ways to compute the same softmax(Q K^T / sqrt(d_k)) V for one sequence: ``by hand``
(lesson 4: the whole (n, n) matrix of scores, then its softmax), ``fused`` (PyTorch's
``F.scaled_dot_product_attention``) and ``tiled`` (the package's ``tiled_attention``, FlashAttention's
idea written in Python). Peak memory is measured in a fresh process per call, as the growth of
the process's peak resident memory during that one call: what the call needed on top of its
inputs, however the kernel allocates it. Linux and macOS only: Windows has no ``resource`` module.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lib.attention import scaled_dot_product_attention, tiled_attention
from transformer_lib.errors import TransformerLibError

KERNELS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "by hand": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
    "fused": F.scaled_dot_product_attention,
    "tiled": lambda q, k, v: tiled_attention(q, k, v, block=256),
}


def time_ms(fn: Callable[..., object], *args: object, repeats: int = 5) -> float:
    """Fastest of ``repeats`` calls of ``fn(*args)`` in milliseconds, after one warm-up call.

    The minimum, not the mean: on a shared machine every disturbance only adds time, so the
    fastest run is the best estimate of what the computation itself costs.
    """
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB.

    On Linux it is read from ``VmHWM`` in /proc, not from ``ru_maxrss``: a process started from
    a large one inherits its parent's ``ru_maxrss`` across fork and exec, but not its ``VmHWM``.
    """
    if sys.platform.startswith("linux"):
        with open("/proc/self/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # KiB
    try:
        import resource
    except ImportError:
        raise TransformerLibError("peak memory is read with the resource module, which Windows lacks") from None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB elsewhere


def _measure_here(kernel: str, n: int, heads: int, d_head: int) -> float:
    """In this process: MiB by which one call of ``kernel`` raises the peak resident memory."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, d_head) for _ in range(3))  # (batch, heads, n, d_head)
    KERNELS[kernel](q[..., :8, :], k[..., :8, :], v[..., :8, :])  # load its code before measuring
    before = _peak_rss_mb()
    with torch.no_grad():
        KERNELS[kernel](q, k, v)
    return _peak_rss_mb() - before


def peak_memory_mb(kernel: str, n: int, heads: int = 4, d_head: int = 64, threads: int = 2) -> float:
    """MiB of memory one attention call over ``n`` positions needs beyond its inputs, in a fresh process."""
    if kernel not in KERNELS:
        raise TransformerLibError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    command = [
        sys.executable,
        "-m",
        "transformer_lib.benchmarks.attention_cost",
        "--measure",
        kernel,
        str(n),
        str(heads),
        str(d_head),
        str(threads),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no error message"]
        raise TransformerLibError(f"measuring {kernel} at n={n} failed: {lines[-1]}")
    return float(result.stdout)


def main(argv: list[str] | None = None) -> None:
    """The command line: a row per length, each way's time and its peak memory (measured in a process of its own)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)  # the child process's job
    args = parser.parse_args(argv)
    if args.measure:
        kernel, *sizes = args.measure
        n, heads, d_head, threads = map(int, sizes)
        torch.set_num_threads(threads)
        print(f"{_measure_here(kernel, n, heads, d_head):.1f}")
        return
    torch.set_num_threads(args.threads)
    print(f"one sequence, {args.heads} heads of {args.d_head}, float32, {args.threads} threads")
    print(f"{'n':>6} " + "".join(f"{name + ' ms':>12}{name + ' MiB':>12}" for name in KERNELS))
    for n in args.lengths:
        q, k, v = (torch.randn(1, args.heads, n, args.d_head) for _ in range(3))
        cells = []
        for name, kernel in KERNELS.items():
            with torch.no_grad():
                cells.append(f"{time_ms(kernel, q, k, v, repeats=3):>12.1f}")
            cells.append(f"{peak_memory_mb(name, n, args.heads, args.d_head, args.threads):>12.1f}")
        print(f"{n:>6} " + "".join(cells))


if __name__ == "__main__":
    main()
