"""A run's files: every file of a run folder written here, its checkpoints through one typed record (lessons 9-11).

A :class:`Checkpoint` is what one file holds; :meth:`Checkpoint.entries` is the one place that
names the keys written, and :meth:`Checkpoint.of` the one place that reads them back. A run folder
holds:

* ``checkpoint.pt``: the weights and a :class:`TrainingState`, everything a resumed run needs;
* ``weights-step<step>.pt``: with ``keep_last``, the weights of the last steps, which
  :func:`average_checkpoints` averages into ``checkpoint_averaged.pt``;
* ``snapshot-<minutes>min.pt``: with ``snapshot_minutes``, the model of an earlier moment;
* ``model_fp16.pt``: the evaluated weights in half precision, small enough to share;
* ``metrics.csv``: one row per step and validation;
* ``config.yaml``, ``environment.json``, ``tokenizer.model`` and ``log.txt``: what the run is, where
  it ran, its vocabulary and what it said; ``<split>.hyp.txt``, ``scores.json`` and ``curve.json``:
  its translations and scores, written when training ends.

:class:`RunFolder` writes every one of these files and names them; nothing else does.

Files of the ``train`` command also carry the :class:`RunRecord`: the direction, the model's
config, how it decodes, and the tokenizer. Files hold only tensors and plain Python values, so
:func:`load_checkpoint` reads them with ``weights_only=True``, which never runs code from the file.
Each file says its ``format``; the files of 0.3.0 and before, which do not, are format 1, the same
entries. A command that reads a model takes a run folder or one of its files.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from transformer_lib.config import DecodeConfig, TransformerConfig
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.files import atomic_path, write_bytes, write_text

FORMAT = 2  # the layout of a checkpoint file; 1: the files of 0.3.0 and before (no "format" entry)
CHECKPOINT = "checkpoint.pt"  # a run folder's latest full checkpoint
AVERAGED = "checkpoint_averaged.pt"  # the mean of its last kept weights, with the run record
HALF = "model_fp16.pt"  # the evaluated weights in half precision, with the run record: small enough to share
KEPT, SNAPSHOTS = "weights-step*.pt", "snapshot-*min.pt"  # the kept weights and the snapshots, as patterns
CONFIG, SCORES, TOKENIZER = "config.yaml", "scores.json", "tokenizer.model"  # a run's config, scores, vocabulary
METRICS = ["step", "epoch", "loss", "lr", "grad_norm", "items", "items_per_s", "val_loss", "val_ppl"]


def weights_path(run_dir: str | os.PathLike, step: int) -> Path:
    """Where a run keeps the weights of one step for averaging (``weights-step0000100.pt``)."""
    return Path(run_dir) / f"weights-step{step:07d}.pt"


def step_of(path: str | os.PathLike) -> int:
    """The step of a kept weights file, from its name (``weights-step0000100.pt``: 100)."""
    return int(Path(path).stem.removeprefix("weights-step"))


def snapshot_path(run_dir: str | os.PathLike, minutes: float) -> Path:
    """Where a run saves its model after ``minutes`` of training (``snapshot-005min.pt``, ``snapshot-2.5min.pt``)."""
    return Path(run_dir) / f"snapshot-{minutes:03g}min.pt"


def snapshots(run_dir: str | os.PathLike) -> list[Path]:
    """The ``snapshot-*min.pt`` files of a run folder, earliest first."""
    return sorted(Path(run_dir).glob(SNAPSHOTS), key=lambda p: float(p.stem[len("snapshot-") : -3]))


def kept_weights(run_dir: str | os.PathLike) -> list[Path]:
    """The ``weights-step*.pt`` files of a run folder, oldest first."""
    return sorted(Path(run_dir).glob(KEPT))


@dataclass(frozen=True)
class RunRecord:
    """What a trained translator is, besides its weights: the direction, the model's config, how it
    decodes (the run's own settings, as its scores.json used them) and its tokenizer (SentencePiece's bytes)."""

    src: str
    tgt: str
    model: TransformerConfig
    decoding: DecodeConfig = field(default_factory=DecodeConfig)
    tokenizer: bytes = b""

    @property
    def direction(self) -> str:
        return f"{self.src}_{self.tgt}"


@dataclass
class Position:
    """Where a run is: optimizer steps taken, the epoch and the batch in it, and seconds of training
    (validations included, across resumes). The trainer moves its own; a checkpoint keeps a copy."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class TrainingState:
    """What a resumed run needs besides the weights: its training config (as a dict, for the record),
    the optimizer's and the schedule's state, fp16's loss scale ({} for the other precisions), the
    position, and every process's random generators (each draws its own dropout)."""

    config: dict
    optimizer: dict
    scheduler: dict
    scaler: dict
    position: Position
    rng: list[dict]


