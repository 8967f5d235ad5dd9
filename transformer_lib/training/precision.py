"""The arithmetic of a training step: fp32, or bf16 or fp16 autocast on a GPU with fp16's loss scaling.

:func:`resolve_precision` turns a config's choice into what the device can do; :class:`Precision`
runs a step's autocast, backward and optimizer step in it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lib.errors import InvalidValue


def resolve_precision(precision: str, device_type: str, bf16_supported: bool = False) -> str:
    """The precision a run trains in, from the config's choice and what the device can do.

    ``auto`` takes bf16 autocast where the GPU computes in bf16 (NVIDIA Ampere and newer), fp16
    autocast with loss scaling on a CUDA GPU without it (a T4, a V100), and fp32 on a CPU. bf16 on a
    CPU trains in fp32, as a GPU recipe tried on a laptop should; fp16 on a CPU, or bf16 asked of a
    GPU without it, is refused in one line (before anything is written, by the command line).
    """
    on_gpu = device_type == "cuda"
    if precision == "auto":
        return ("bf16" if bf16_supported else "fp16") if on_gpu else "fp32"
    if precision == "fp16" and not on_gpu:
        raise InvalidValue("precision fp16 needs a CUDA GPU (its loss scaling is for one); on a CPU use fp32 or auto")
    if precision == "bf16" and on_gpu and not bf16_supported:
        raise InvalidValue("this GPU does not compute in bf16: use precision fp16 (with loss scaling) or auto")
    return "fp32" if precision == "bf16" and not on_gpu else precision


def device_precision(precision: str, device: torch.device) -> str:
    """:func:`resolve_precision` for ``device`` (native bf16: compute capability 8.0 or newer)."""
    bf16 = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8
    return resolve_precision(precision, device.type, bf16)


class Precision:
    """How a step's arithmetic runs: autocast to bf16 or fp16 on a GPU, and fp16's loss scaling.

    ``name`` is the precision :func:`device_precision` chose. With fp16 the loss is scaled up
    before backward, and a step whose gradients overflowed is skipped (and the scale lowered):
    ``skipped_steps`` counts them. For the other precisions the scaler is a no-op.
    """

    def __init__(self, precision: str, device: torch.device) -> None:
        self.name = device_precision(precision, device)
        half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)
        self.autocast = torch.autocast("cuda", dtype=half or torch.bfloat16, enabled=half is not None)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.name == "fp16")
        self.skipped_steps = 0

    def backward(self, loss: Tensor) -> None:
        self.scaler.scale(loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """The true gradients, for clipping (fp16); a no-op otherwise."""
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer's step, unless fp16's gradients overflowed; then the scale is lowered."""
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        self.scaler.step(optimizer)
        self.scaler.update()
        if self.scaler.is_enabled() and self.scaler.get_scale() < scale:
            self.skipped_steps += 1
