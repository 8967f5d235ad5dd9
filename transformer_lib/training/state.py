"""What a resumed run needs besides its weights, taken from a training run and given back to one.

:func:`training_state` gathers the :class:`~transformer_lib.checkpoint.TrainingState` a checkpoint
carries: the training config, the update's state, the position and every process's random
generators; :func:`restore` puts a checkpoint's back into a model, an update and this process.
The files themselves are :mod:`transformer_lib.checkpoint`'s.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import torch
from torch import nn

from transformer_lib.checkpoint import Checkpoint, Position, TrainingState
from transformer_lib.config import TrainConfig
from transformer_lib.errors import InvalidValue
from transformer_lib.training import distributed
from transformer_lib.training.optimizer import Update


def training_state(config: TrainConfig, update: Update, position: Position) -> TrainingState:
    """The state of a run at ``position``: its config, the update's state and every process's generators."""
    return TrainingState(dataclasses.asdict(config), **update.state_dict(), position=position,
                         rng=distributed.gather(rng_state()))  # fmt: skip


def restore(checkpoint: Checkpoint, model: nn.Module, update: Update, world: int, rank: int) -> Position:
    """Load a full checkpoint into ``model``, ``update`` and this process's generators; its position."""
    state = checkpoint.training
    if state is None:
        raise InvalidValue("this checkpoint holds weights only, no training state: resume from a run's checkpoint.pt")
    if len(state.rng) != world:
        raise InvalidValue(
            f"the checkpoint was written by {len(state.rng)} process(es) and this run has {world}: "
            "resume with the same number of processes"
        )
    model.load_state_dict(checkpoint.weights)
    update.load_state_dict(state)
    set_rng_state(state.rng[rank])
    return state.position


def config_dict(model: nn.Module) -> dict | None:
    """The model's dataclass config as a dict, which a checkpoint keeps beside the weights, or None."""
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
    """Restore the random states :func:`rng_state` saved (PyTorch's, CUDA's, Python's, NumPy's): a resumed run
    draws the same numbers the uninterrupted one would."""
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    random.setstate(rng["python"])
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  # noqa: NPY002
