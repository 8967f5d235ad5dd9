"""Training: label-smoothed loss, the warm-up schedule, and a trainer with checkpoints (lesson 9).

The recipe of the paper's section 5: Adam with beta = (0.9, 0.98) and eps = 1e-9; the learning
rate ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``; label smoothing 0.1; batches of about
the same number of tokens. The :class:`Trainer` adds what a real run needs: gradient clipping and
accumulation, bf16 autocast and ``torch.compile`` on a GPU (no-ops on a CPU), periodic validation,
a CSV log, and checkpoints from which a run resumes exactly.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from transformer_lib import distributed
from transformer_lib.errors import Interrupted, InvalidType, InvalidValue
from transformer_lib.run_state import RunState
from transformer_lib.special_tokens import PAD_ID
from transformer_lib.tasks import Task, missing_methods
from transformer_lib.validation import check_fields, check_range


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float = 0.1, ignore_index: int = PAD_ID, reduction: str = "mean"
) -> Tensor:
    """Cross-entropy against (1 - smoothing) on the true token + smoothing spread over all tokens.

    logits (..., vocab), target (...). Positions whose target is ``ignore_index`` do not count.
    ``reduction`` is "mean" (over counted positions) or "sum". Equal to
    ``F.cross_entropy(..., label_smoothing=smoothing, ignore_index=ignore_index)``.
    """
    log_probs = logits.float().log_softmax(dim=-1)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # -log p(true token)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    keep = target != ignore_index
    total = loss.masked_select(keep).sum()
    return total if reduction == "sum" else total / keep.sum().clamp_min(1)


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at ``step`` (counting from 1): linear warm-up, then 1/sqrt(step)."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def time_linear_lr(step: int, seconds: float, budget: float, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's linear warm-up times a line that falls from 1 at the start to 0 at ``budget`` seconds.

    For a run that stops on time (``max_minutes``): the paper's 1/sqrt(step) still has half its peak
    when a 20-minute run ends. The line falls from the first second, so the warm-up ends below the
    paper's peak by the share of the budget it took (a warm-up of 5 of 20 minutes: 0.75 of it).
    """
    return noam_lr(min(step, warmup), d_model, warmup, factor) * max(0.0, 1.0 - seconds / budget)


def cooldown_lr(
    step: int, progress: float, d_model: int, warmup: int, factor: float = 1.0, share: float = 0.2
) -> float:
    """The paper's schedule, times a line that falls from 1 to 0 over the last ``share`` of the run.

    ``progress`` is the share of the run's budget spent (0 to 1): a short run ends at a rate near 0,
    where the paper's 1/sqrt(step) would still be half its peak, without the lower peak of
    :func:`time_linear_lr`, whose line falls from the first second.
    """
    return noam_lr(step, d_model, warmup, factor) * min(1.0, max(0.0, (1.0 - progress) / share))


SCHEDULES = ("noam", "time_linear", "cooldown")

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


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


@dataclass(frozen=True)
class TrainConfig:
    """How to train, whatever the model. Defaults follow the paper where it applies to a small corpus.

    What a batch is and how the loss is computed (the batch budget, label smoothing) belong to
    the task (:mod:`transformer_lib.tasks`).
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


def adam(params: list[nn.Parameter], config: TrainConfig, fused: bool) -> torch.optim.Adam:
    """The paper's Adam at learning rate 1 (the schedule sets it): fused into one kernel on a GPU,
    and on a CPU the same arithmetic as one call per operation for all parameters."""
    return torch.optim.Adam(
        params, lr=1.0, betas=config.betas, eps=config.adam_eps, weight_decay=config.weight_decay,
        fused=fused, foreach=not fused,
    )  # fmt: skip


def steps_in_time(done: int, elapsed: float, budget: float) -> int:
    """How many steps a time budget of ``budget`` seconds allows at the rate of ``done`` steps in ``elapsed``."""
    if done < 1 or elapsed <= 0:
        return done
    return max(done, round(done * budget / elapsed))


def check_trainable(model: nn.Module, task: Task) -> int:
    """The model's ``d_model`` (the warm-up schedule scales with it), or one clear error."""
    missing = missing_methods(task)
    if missing:
        raise InvalidType(
            f"task must meet the Task contract (transformer_lib.tasks): {type(task).__name__} has no "
            + ", ".join(missing)
        )
    d_model = getattr(model, "d_model", None)
    if not isinstance(d_model, int):
        raise InvalidValue(f"{type(model).__name__} has no integer d_model, which the warm-up schedule scales with")
    return d_model