@dataclass(frozen=True)
class Snapshot:
    """When a snapshot was taken: after ``minutes`` (``seconds`` exactly) and ``step`` steps, its weights
    the mean of the last ``averaged`` kept ones (0: the weights of that moment)."""

    minutes: float
    seconds: float | None
    step: int
    averaged: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """One file of a run folder: weights, and what else that file holds (None: not in this file).

    ``model_config`` is any model's dataclass config as a dict; a file of the ``train`` command has a
    ``run`` record instead, whose ``model`` it is. ``training``: ``checkpoint.pt``'s resume state;
    ``snapshot``: a snapshot's moment; ``step``: a kept weights file's step.
    """

    weights: dict[str, Tensor]
    model_config: dict | None = None
    run: RunRecord | None = None
    training: TrainingState | None = None
    snapshot: Snapshot | None = None
    step: int | None = None

    def __post_init__(self) -> None:
        if self.run is not None and self.model_config not in (None, dataclasses.asdict(self.run.model)):
            raise InvalidValue("a checkpoint's model_config and its run record's model differ: give one of them")

    def entries(self) -> dict:
        """The file's entries: the one place that names them."""
        out: dict = {"format": FORMAT, "model": self.weights}
        model_config = dataclasses.asdict(self.run.model) if self.run else self.model_config
        if model_config is not None:
            out["model_config"] = model_config
        if self.run is not None:
            run = self.run
            out["meta"] = {"src": run.src, "tgt": run.tgt, "decoding": dataclasses.asdict(run.decoding)}
            out["tokenizer"] = run.tokenizer
        if self.training is not None:
            t = self.training
            out |= {"train_config": t.config, "optimizer": t.optimizer, "scheduler": t.scheduler}
            out |= {"scaler": t.scaler, "position": dataclasses.asdict(t.position), "rng": t.rng}
        if self.snapshot is not None:
            out["snapshot"] = dataclasses.asdict(self.snapshot)
        if self.step is not None:
            out["step"] = self.step
        return out

    @classmethod
    def of(cls, entries: dict, path: str | os.PathLike = "the checkpoint") -> Checkpoint:
        """The checkpoint in a file's ``entries`` (format 1 or 2); one clear error for a newer format."""
        version = entries.get("format", 1)
        if version > FORMAT:
            raise InvalidValue(
                f"{path} is in checkpoint format {version}, newer than this package's {FORMAT}: upgrade "
                "transformer-book to read it"
            )
        try:
            return cls._of(entries)
        except (KeyError, TypeError) as exc:  # an entry missing, or a field this package does not know
            what = f"no {exc.args[0]!r} entry" if isinstance(exc, KeyError) else str(exc).split("__init__() ")[-1]
            raise InvalidValue(f"{path} is not a complete checkpoint of this package ({what})") from None

    @classmethod
    def _of(cls, entries: dict) -> Checkpoint:
        run = training = None
        if "meta" in entries:  # the train command's files; a run's first ones held no decoding
            meta = entries["meta"]
            model = TransformerConfig(**entries["model_config"])
            decoding = DecodeConfig(**meta.get("decoding", {}))
            run = RunRecord(meta["src"], meta["tgt"], model, decoding, entries.get("tokenizer", b""))
        if "optimizer" in entries:
            position = Position(**{"seconds": 0.0, **entries["position"]})  # no seconds before time budgets
            training = TrainingState(
                entries.get("train_config", {}), entries["optimizer"], entries["scheduler"],
                entries.get("scaler") or {},  # absent before fp16, empty when it was off
                position, entries["rng"],
            )  # fmt: skip
        snapshot = Snapshot(**entries["snapshot"]) if "snapshot" in entries else None
        model_config = None if run else entries.get("model_config")
        return cls(entries["model"], model_config, run, training, snapshot, entries.get("step"))

    def save(self, path: str | os.PathLike) -> Path:
        """Write the file to a temporary name in the same folder, then rename it: never a half-written file."""
        with atomic_path(path) as tmp:
            torch.save(self.entries(), tmp)
        return Path(path)

    def half(self) -> Checkpoint:
        """The weights in fp16 with the model's config and run record only (no training state).

        Half the size of fp32 weights, and smaller still beside a full checkpoint, which also holds Adam's
        two moments for every weight; the model loads it as usual
        (``load_state_dict`` casts back to the model's dtype). Tied weights stay one tensor.
        """
        halves: dict[int, Tensor] = {}  # one tensor under several names stays one tensor
        weights = {
            k: halves.setdefault(v.data_ptr(), v.half()) if v.is_floating_point() else v
            for k, v in self.weights.items()
        }
        return Checkpoint(weights, self.model_config, self.run)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Read a checkpoint file (tensors and plain Python values only: ``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFile(f"no checkpoint at {path}; train a model first (python -m transformer_lib train ...)")
    try:
        entries = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # pickle, zip and torch errors: a damaged file, or not a checkpoint at all
        text = str(exc).strip()
        if "Unsupported global" in text:  # PyTorch's advice here, weights_only=False, would run the file's code
            reason = "it holds Python objects, not only tensors"
        elif text.startswith("Weights only load failed"):
            reason = "not a file that torch.save wrote"
        else:
            reason = text.splitlines()[0].split(". ")[0][:120] if text else type(exc).__name__
        raise InvalidValue(
            f"{path} is not a readable checkpoint of this package (damaged, truncated or another format: {reason})"
        ) from None
    if not isinstance(entries, dict) or "model" not in entries:
        raise InvalidValue(f"{path} is not a checkpoint of this package (it holds no model weights)")
    return Checkpoint.of(entries, path)


def average_checkpoints(paths: Sequence[str | os.PathLike]) -> dict[str, Tensor]:
    """The element-wise mean of the model weights in ``paths`` (the paper averages the last 5 or 20).

    Averaging the last checkpoints of a run smooths the noise of the final updates; it is
    cheaper than an ensemble and usually gains a little BLEU. Integer buffers are taken from the
    last checkpoint.
    """
    if not paths:
        raise InvalidValue("no checkpoints to average: train with keep_last > 0 to keep some")
    states = [load_checkpoint(p).weights for p in paths]
    if any(state.keys() != states[0].keys() for state in states):
        raise InvalidValue("the checkpoints hold different parameters: they must come from the same model")
    averaged = {}
    for name, last in states[-1].items():
        if last.is_floating_point():
            averaged[name] = (sum(state[name].double() for state in states) / len(states)).to(last.dtype)
        else:
            averaged[name] = last
    return averaged


def model_file(path: str | os.PathLike) -> Path:
    """The checkpoint a command reads: ``path`` itself, or in a run folder the model its scores measured
    (``checkpoint_averaged.pt`` where the run averaged, else ``checkpoint.pt``, else ``model_fp16.pt``)."""
    path = Path(path)
    if not path.is_dir():
        return path
    for name in (AVERAGED, CHECKPOINT, HALF):
        if (path / name).is_file():
            return path / name
    raise MissingFile(
        f"no checkpoint in the folder {path} ({CHECKPOINT}, {AVERAGED} or {HALF}); give a run folder "
        "that 'python -m transformer_lib train' wrote, or a checkpoint file"
    )


def load_run_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Checkpoint:
    """A checkpoint written by the ``train`` command (or a run folder holding one): it has a run record."""
    path = model_file(path)
    checkpoint = load_checkpoint(path, map_location)
    if checkpoint.run is None or not checkpoint.run.tokenizer:
        missing = "no run record" if checkpoint.run is None else "no tokenizer"
        raise InvalidValue(f"{path} has {missing}: it was not written by 'python -m transformer_lib train'")
    return checkpoint


class RunFolder:
    """The files a training run writes in ``path`` (None: a run that writes nothing), by the main process only.

    The checkpoint, with ``keep_last`` the weights of the last checkpoints kept for averaging,
    snapshots, and ``metrics.csv``, one row per step and validation, cut back on resume so that no
    step is logged twice; the run's config, environment, tokenizer and log; its translations and scores.
    """

    def __init__(self, path: str | os.PathLike | None, is_main: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.is_main = is_main
        if self.path is not None and is_main:  # what a write killed midway left (atomic writes' temporary names)
            for leftover in self.path.glob(".*.part"):
                leftover.unlink()

    @property
    def writes(self) -> bool:
        return self.path is not None and self.is_main

    def log(self, record: dict) -> None:
        """One row of ``metrics.csv``: a step's or a validation's record."""
        if not self.writes:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        path = self.path / "metrics.csv"
        new = not path.exists()
        with open(path, "a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=METRICS)
            if new:
                writer.writeheader()
            writer.writerow(record)

    def forget_metrics_after(self, step: int) -> None:
        """Drop metrics.csv rows past ``step``: a resumed run trains them again (no step twice)."""
        path = self.path / "metrics.csv" if self.writes else None
        if path is None or not path.exists():
            return
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        kept = [rows[0], *(row for row in rows[1:] if int(row[0]) <= step)]
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(kept)

    def save_checkpoint(self, checkpoint: Checkpoint, keep_last: int = 0) -> Path | None:
        """Write ``checkpoint`` to the folder's ``checkpoint.pt``; with ``keep_last`` set, also keep the weights
        of the last ``keep_last`` checkpoints as ``weights-step<step>.pt``."""
        if not self.writes:
            return None
        if keep_last:
            step = checkpoint.training.position.step
            Checkpoint(checkpoint.weights, step=step).save(weights_path(self.path, step))
            for old in kept_weights(self.path)[:-keep_last]:
                old.unlink()
        return checkpoint.save(self.path / CHECKPOINT)

    def save_snapshot(self, checkpoint: Checkpoint, keep_last: int = 0) -> Path | None:
        """``snapshot-<minutes>min.pt``: ``checkpoint`` (weights, config, run record and its moment), with the
        mean of the last ``keep_last`` kept weights in place of its own weights when there are any."""
        if not self.writes:
            return None
        kept = kept_weights(self.path)[-keep_last:] if keep_last else []
        moment = dataclasses.replace(checkpoint.snapshot, averaged=len(kept))
        weights = average_checkpoints(kept) if kept else checkpoint.weights
        snapshot = dataclasses.replace(checkpoint, weights=weights, snapshot=moment)
        return snapshot.save(snapshot_path(self.path, moment.minutes))

    def start(self, config: dict, environment: dict, tokenizer: bytes | None) -> None:
        """``config.yaml`` (the resolved run config), ``environment.json`` and, for a new run, ``tokenizer.model``."""
        import yaml  # PyYAML: a run's config is YAML, as the configs it starts from

        if not self.writes:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        write_text(self.path / CONFIG, yaml.safe_dump(config, sort_keys=False))
        write_text(self.path / "environment.json", json.dumps(environment, indent=2) + "\n")
        if tokenizer is not None:
            write_bytes(self.path / TOKENIZER, tokenizer)

    def note(self, message: str) -> None:
        """Say ``message`` on the standard error, and append it to the run's ``log.txt`` (the main process only)."""
        if not self.is_main:
            return
        print(message, file=sys.stderr, flush=True)
        if self.path is not None:
            with open(self.path / "log.txt", "a", encoding="utf-8") as f:
                f.write(message + "\n")

    def save_evaluated(self, checkpoint: Checkpoint, half: bool = False) -> Path | None:
        """The weights about to be scored: ``checkpoint_averaged.pt``, or in half precision ``model_fp16.pt``."""
        if not self.writes:
            return None
        return checkpoint.half().save(self.path / HALF) if half else checkpoint.save(self.path / AVERAGED)

    def save_hypotheses(self, split: str, hypotheses: Sequence[str]) -> None:
        """``<split>.hyp.txt``: the run's translations of ``split``, one a line."""
        if self.writes:
            write_text(self.path / f"{split}.hyp.txt", "\n".join(hypotheses) + "\n")

    def save_scores(self, scores: dict) -> None:
        """``scores.json``: the final scores; a run that has one has finished."""
        if self.writes:
            write_text(self.path / SCORES, json.dumps(scores, indent=2) + "\n")

    def save_curve(self, curve: dict) -> None:
        """``curve.json``: the scores of each snapshot and of the end, BLEU after so many minutes."""
        if self.writes:
            write_text(self.path / "curve.json", json.dumps(curve, indent=2) + "\n")
