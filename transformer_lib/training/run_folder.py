"""A training run's folder: its checkpoint, kept weights, snapshots and metrics file.

The :class:`~transformer_lib.training.trainer.Trainer` owns one :class:`RunFolder` and hands it
what to write: the state a resumed run needs (built by the trainer, written here atomically), the
weights of the last checkpoints kept for averaging, snapshots of the model after a number of
minutes of training, and ``metrics.csv``, one row per step and validation, cut back on resume so
that no step is logged twice. Only the main process writes; without a path nothing is written.
The random generators' state, which a checkpoint carries for every process, is read and set here too.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import random
from pathlib import Path

import numpy as np
import torch
from torch import nn

from transformer_lib import checkpoint
from transformer_lib.config import TrainConfig
from transformer_lib.errors import InvalidValue
from transformer_lib.files import atomic_path
from transformer_lib.training import distributed
from transformer_lib.training.optimizer import Update

METRICS = ["step", "epoch", "loss", "lr", "grad_norm", "items", "items_per_s", "val_loss", "val_ppl"]


class RunFolder:
    """The files of one run in ``path`` (None: a run that writes nothing), written by the main process only."""

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

    def save_checkpoint(self, state: dict, path: str | os.PathLike | None = None, keep_last: int = 0) -> Path | None:
        """Write ``state`` atomically; by default to the folder's ``checkpoint.pt``.

        There, with ``keep_last`` set, the folder also keeps the weights of the last ``keep_last``
        checkpoints as ``weights-step<step>.pt``, which
        :func:`~transformer_lib.checkpoint.average_checkpoints` reads.
        """
        if not self.is_main:
            return None
        if path is None:
            if self.path is None:
                return None
            path = self.path / checkpoint.CHECKPOINT
            if keep_last:
                step = state["position"]["step"]
                checkpoint.save({"model": state["model"], "step": step}, checkpoint.weights_path(self.path, step))
                for old in checkpoint.kept_weights(self.path)[:-keep_last]:
                    old.unlink()
        return checkpoint.save(state, path)

    def save_snapshot(self, weights: dict, entries: dict, info: dict, keep_last: int = 0) -> Path | None:
        """``snapshot-<minutes>min.pt``: the mean of the last ``keep_last`` kept weights (``weights``
        without them), with ``entries`` (the model's config, the CLI's tokenizer and record), so
        ``load_model`` reads it, and ``info`` (``minutes``, ``seconds``, ``step``)."""
        if not self.writes:
            return None
        kept = checkpoint.kept_weights(self.path)[-keep_last:] if keep_last else []
        state = {"model": checkpoint.average_checkpoints(kept) if kept else weights, **entries}
        state["snapshot"] = {**info, "averaged": len(kept)}
        return checkpoint.save(state, checkpoint.snapshot_path(self.path, info["minutes"]))


def training_state(model: nn.Module, config: TrainConfig, update: Update, position: dict) -> dict:
    """What a checkpoint holds: weights, configs, the update's state, the ``position`` in the data and the
    training time, and every process's random generators (each draws its own dropout)."""
    return {
        "model": model.state_dict(),
        "model_config": config_dict(model),
        "train_config": dataclasses.asdict(config),
        **update.state_dict(),  # optimizer, scheduler, scaler
        "position": position,
        "rng": distributed.gather(rng_state()),
    }


def resume(state: dict, model: nn.Module, update: Update, world: int, rank: int) -> tuple[int, int, int, float]:
    """Load a checkpoint's :func:`training_state` into ``model``, ``update`` and this process's generators;
    its position: step, epoch, batch in the epoch, seconds of training."""
    if len(state["rng"]) != world:
        raise InvalidValue(
            f"the checkpoint was written by {len(state['rng'])} process(es) and this run has {world}: "
            "resume with the same number of processes"
        )
    model.load_state_dict(state["model"])
    update.load_state_dict(state)
    set_rng_state(state["rng"][rank])
    position = state["position"]
    seconds = position.get("seconds", 0.0)  # absent before time budgets spanned resumes
    return position["step"], position["epoch"], position["batch_in_epoch"], seconds


def config_dict(model: nn.Module) -> dict | None:
    """The model's dataclass config as a dict (how ``load_model`` rebuilds it), or None."""
    config = getattr(model, "config", None)
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None


def rng_state() -> dict:
    """This process's random generators (dropout, shuffles), in a form weights_only=True loads."""
    name, keys, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002 -- the global state
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
    }


def set_rng_state(rng: dict) -> None:
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    random.setstate(rng["python"])
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  # noqa: NPY002