def wrapped(model: nn.Module, device: torch.device, compile: bool, world: int) -> tuple[nn.Module, ...]:
    """The model for validation, for gradient averaging, and for training steps.

    ``torch.compile`` only on a GPU. With several processes, ``DistributedDataParallel``
    averages the gradients in ``backward()``; validation runs in each process alone, without it.
    """
    on_gpu = device.type == "cuda"
    compile_ = (lambda m: torch.compile(m, dynamic=True)) if compile and on_gpu else (lambda m: m)
    eval_model = compile_(model)
    if world == 1:
        return eval_model, model, eval_model
    parallel = DistributedDataParallel(model, device_ids=[device] if on_gpu else None)
    return eval_model, parallel, compile_(parallel)


def attention_kernels(device: torch.device):
    """PyTorch's fused attention without cuDNN's kernel on a GPU: cuDNN plans anew for each shape
    (11-13 ms of CPU time per call on an H100, NOTES.md), and token batches change shape every step."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class Trainer(RunState):
    """Trains any model on any :class:`~transformer_lib.tasks.Task`; see :class:`TrainConfig`.

    The model only has to be an ``nn.Module`` with a ``d_model`` attribute (the warm-up schedule
    scales with it); the task says what a batch is and what the loss is. ``history`` holds one
    record per optimizer step (loss, learning rate, items) and one per validation; with a
    ``run_dir`` they also go to ``metrics.csv`` there, and checkpoints to ``checkpoint.pt``.

    Started by ``torchrun`` (see :mod:`transformer_lib.distributed`), each process trains on its
    share of every step's batches: a step takes ``grad_accum`` batches per process, process ``r``
    the batches ``r, r + N, ...`` of them, so N processes with ``grad_accum=1`` compute the same
    update as one process with ``grad_accum=N``. Only the main process writes files.
    """

    def __init__(
        self,
        model: nn.Module,
        task: Task,
        config: TrainConfig | None = None,
        run_dir: str | os.PathLike | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        d_model = check_trainable(model, task)
        self.config = c = config or TrainConfig()
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.task = task
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.remove_partial_files()
        on_gpu = self.device.type == "cuda"
        self.params = list(model.parameters())
        self.optimizer = adam(self.params, c, fused=on_gpu)
        self.train_seconds = 0.0  # the run's training time so far, validations included, across resumes
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: self.lr_at(step + 1, d_model))
        self.amp = Precision(c.precision, self.device)
        self.eval_model, self.parallel_model, self.run_model = wrapped(model, self.device, c.compile, self.world)
        self.step = self.epoch = self.batch_in_epoch = 0
        self.history: list[dict] = []
        self.extra_state: dict = {}  # entries every checkpoint carries besides the state (the CLI's tokenizer)
        torch.manual_seed(c.seed)

    def lr_at(self, step: int, d_model: int) -> float:
        """The learning rate of optimizer step ``step`` (from 1), as the config's schedule sets it."""
        c = self.config
        if c.schedule == "time_linear":
            return time_linear_lr(step, self.train_seconds, 60 * c.max_minutes, d_model, c.warmup, c.lr_factor)
        if c.schedule == "cooldown":  # the budget that ends first: its time or its steps
            spent = [self.train_seconds / (60 * c.max_minutes)] if c.max_minutes else []
            spent += [step / c.max_steps] if c.max_steps else []
            return cooldown_lr(step, max(spent), d_model, c.warmup, c.lr_factor, c.cooldown)
        return noam_lr(step, d_model, c.warmup, c.lr_factor)

    # -- the loop ----------------------------------------------------------------------------
    def total_steps(self) -> int:
        per_epoch = math.ceil(len(self.task.train_batches(0)) / (self.config.grad_accum * self.world))
        total = per_epoch * self.config.epochs
        return min(total, self.config.max_steps) if self.config.max_steps else total

    def train(self) -> list[dict]:
        """Train until ``epochs``, ``max_steps`` or ``max_minutes``; continue from the current state if resumed.

        ``max_minutes`` counts the run's training time across resumes (checkpoints keep it): a run
        stopped after 12 of 20 minutes trains 8 more when resumed. Reaching it ends training as
        ``max_steps`` does: validation, checkpoint, and the history. ``snapshot_minutes`` count the same time.

        Ctrl-C (SIGINT) or SIGTERM, as a cluster scheduler sends it, stops the run cleanly at the
        end of the current step: a checkpoint is written there (with a ``run_dir``) and
        :class:`~transformer_lib.errors.Interrupted` says how to continue.
        """
        with _stop_requests() as stop:
            return self._train(stop)

    def _train(self, stop: list[bool]) -> list[dict]:
        c = self.config
        total, first_step = self.total_steps(), self.step
        began, before = time.monotonic(), self.train_seconds  # before: a resumed run's training time
        budget = 60 * c.max_minutes - before if c.max_minutes else math.inf  # seconds this call may train
        if budget <= 0:
            total = self.step
        marks = [m for m in c.snapshot_minutes if 60 * m > before]  # the snapshots still to take
        progress = _Progress(total, self.step, enabled=c.progress and self.is_main)
        while self.step < total:
            batches = self.task.train_batches(self.epoch)
            while self.batch_in_epoch < len(batches) and self.step < total:
                record = self._next_step(batches)
                elapsed = time.monotonic() - began
                self.train_seconds = before + elapsed
                if c.max_minutes:  # the bar counts to the steps the time budget allows, so its ETA is the budget's
                    progress.total = min(total, first_step + steps_in_time(self.step - first_step, elapsed, budget))
                progress.update(record)
                stop_now, time_up = distributed.sum_across(  # every process stops at once
                    [float(stop[0]), float(elapsed > budget)], self.device
                )
                if stop_now:
                    self._interrupt(progress)
                self._scheduled(progress, marks)
                if time_up:
                    total = self.step  # as if max_steps were here
            if self.batch_in_epoch >= len(batches):
                self._end_epoch(progress)
        progress.close()
        if not any("val_loss" in r and r["step"] == self.step for r in self.history):
            self._validate(progress)  # stopped by max_steps between scheduled validations
        self.save_checkpoint()
        return self.history

    def _next_step(self, batches: Sequence[Sequence[int]]) -> dict:
        """Train on this process's share of the epoch's next step of ``batches``; log the step's record."""
        group = batches[self.batch_in_epoch : self.batch_in_epoch + self.config.grad_accum * self.world]
        start = time.perf_counter()
        record = self.train_step(group[self.rank :: self.world] or group[:1], idle=not group[self.rank :])
        self.batch_in_epoch += len(group)
        record["items_per_s"] = record["items"] / (time.perf_counter() - start)
        self._log(record)
        return record

    def _scheduled(self, progress: _Progress, marks: list[float]) -> None:
        """What the config asks for after this step: a validation, a checkpoint, the next snapshot."""
        c = self.config
        if c.eval_every and self.step % c.eval_every == 0:
            self._validate(progress)
        if c.checkpoint_every and self.step % c.checkpoint_every == 0:
            self.save_checkpoint()
        if marks and self.train_seconds >= 60 * marks[0]:
            path = self.save_snapshot(marks.pop(0), self.train_seconds)
            if path is not None:
                progress.say(f"step {self.step:,}: saved {path.name}")

    def _end_epoch(self, progress: _Progress) -> None:
        self.epoch += 1
        self.batch_in_epoch = 0
        if not self.config.eval_every:
            self._validate(progress)
        if not self.config.checkpoint_every:
            self.save_checkpoint()

    def _validate(self, progress: _Progress) -> None:
        record = self.validate()
        if record:
            progress.say(
                f"step {record['step']:,}: validation loss {record['val_loss']:.3f}, perplexity {record['val_ppl']:.2f}"
            )

    def _interrupt(self, progress: _Progress) -> None:
        """Ctrl-C or SIGTERM: a checkpoint here, and an exception that says how to continue."""
        self.save_checkpoint()
        progress.close()
        where = f"; checkpoint saved in {self.run_dir}: continue with --resume" if self.run_dir else ""
        raise Interrupted(f"stopped at step {self.step}{where}")

    def train_step(self, batches: Sequence[Sequence[int]], idle: bool = False) -> dict:
        """One optimizer step on this process's ``batches`` (lists of example indices).

        Gradients of the task's summed losses are accumulated, then divided by the items of the
        whole step across processes, so the update is the same however the step's batches are
        split. An ``idle`` process (the last step of an epoch can have fewer batches than
        processes) runs one batch with weight 0: every process must take part in the averaging.
        """
        if not self.model.training:  # the first step, and the first after a validation
            self.model.train()
        sums = torch.zeros(2, device=self.device)  # loss, items: summed on the device
        for i, indices in enumerate(batches):
            batch = self.task.make_batch(indices, train=True).to(self.device)
            last = i == len(batches) - 1  # processes average their gradients once, at the last batch
            with self._no_sync(not last), attention_kernels(self.device):
                with self.amp.autocast:
                    loss, count = self.task.loss(self.run_model, batch, train=True)
                self.amp.backward(loss * (0.0 if idle else 1.0))
            if not idle:
                sums += torch.stack([loss.detach().float(), torch.as_tensor(count, device=self.device).float()])
        sums = distributed.sum_tensor(sums)
        grads = [p.grad for p in self.params if p.grad is not None]
        torch._foreach_mul_(grads, self.world / sums[1])  # DistributedDataParallel averaged: undo, divide by items
        self.amp.unscale(self.optimizer)  # fp16: the true gradients, before clipping
        max_norm = self.config.clip_grad or math.inf  # the norm before clipping is logged either way
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        lr = self.scheduler.get_last_lr()[0]
        self.amp.step(self.optimizer)  # fp16: skipped if a gradient overflowed
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        loss_sum, total, grad_norm = torch.cat([sums, grad_norm.float()[None]]).tolist()  # the step's one sync
        return {
            "step": self.step,
            "epoch": self.epoch,
            "loss": loss_sum / total,
            "lr": lr,
            "grad_norm": grad_norm,
            "items": int(total),
        }

    @torch.no_grad()
    def validate(self, log: bool = True) -> dict | None:
        """The task's validation loss per item (cross-entropy per token, for translation), and its exp.

        With several processes, each scores its share of the batches and the sums are added.
        The record goes to ``history`` and metrics.csv unless ``log`` is False.
        """
        batches = self.task.val_batches()
        if not batches:
            return None
        self.model.eval()
        total, count = 0.0, 0
        for indices in batches[self.rank :: self.world]:
            batch = self.task.make_batch(indices, train=False).to(self.device)
            with self.amp.autocast, attention_kernels(self.device):
                loss, items = self.task.loss(self.eval_model, batch, train=False)
            total, count = total + loss.item(), count + int(items)
        total, count = distributed.sum_across([total, float(count)], self.device)
        record = {"step": self.step, "epoch": self.epoch, "val_loss": total / count, "val_ppl": math.exp(total / count)}
        if log:
            self._log(record)
        return record

    def _no_sync(self, skip: bool):
        """Within it, backward() leaves gradients unaveraged across processes (accumulation)."""
        if skip and isinstance(self.parallel_model, DistributedDataParallel):
            return self.parallel_model.no_sync()
        return contextlib.nullcontext()


