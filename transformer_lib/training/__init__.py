"""Training: the loop, and the parts it composes, one module each (lesson 9).

* :mod:`.trainer`: the :class:`~.trainer.Trainer`, which runs the loop;
* :mod:`.run_config`: a whole run's YAML config (data, model, task, training, decoding, evaluation);
* :mod:`.tasks`: the :class:`~.tasks.Task` contract, translation's task and its losses;
* :mod:`.schedules`: the paper's learning rate and two that end a short run near 0;
* :mod:`.precision`: fp32, bf16 or fp16 with loss scaling;
* :mod:`.optimizer`: Adam, clipping and the schedule, applied once a step;
* :mod:`.progress`: the progress bar;
* :mod:`.state`: what a resumed run needs, gathered and restored (the files: :mod:`transformer_lib.checkpoint`);
* :mod:`.distributed`: several processes, as ``torchrun`` starts them.

How to train, :class:`~transformer_lib.config.TrainConfig`, is with the package's other configs in
:mod:`transformer_lib.config`. ``from transformer_lib.training import X`` gives the names below, wherever they live.
"""

from transformer_lib.config import PRECISIONS, SCHEDULES, TrainConfig
from transformer_lib.training.optimizer import adam
from transformer_lib.training.precision import Precision, device_precision, resolve_precision
from transformer_lib.training.schedules import cooldown_lr, noam_lr, time_linear_lr
from transformer_lib.training.tasks import label_smoothed_cross_entropy
from transformer_lib.training.trainer import Trainer, check_trainable, steps_in_time

__all__ = [
    "PRECISIONS",
    "SCHEDULES",
    "Precision",
    "TrainConfig",
    "Trainer",
    "adam",
    "check_trainable",
    "cooldown_lr",
    "device_precision",
    "label_smoothed_cross_entropy",
    "noam_lr",
    "resolve_precision",
    "steps_in_time",
    "time_linear_lr",
]
