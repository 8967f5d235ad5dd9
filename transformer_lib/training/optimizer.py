"""The update of one optimizer step: the paper's Adam at the schedule's rate, clipping, precision's scaling.

The :class:`~transformer_lib.training.trainer.Trainer` accumulates gradients and hands them to
:class:`Update`, which owns everything that changes the weights and what a resumed run needs of it
(the optimizer's moments, the schedule's position, fp16's loss scale).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer_lib.checkpoint import TrainingState
from transformer_lib.config import TrainConfig
from transformer_lib.training.precision import Precision
from transformer_lib.training.schedules import learning_rate


def adam(params: list[nn.Parameter], config: TrainConfig, fused: bool) -> torch.optim.Adam:
    """The paper's Adam at learning rate 1 (the schedule sets it): fused into one kernel on a GPU,
    and on a CPU the same arithmetic as one call per operation for all parameters."""
    return torch.optim.Adam(
        params, lr=1.0, betas=config.betas, eps=config.adam_eps, weight_decay=config.weight_decay,
        fused=fused, foreach=not fused,
    )  # fmt: skip


class Update:
    """Adam, the learning-rate schedule and :class:`~transformer_lib.training.precision.Precision` of one run.

    Each :meth:`apply` is told the run's training time so far, which the time-based schedules read.
    """

    def __init__(self, params: list[nn.Parameter], config: TrainConfig, d_model: int, device: torch.device) -> None:
        self.params, self.clip_grad = params, config.clip_grad
        self.seconds = 0.0  # the run's training time at the last step
        self.optimizer = adam(params, config, fused=device.type == "cuda")
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: learning_rate(config, step + 1, self.seconds, d_model)
        )
        self.amp = Precision(config.precision, device)

    def apply(self, grad_scale: Tensor, seconds: float) -> tuple[float, Tensor]:
        """Multiply the gradients by ``grad_scale``, clip them, step; the rate used and the norm before clipping.
        ``seconds``, the run's training time, sets the next step's rate under a time-based schedule."""
        grads = [p.grad for p in self.params if p.grad is not None]
        torch._foreach_mul_(grads, grad_scale)
        self.amp.unscale(self.optimizer)  # fp16: the true gradients, before clipping
        max_norm = self.clip_grad or math.inf  # the norm before clipping is logged either way
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        lr = self.scheduler.get_last_lr()[0]
        self.amp.step(self.optimizer)  # fp16: skipped if a gradient overflowed
        self.optimizer.zero_grad(set_to_none=True)
        self.seconds = seconds
        self.scheduler.step()
        return lr, grad_norm

    def state_dict(self) -> dict:
        """The optimizer's, the schedule's and fp16's loss scale's state ({} for the other precisions)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.amp.scaler.state_dict(),
        }

    def load_state_dict(self, state: TrainingState) -> None:
        self.optimizer.load_state_dict(state.optimizer)
        self.scheduler.load_state_dict(state.scheduler)
        if state.scaler:  # empty unless the run was in fp16
            self.amp.scaler.load_state_dict(state.scaler)