class _Progress:
    """A training call's progress bar, and the lines a terminal shows above it (a lesson plots its history).

    Where stderr is a file (a sweep's log, ``train ... 2> log``), a redrawn bar would be one line of
    carriage returns, hundreds of kilobytes long: there the progress is a plain line every ``PLAIN_EVERY``
    seconds.
    """

    PLAIN_EVERY = 60.0
    PLAIN_FORMAT = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        # In a notebook, the bar goes to stdout: the book's pages show a cell's stdout before its
        # stderr, which would put the bar after what training printed.
        self.in_notebook = "ipykernel" in sys.modules
        self.plain = enabled and not self.in_notebook and not sys.stderr.isatty()
        self.enabled, self.total, self.initial, self.n = enabled, total, initial, initial
        self.started = self.printed = time.monotonic()
        self.postfix, self.printed_n = "", initial
        self.bar = tqdm(
            total=total,
            initial=initial,
            desc="train",
            disable=not enabled or self.plain,
            file=sys.stdout if self.in_notebook else None,
            dynamic_ncols=not self.in_notebook,
            mininterval=1.0,
        )

    def update(self, record: dict) -> None:
        self.n += 1
        self.postfix = f"items_s={record['items_per_s']:.0f}, loss={record['loss']:.3f}, lr={record['lr']:.2e}"
        if self.plain and time.monotonic() - self.printed >= self.PLAIN_EVERY:
            self._plain_line()
        self.bar.total = self.total
        self.bar.update(1)
        self.bar.set_postfix_str(self.postfix, refresh=False)  # the bar redraws at most every `mininterval` s

    def _plain_line(self) -> None:
        self.printed = now = time.monotonic()
        self.printed_n = self.n
        line = tqdm.format_meter(
            self.n, self.total, now - self.started, prefix="train",
            postfix=self.postfix, initial=self.initial, bar_format=self.PLAIN_FORMAT,
        )  # fmt: skip
        print(line, file=sys.stderr, flush=True)

    def say(self, line: str) -> None:
        if self.plain:
            print(line, flush=True)
        elif self.enabled and not self.in_notebook:
            self.bar.write(line)

    def close(self) -> None:
        if self.plain and self.n != self.printed_n:  # the last step, unless just printed
            self._plain_line()
        self.bar.close()


@contextlib.contextmanager
def _stop_requests():
    """A flag that SIGINT and SIGTERM set (a second Ctrl-C stops at once); handlers restored after."""
    stop = [False]
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return

    def request(signum, frame):
        if stop[0] and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop[0] = True

    previous = {sig: signal.signal(sig, request) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
