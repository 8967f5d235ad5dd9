"""Checkpoints: one format, written atomically, read safely, averaged (lessons 9 and 10).

A run folder holds ``checkpoint.pt``, everything a resumed run needs (written by
:meth:`~transformer_lib.training.trainer.Trainer.save_checkpoint`: ``model``, ``model_config``,
``train_config``, ``optimizer``, ``scheduler``, ``scaler`` (fp16's loss scale), ``position``,
``rng`` with one entry per process, and, from the command line, ``tokenizer`` and ``meta``, the
:class:`RunRecord`); with
``keep_last`` also the weights of the last steps, ``weights-step<step>.pt`` (``model`` and ``step``), which
:func:`average_checkpoints` averages into ``checkpoint_averaged.pt``; with ``snapshot_minutes`` the
models of earlier moments, ``snapshot-<minutes>min.pt`` (``model``, ``model_config``, ``snapshot``
and the CLI's entries). Files hold only tensors and
plain Python values, so :func:`load_checkpoint` reads them with ``weights_only=True``, which never
runs code from the file. A command that reads a model takes a run folder or one of its files.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from transformer_lib.config import DecodeConfig, TransformerConfig
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.files import atomic_path

CHECKPOINT = "checkpoint.pt"  # a run folder's latest full checkpoint
AVERAGED = "checkpoint_averaged.pt"  # the mean of its last kept weights, with the tokenizer
HALF = "model_fp16.pt"  # the evaluated weights in half precision, with the tokenizer: small enough to share


def save(obj: object, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary file in the same folder, then rename: never a half-written file."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)


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
    return sorted(Path(run_dir).glob("snapshot-*min.pt"), key=lambda p: float(p.stem[len("snapshot-") : -3]))


def kept_weights(run_dir: str | os.PathLike) -> list[Path]:
    """The ``weights-step*.pt`` files of a run folder, oldest first."""
    return sorted(Path(run_dir).glob("weights-step*.pt"))


def average_checkpoints(paths: Sequence[str | os.PathLike]) -> dict[str, Tensor]:
    """The element-wise mean of the model weights in ``paths`` (the paper averages the last 5 or 20).

    Averaging the last checkpoints of a run smooths the noise of the final updates; it is
    cheaper than an ensemble and usually gains a little BLEU. Integer buffers are taken from the
    last checkpoint.
    """
    if not paths:
        raise InvalidValue("no checkpoints to average: train with keep_last > 0 to keep some")
    states = [load_checkpoint(p)["model"] for p in paths]
    if any(state.keys() != states[0].keys() for state in states):
        raise InvalidValue("the checkpoints hold different parameters: they must come from the same model")
    averaged = {}
    for name, last in states[-1].items():
        if last.is_floating_point():
            averaged[name] = (sum(state[name].double() for state in states) / len(states)).to(last.dtype)
        else:
            averaged[name] = last
    return averaged


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint (tensors and plain Python values only: ``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFile(f"no checkpoint at {path}; train a model first (python -m transformer_lib train ...)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
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


@dataclass(frozen=True)
class RunRecord:
    """What a trained translator is, besides its weights: the direction, the model's config, how it decodes.

    The ``train`` command writes it into every checkpoint of a run (:meth:`entries`) and every
    reader takes it back with :meth:`of`: this class is the one place that knows the layout
    (``model_config``, and ``meta`` with ``src``, ``tgt`` and ``decoding``).
    """

    src: str
    tgt: str
    model: TransformerConfig
    decoding: DecodeConfig = field(default_factory=DecodeConfig)  # the run's own: as its scores.json used

    @property
    def direction(self) -> str:
        return f"{self.src}_{self.tgt}"

    def entries(self) -> dict:
        """The checkpoint entries that hold this record."""
        meta = {"src": self.src, "tgt": self.tgt, "decoding": dataclasses.asdict(self.decoding)}
        return {"model_config": dataclasses.asdict(self.model), "meta": meta}

    @classmethod
    def of(cls, state: dict) -> RunRecord:
        """The record in a checkpoint written by the ``train`` command (a run's first ones hold no decoding)."""
        meta = state["meta"]
        return cls(
            meta["src"],
            meta["tgt"],
            TransformerConfig(**state["model_config"]),
            DecodeConfig(**meta.get("decoding", {})),
        )


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


def load_run_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """A checkpoint written by the ``train`` command (or a run folder holding one), with the run's tokenizer
    and :class:`RunRecord`."""
    path = model_file(path)
    state = load_checkpoint(path, map_location)
    if "tokenizer" not in state:
        raise InvalidValue(f"{path} has no tokenizer: it was not written by 'python -m transformer_lib train'")
    return state


def half_precision(state: dict) -> dict:
    """A run checkpoint's weights, tokenizer and metadata only, with floating-point weights in fp16.

    Half the size of fp32 weights and a quarter of a full checkpoint (no optimizer state); the
    model loads it as usual (``load_state_dict`` casts back to the model's dtype).
    """
    halves: dict[int, Tensor] = {}  # tied weights (one tensor under several names) stay one tensor
    weights = {
        k: halves.setdefault(v.data_ptr(), v.half()) if v.is_floating_point() else v for k, v in state["model"].items()
    }
    return {"model": weights, **{k: state[k] for k in ("model_config", "tokenizer", "meta")}}
