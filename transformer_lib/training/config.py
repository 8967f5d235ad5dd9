"""How to train, whatever the model: :class:`TrainConfig`, its defaults and its checks.

What a batch is and how the loss is computed belong to the task
(:mod:`transformer_lib.training.tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_lib.errors import InvalidValue, check_fields, check_range
from transformer_lib.training.precision import PRECISIONS
from transformer_lib.training.schedules import SCHEDULES


@dataclass(frozen=True)
class TrainConfig:
    """How to train, whatever the model. Defaults follow the paper where it applies to a small corpus.

    What a batch is and how the loss is computed (the batch budget, label smoothing) belong to
    the task (:mod:`transformer_lib.training.tasks`).
    """

    epochs: int = 10
    max_steps: int | None = None  # stop earlier than ``epochs`` if set
    max_minutes: float | None = None  # also stop after this much training time (a sweep's budget on a GPU)
    snapshot_minutes: tuple[float, ...] = ()  # also save the model at these minutes of training: a curve
    lr_factor: float = 1.0  # multiplies the paper's schedule
    warmup: int = 4000
    schedule: str = "noam"  # noam: the paper's; time_linear: its warm-up times a line to 0 at max_minutes;
    # cooldown: the paper's, falling in a line to 0 over the last `cooldown` of max_minutes (or max_steps)
    cooldown: float = 0.2
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_grad: float | None = 1.0
    grad_accum: int = 1  # batches per optimizer step (per process, when there are several)
    precision: str = "fp32"  # auto | bf16 | fp16 | fp32: see resolve_precision
    compile: bool = False  # torch.compile the model; only on CUDA, a no-op on CPU
    # Training steps as CUDA graphs (torch.compile's reduce-overhead mode): each batch shape's kernels
    # recorded once, then replayed without launching each. Pays when shapes recur: set task.pad_multiple.
    cuda_graphs: bool = False
    eval_every: int = 0  # steps between validations; 0: at the end of each epoch
    checkpoint_every: int = 0  # steps between checkpoints; 0: at the end of each epoch
    keep_last: int = 0  # also keep the weights of the last N checkpoints, for averaging (weights-step*.pt)
    seed: int = 0
    progress: bool = True  # the tqdm progress bar

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("epochs", "warmup", "grad_accum", "max_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise InvalidValue(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("keep_last", "eval_every", "checkpoint_every", "adam_eps", "weight_decay", "max_minutes"):
            check_range(self, name, 0)
        for name in ("lr_factor", "clip_grad"):  # a negative clip would train by gradient ascent
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise InvalidValue(f"{name} must be positive, got {getattr(self, name)!r}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise InvalidValue(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        marks = self.snapshot_minutes
        if any(not isinstance(m, int | float) or m <= 0 for m in marks) or list(marks) != sorted(set(marks)):
            raise InvalidValue(f"snapshot_minutes must be positive minutes in increasing order, got {list(marks)!r}")
        if marks and self.max_minutes and marks[-1] >= self.max_minutes:
            raise InvalidValue(
                f"snapshot_minutes must end before max_minutes={self.max_minutes} (the run's end is the last point), "
                f"got {list(marks)!r}"
            )
        if self.schedule not in SCHEDULES:
            raise InvalidValue(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.schedule == "time_linear" and not self.max_minutes:
            raise InvalidValue("schedule time_linear falls to 0 at max_minutes: set training.max_minutes too")
        if self.schedule == "cooldown" and not (self.max_minutes or self.max_steps):
            raise InvalidValue("schedule cooldown falls to 0 at the run's end: set training.max_minutes or max_steps")
        if not 0.0 < self.cooldown <= 1.0:
            raise InvalidValue(f"cooldown must be a share of the run in (0, 1], got {self.cooldown!r}")
        if self.precision not in PRECISIONS:
            raise InvalidValue(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
