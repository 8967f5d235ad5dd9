"""The training loop: any model on any :class:`~transformer_lib.training.tasks.Task` (lesson 9).

The recipe of the paper's section 5: Adam with beta = (0.9, 0.98) and eps = 1e-9; the learning
rate ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``; label smoothing 0.1; batches of about
the same number of tokens. The :class:`Trainer` adds what a real run needs: gradient clipping and
accumulation, bf16 autocast and ``torch.compile`` on a GPU (no-ops on a CPU), periodic validation,
a CSV log, and checkpoints from which a run resumes exactly. It composes the parts of this
folder: the update (:mod:`.optimizer`), the progress bar (:mod:`.progress`) and the resume state
(:mod:`.state`), each handed what it needs; the run's files are :mod:`transformer_lib.checkpoint`'s.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from transformer_lib.attention import attention_kernels
from transformer_lib.checkpoint import Checkpoint, Position, RunFolder, RunRecord, Snapshot
from transformer_lib.config import TrainConfig
from transformer_lib.errors import Interrupted
from transformer_lib.training import distributed
from transformer_lib.training.optimizer import Update
from transformer_lib.training.progress import Progress, steps_in_time
from transformer_lib.training.state import config_dict, restore, training_state
from transformer_lib.training.tasks import Task, check_trainable, summed_loss


class Trainer:
    """Trains any model on any task, as a :class:`~transformer_lib.config.TrainConfig` says.

    The model needs only a ``d_model`` (the warm-up scales with it); the task says what a batch
    and its loss are. ``history`` holds a record per step and per validation; a ``run_dir`` also
    gets them in ``metrics.csv``, and the checkpoints. Under ``torchrun`` process ``r`` of N takes
    batches ``r, r + N, ...`` of each step: N processes with ``grad_accum=1`` compute the update of
    one with ``grad_accum=N``. Only the main process writes files.
    """

    def __init__(
        self,
        model: nn.Module,
        task: Task,
        config: TrainConfig | None = None,
        run_dir: str | os.PathLike | None = None,
        device: torch.device | str = "cpu",
        run: RunRecord | None = None,  # the train command's record, which every checkpoint carries
    ) -> None:
        d_model = check_trainable(model, task)
        self.config = c = config or TrainConfig()
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.task = task
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.folder = RunFolder(run_dir, is_main=self.rank == 0)
        self.update = Update(list(model.parameters()), c, d_model, self.device)
        self.amp = self.update.amp
        self.wrapped = distributed.wrap(model, self.device, c, self.world)  # what training steps run through
        self.position = Position()  # steps, epoch, batch in it, seconds of training: across resumes
        self.history: list[dict] = []
        self.run = run
        torch.manual_seed(c.seed)

    def train(self) -> list[dict]:
        """Train until ``epochs``, ``max_steps`` or ``max_minutes``; continue from the current state if resumed.

        ``max_minutes`` and ``snapshot_minutes`` count training time across resumes: a run stopped
        after 12 of 20 minutes trains 8 more. Ctrl-C or SIGTERM stops at the end of the step, with a
        checkpoint (given a ``run_dir``) and :class:`~transformer_lib.errors.Interrupted` saying how to continue.
        """
        with distributed.stop_requests() as stop:
            return self._train(stop)

    def _train(self, stop: list[bool]) -> list[dict]:
        c, at = self.config, self.position
        total = c.epochs * math.ceil(len(self.task.train_batches(0)) / (c.grad_accum * self.world))  # steps
        total, first_step = min(total, c.max_steps or total), at.step
        began, before = time.monotonic(), at.seconds  # before: a resumed run's training time
        budget = 60 * c.max_minutes - before if c.max_minutes else math.inf  # seconds this call may train
        if budget <= 0:
            total = at.step
        marks = [m for m in c.snapshot_minutes if 60 * m > before]  # the snapshots still to take
        progress = Progress(total, at.step, enabled=c.progress and self.rank == 0)
        while at.step < total:
            batches = self.task.train_batches(at.epoch)
            while at.batch_in_epoch < len(batches) and at.step < total:
                record = self._next_step(batches)
                elapsed = time.monotonic() - began
                at.seconds = before + elapsed
                if c.max_minutes:  # the bar counts to the steps the time budget allows, so its ETA is the budget's
                    progress.total = min(total, first_step + steps_in_time(at.step - first_step, elapsed, budget))
                progress.update(record)
                stop_now, time_up = distributed.sum_across(  # every process stops at once
                    [float(stop[0]), float(elapsed > budget)], self.device
                )
                if stop_now:
                    self._interrupt(progress)
                self._scheduled(progress, marks)
                if time_up:
                    total = at.step  # as if max_steps were here
            if at.batch_in_epoch >= len(batches):
                self._end_epoch(progress)
        progress.close()
        if not any("val_loss" in r and r["step"] == at.step for r in self.history):
            self.validate(progress=progress)  # stopped by max_steps between scheduled validations
        self.save_checkpoint()
        return self.history

    def _next_step(self, batches: Sequence[Sequence[int]]) -> dict:
        """Train on this process's share of the epoch's next step of ``batches``; log the step's record."""
        at = self.position
        group = batches[at.batch_in_epoch : at.batch_in_epoch + self.config.grad_accum * self.world]
        start = time.perf_counter()
        record = self.train_step(group[self.rank :: self.world] or group[:1], idle=not group[self.rank :])
        at.batch_in_epoch += len(group)
        record["items_per_s"] = record["items"] / (time.perf_counter() - start)
        self._log(record)
        return record

    def _scheduled(self, progress: Progress, marks: list[float]) -> None:
        """What the config asks for after this step: a validation, a checkpoint, the next snapshot."""
        c, at = self.config, self.position
        if c.eval_every and at.step % c.eval_every == 0:
            self.validate(progress=progress)
        if c.checkpoint_every and at.step % c.checkpoint_every == 0:
            self.save_checkpoint()
        if marks and at.seconds >= 60 * marks[0]:
            path = self.save_snapshot(marks.pop(0), at.seconds)
            if path is not None:
                progress.say(f"step {at.step:,}: saved {path.name}")

    def _end_epoch(self, progress: Progress) -> None:
        self.position.epoch, self.position.batch_in_epoch = self.position.epoch + 1, 0
        if not self.config.eval_every:
            self.validate(progress=progress)
        if not self.config.checkpoint_every:
            self.save_checkpoint()

    def _interrupt(self, progress: Progress) -> None:
        """Ctrl-C or SIGTERM: a checkpoint here, and an exception that says how to continue."""
        self.save_checkpoint()
        progress.close()
        where = f"; checkpoint saved in {self.folder.path}: continue with --resume" if self.folder.path else ""
        raise Interrupted(f"stopped at step {self.position.step}{where}")

    def train_step(self, batches: Sequence[Sequence[int]], idle: bool = False) -> dict:
        """One optimizer step on this process's ``batches`` (lists of example indices), and its record.

        Summed losses' gradients are divided by the items of the whole step across processes: the
        update is the same however the step is split. An ``idle`` process (an epoch's last step can
        have fewer batches than processes) runs one batch at weight 0, to take part in the averaging.
        """
        stats, lr = self.launch_step(batches, idle)
        loss, items, grad_norm = stats.tolist()  # the step's one wait for the device
        at = self.position
        record = {"step": at.step, "epoch": at.epoch, "loss": loss / items, "lr": lr, "grad_norm": grad_norm}
        return {**record, "items": int(items)}

    def launch_step(self, batches: Sequence[Sequence[int]], idle: bool = False) -> tuple[torch.Tensor, float]:
        """:meth:`train_step` without reading its numbers back: on a GPU the host returns as soon as the
        step's kernels are queued. Returns the summed loss, the items and the gradient norm, still on
        the device, and the learning rate."""
        distributed.begin_step(self.model, self.device, self.config.cuda_graphs)
        sums = torch.zeros(2, device=self.device)  # loss, items: summed on the device
        for i, indices in enumerate(batches):
            batch = self.task.make_batch(indices, train=True).to(self.device)
            last = i == len(batches) - 1  # processes average their gradients once, at the last batch
            with distributed.no_sync(self.wrapped, not last), attention_kernels(self.device):
                with self.amp.autocast:
                    loss, count = self.task.loss(self.wrapped, batch, train=True)
                self.amp.backward(loss * (0.0 if idle else 1.0))
            if not idle:
                sums += torch.stack([loss.detach().float(), torch.as_tensor(count, device=self.device).float()])
        sums = distributed.sum_tensor(sums)
        # DistributedDataParallel averaged the gradients: undo, then divide by the step's items
        lr, grad_norm = self.update.apply(self.world / sums[1], self.position.seconds)
        self.position.step += 1
        return torch.cat([sums, grad_norm.float()[None]]), lr

    @torch.no_grad()
    def validate(self, log: bool = True, progress: Progress | None = None) -> dict | None:
        """The task's validation loss per item (per token, for translation) and its exp, each process
        scoring its share; the record goes to ``history`` and metrics.csv unless ``log`` is False."""
        batches = self.task.val_batches()
        if not batches:
            return None
        self.model.eval()
        with self.amp.autocast, attention_kernels(self.device):
            # each process validates alone, without CUDA graphs: the compiled model, or else uncompiled
            model = self.model if self.world > 1 or self.config.cuda_graphs else self.wrapped
            sums = summed_loss(self.task, model, batches[self.rank :: self.world], self.device)
        total, count = distributed.sum_across(sums, self.device)
        at, loss = self.position, total / count
        record = {"step": at.step, "epoch": at.epoch, "val_loss": loss, "val_ppl": math.exp(loss)}
        if log:
            self._log(record)
        if progress is not None:
            progress.say(f"step {at.step:,}: validation loss {loss:.3f}, perplexity {record['val_ppl']:.2f}")
        return record

    def _log(self, record: dict) -> None:
        self.history.append(record)
        self.folder.log(record)

    def checkpoint(self, snapshot: Snapshot | None = None) -> Checkpoint:
        """The model's weights, config and run record; with the moment of a ``snapshot``, or else everything a
        resumed run needs (optimizer, schedule, position, every process's random states: all take part)."""
        state = None if snapshot else training_state(self.config, self.update, dataclasses.replace(self.position))
        return Checkpoint(self.model.state_dict(), config_dict(self.model), self.run, state, snapshot)

    def load_state(self, checkpoint: Checkpoint) -> None:
        """Continue from a checkpoint written by :meth:`save_checkpoint`."""
        self.position = dataclasses.replace(restore(checkpoint, self.model, self.update, self.world, self.rank))
        self.folder.forget_metrics_after(self.position.step)

    def save_checkpoint(self) -> Path | None:
        """Write :meth:`checkpoint` to run_dir/checkpoint.pt, keeping the last ``keep_last`` weights for averaging
        (see :class:`~transformer_lib.checkpoint.RunFolder`); every process takes part in gathering it."""
        return self.folder.save_checkpoint(self.checkpoint(), self.config.keep_last)

    def save_snapshot(self, minutes: float, seconds: float | None = None) -> Path | None:
        """A checkpoint, then ``snapshot-<minutes>min.pt``: the model a run stopped after ``minutes`` would
        leave (the mean of the last ``keep_last`` weights). ``train`` scores each: a BLEU-per-minute curve."""
        self.save_checkpoint()
        snapshot = self.checkpoint(Snapshot(minutes, seconds, self.position.step))
        return self.folder.save_snapshot(snapshot, self.config.keep_last)
