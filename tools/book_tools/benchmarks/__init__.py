"""The book's benchmarks, run by its maintainers: measurements printed as tables and kept as records.

python -m book_tools.benchmarks.training_speed      # training throughput and MFU, ours against nn.Transformer
python -m book_tools.benchmarks.profile_step        # where the time of one training step goes
python -m book_tools.benchmarks.decode_speed        # a trained translator on a whole test set
python -m book_tools.benchmarks.confidence          # the translator page's confidence, in and outside its domain
python -m book_tools.benchmarks.length_limit        # the output length limit against BLEU on the three test sets
python -m book_tools.benchmarks.onnx_precision      # the ONNX files' size and BLEU at each precision
python -m book_tools.benchmarks.page_speed          # the look-inside page in headless Chromium
python -m book_tools.benchmarks.cpu_speed           # updates per second of lesson 11's CPU recipe
python -m book_tools.benchmarks.checkpoint_average  # how many checkpoints the CPU recipe averages
python -m book_tools.benchmarks.kv_cache            # the key-value cache's speed-up (lesson 10's table, larger)
python -m book_tools.benchmarks.beam_settings       # the CPU recipe's beam size and length penalty, chosen on val

What the lessons import of these measurements is the library's (:mod:`transformer_lib.benchmarks`).
The helpers below give every record the same form. The sweeps that made the CPU recipe's runs are
YAML files in ``experiments/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from transformer_lib.files import write_text

# Lesson 11's two translators, as the site ships them: in a checkout of the book, not in a wheel.
TRANSLATORS = Path(__file__).resolve().parents[3] / "translators"
SITE_CONFIG = TRANSLATORS.parent / "_config.yml"  # the book's config: which precision the translator page serves


def shipped_translator(direction: str) -> Path:
    """The shipped translator of ``direction`` (``de_en`` or ``en_de``); one line if this is no checkout."""
    path = TRANSLATORS / f"{direction}.model_fp16.pt"
    if not path.is_file():
        raise SystemExit(
            f"error: no translator at {path}: the benchmarks read lesson 11's translators from a checkout "
            "of the book, not from an installed wheel; pass --model PATH (or --models) where the script takes one"
        )
    return path


def served_precision() -> str:
    """The precision of the ONNX files the translator page serves (``translator_precision`` in _config.yml)."""
    import yaml

    return yaml.safe_load(SITE_CONFIG.read_text(encoding="utf-8"))["sphinx"]["config"]["translator_precision"]


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
