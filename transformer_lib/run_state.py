"""A training run's state on disk: its checkpoint, snapshots and metrics file, and resuming from them.

:class:`RunState` is what the :class:`~transformer_lib.training.Trainer` keeps besides its loop:
everything a resumed run needs (weights, optimizer, schedule, fp16's loss scale, the position in
the data, the training time, every process's random generators) in one dict, written atomically;
the weights of the last checkpoints kept for averaging; snapshots of the model after a number of
minutes of training; and ``metrics.csv``, one row per step and validation, cut back on resume so
that no step is logged twice. A checkpoint written before this split resumes unchanged.
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

from transformer_lib import checkpoint, distributed
from transformer_lib.errors import InvalidValue
from transformer_lib.files import atomic_path

METRICS = ["step", "epoch", "loss", "lr", "grad_norm", "items", "items_per_s", "val_loss", "val_ppl"]


class RunState:
    """Checkpoints, snapshots, resume and the metrics file of a :class:`~transformer_lib.training.Trainer`.

    A mixin: it reads the trainer's ``model``, ``optimizer``, ``scheduler``, ``amp`` (its
    :class:`~transformer_lib.training.Precision`), ``config``, ``run_dir``, ``rank``, ``world``,
    ``step``, ``epoch``, ``batch_in_epoch``, ``train_seconds``, ``history`` and ``extra_state``.
    Only the main process writes files.
    """

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def remove_partial_files(self) -> None:
        """What a write killed midway left in the run folder (atomic writes' temporary names)."""
        if self.run_dir is not None and self.is_main:
            for leftover in self.run_dir.glob(".*.part"):
                leftover.unlink()

    def _log(self, record: dict) -> None:
        self.history.append(record)
        if self.run_dir is None or not self.is_main:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / "metrics.csv"
        new = not path.exists()
        with open(path, "a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=METRICS)
            if new:
                writer.writeheader()
            writer.writerow(record)

    def state(self) -> dict:
        """Everything a resumed run needs: weights, optimizer, schedule, position, random states."""
        return {
            "model": self.model.state_dict(),
            "model_config": _config_dict(self.model),
            "train_config": dataclasses.asdict(self.config),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.amp.scaler.state_dict(),  # fp16's loss scale ({} for the other precisions)
            "position": {
                "step": self.step,
                "epoch": self.epoch,
                "batch_in_epoch": self.batch_in_epoch,
                "seconds": self.train_seconds,  # what max_minutes and snapshot_minutes count
            },
            "rng": distributed.gather(_rng_state()),  # one entry per process: each draws its own dropout
        }

    def save_checkpoint(self, path: str | os.PathLike | None = None, **extra) -> Path | None:
        """Write :meth:`state` (plus ``extra`` entries) atomically; by default to run_dir/checkpoint.pt.

        With ``keep_last`` set, the run folder also keeps the weights of the last ``keep_last``
        default checkpoints as ``weights-step<step>.pt``, which
        :func:`~transformer_lib.checkpoint.average_checkpoints` reads.
        """
        state = {**self.state(), **self.extra_state, **extra}  # every process takes part in gathering it
        if not self.is_main:
            return None
        if path is None:
            if self.run_dir is None:
                return None
            path = self.run_dir / checkpoint.CHECKPOINT
            if self.config.keep_last:
                checkpoint.save(
                    {"model": self.model.state_dict(), "step": self.step},
                    checkpoint.weights_path(self.run_dir, self.step),
                )
                for old in checkpoint.kept_weights(self.run_dir)[: -self.config.keep_last]:
                    old.unlink()
        return checkpoint.save(state, path)

    def save_snapshot(self, minutes: float, seconds: float | None = None) -> Path | None:
        """The model as a run stopped after ``minutes`` of training would leave it: ``snapshot-<minutes>min.pt``.

        A checkpoint is written first (as at a run's end), then the snapshot holds the mean of the
        last ``keep_last`` kept weights (the current weights without ``keep_last``), with the
        checkpoint's extra entries (the CLI's tokenizer), so ``load_model`` reads it. The
        ``train`` command scores every snapshot after training: a BLEU-per-minute curve.
        """
        self.save_checkpoint()
        if self.run_dir is None or not self.is_main:
            return None
        kept = checkpoint.kept_weights(self.run_dir)[-self.config.keep_last :] if self.config.keep_last else []
        weights = checkpoint.average_checkpoints(kept) if kept else self.model.state_dict()
        state = {"model": weights, "model_config": _config_dict(self.model), **self.extra_state}
        state["snapshot"] = {"minutes": minutes, "seconds": seconds, "step": self.step, "averaged": len(kept)}
        return checkpoint.save(state, checkpoint.snapshot_path(self.run_dir, minutes))

    def load_state(self, state: dict) -> None:
        """Continue from a checkpoint written by :meth:`save_checkpoint`."""
        if len(state["rng"]) != self.world:
            raise InvalidValue(
                f"the checkpoint was written by {len(state['rng'])} process(es) and this run has {self.world}: "
                "resume with the same number of processes"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):  # absent from checkpoints before fp16, empty when it was off
            self.amp.scaler.load_state_dict(state["scaler"])
        self.step, self.epoch, self.batch_in_epoch = (state["position"][k] for k in ("step", "epoch", "batch_in_epoch"))
        self.train_seconds = state["position"].get("seconds", 0.0)  # absent before time budgets spanned resumes
        _set_rng_state(state["rng"][self.rank])
        self._forget_metrics_after(self.step)

    def _forget_metrics_after(self, step: int) -> None:
        """Drop metrics.csv rows past ``step``: a resumed run trains them again (no step twice)."""
        path = self.run_dir / "metrics.csv" if self.run_dir is not None else None
        if path is None or not self.is_main or not path.exists():
            return
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        kept = [rows[0], *(row for row in rows[1:] if int(row[0]) <= step)]
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(kept)


def _config_dict(model: nn.Module) -> dict | None:
    """The model's dataclass config as a dict (how ``load_model`` rebuilds it), or None."""
    config = getattr(model, "config", None)
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None


def _rng_state() -> dict:
    """This process's random generators (dropout, shuffles), in a form weights_only=True loads."""
    name, keys, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002 -- the global state
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
    }


def _set_rng_state(rng: dict) -> None:
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    random.setstate(rng["python"])
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  # noqa: NPY002
