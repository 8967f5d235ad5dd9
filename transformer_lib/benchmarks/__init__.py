"""The measurements the lessons run: printed as tables and kept as records, never asserted in tests.

python -m transformer_lib.benchmarks.kv_cache        # the key-value cache's speed-up (lesson 10)
python -m transformer_lib.benchmarks.attention_cost  # attention's time and memory against length (lesson 12)
python -m transformer_lib.benchmarks.beam_settings   # the CPU recipe's beam size and length penalty, chosen on val

The book's other benchmarks (training speed and MFU, decoding a test set, the translator page's
speed, the CPU recipe's choices) are its tools', in ``book_tools.benchmarks`` (the repository's
``tools/`` folder); they share the helpers below: a timing loop and the form of their records.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from transformer_lib.files import write_text

T = TypeVar("T")
# Lesson 11's two translators, as the site ships them: in a checkout of the book, not in a wheel.
TRANSLATORS = Path(__file__).resolve().parents[2] / "translators"


def shipped_translator(direction: str) -> Path:
    """The shipped translator of ``direction`` (``de_en`` or ``en_de``); one line if this is no checkout."""
    path = TRANSLATORS / f"{direction}.model_fp16.pt"
    if not path.is_file():
        raise SystemExit(
            f"error: no translator at {path}: the benchmarks read lesson 11's translators from a checkout "
            "of the book, not from an installed wheel; pass --model PATH (or --models) where the script takes one"
        )
    return path


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


def provenance(env: dict) -> dict:
    """What every row of a record carries: the device, the torch version and the commit."""
    return {"device": env["device"], "torch": env["torch"], "commit": env["git_commit"]}


def write_record(path: str | os.PathLike, env: dict, rows: list[dict], **extra) -> None:
    """A benchmark's record: its environment, any ``extra`` entries and its rows, as JSON."""
    write_text(path, json.dumps({"environment": env, **extra, "rows": rows}, indent=2) + "\n")


class Report:
    """A benchmark's printed table, kept so that it is also written beside the JSON record (``.txt``)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    def write(self, path: Path, env: dict, rows: list[dict], **extra) -> None:
        """The record at ``path`` (JSON, see :func:`write_record`) and the printed lines beside it."""
        write_record(path, env, rows, **extra)
        write_text(path.with_suffix(".txt"), "\n".join(self.lines) + "\n")
