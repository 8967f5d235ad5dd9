"""Training: label-smoothed loss, the warm-up schedule, and a trainer with checkpoints (lesson 9).

The recipe of the paper's section 5: Adam with beta = (0.9, 0.98) and eps = 1e-9; the learning
rate ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``; label smoothing 0.1; batches of about
the same number of tokens. The :class:`Trainer` adds what a real run needs: gradient clipping and
accumulation, bf16 autocast and ``torch.compile`` on a GPU (no-ops on a CPU), periodic validation,
a CSV log, and checkpoints from which a run resumes exactly.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from transformer_lib.batching import Batch, collate, token_batches
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.model import Transformer
from transformer_lib.tokenizer import PAD_ID


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


@dataclass(frozen=True)
class TrainConfig:
    """How to train. Defaults follow the paper where it applies to a small corpus."""

    max_tokens: int = 4096  # token slots per batch, padding included (the paper: ~25,000 a side)
    epochs: int = 10
    max_steps: int | None = None  # stop earlier than ``epochs`` if set
    lr_factor: float = 1.0  # multiplies the paper's schedule
    warmup: int = 4000
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad: float | None = 1.0
    grad_accum: int = 1  # batches per optimizer step
    bf16: bool = False  # bf16 autocast; only on CUDA, a no-op on CPU
    compile: bool = False  # torch.compile the model; only on CUDA, a no-op on CPU
    eval_every: int = 0  # steps between validations; 0: at the end of each epoch
    checkpoint_every: int = 0  # steps between checkpoints; 0: at the end of each epoch
    keep_last: int = 0  # also keep the weights of the last N checkpoints, for averaging (weights-step*.pt)
    seed: int = 0
    progress: bool = True  # the tqdm progress bar

    def __post_init__(self) -> None:
        if not isinstance(self.keep_last, int) or self.keep_last < 0:
            raise InvalidValue(f"keep_last must be a non-negative integer, got {self.keep_last!r}")
        for name in ("max_tokens", "epochs", "warmup", "grad_accum"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InvalidValue(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise InvalidValue(f"max_steps must be a positive integer or None, got {self.max_steps!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise InvalidValue(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        if self.lr_factor <= 0:
            raise InvalidValue(f"lr_factor must be positive, got {self.lr_factor!r}")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise InvalidValue(f"betas must be two numbers in [0, 1), got {self.betas!r}")


Example = tuple[list[int], list[int]]


class Trainer:
    """Trains a :class:`Transformer` on encoded sentence pairs; see :class:`TrainConfig`.

    ``history`` holds one record per optimizer step (loss, learning rate, tokens) and one per
    validation; with a ``run_dir`` they also go to ``metrics.csv`` there, and checkpoints to
    ``checkpoint.pt``.
    """

    def __init__(
        self,
        model: Transformer,
        train: Sequence[Example],
        val: Sequence[Example] | None = None,
        config: TrainConfig | None = None,
        run_dir: str | os.PathLike | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.config = c = config or TrainConfig()
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.train_examples, self.val_examples = train, val
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.optimizer = torch.optim.Adam(
            model.parameters(), lr=1.0, betas=c.betas, eps=c.adam_eps, weight_decay=c.weight_decay
        )
        d_model = model.config.d_model
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: noam_lr(step + 1, d_model, c.warmup, c.lr_factor)
        )
        on_gpu = self.device.type == "cuda"
        self.autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=c.bf16 and on_gpu)
        self.run_model = torch.compile(model, dynamic=True) if c.compile and on_gpu else model
        self.step = self.epoch = self.batch_in_epoch = 0
        self.history: list[dict] = []
        self.extra_state: dict = {}  # entries every checkpoint carries besides the state (the CLI's tokenizer)
        torch.manual_seed(c.seed)

    # -- the loop ----------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The batches of one epoch: the same for the same seed and epoch, hence exact resumption."""
        return token_batches(self.train_examples, self.config.max_tokens, shuffle=True, seed=self.config.seed + epoch)

    def total_steps(self) -> int:
        per_epoch = math.ceil(len(self.epoch_batches(0)) / self.config.grad_accum)
        total = per_epoch * self.config.epochs
        return min(total, self.config.max_steps) if self.config.max_steps else total

    def train(self) -> list[dict]:
        """Train until ``epochs`` or ``max_steps``; continue from the current state if resumed."""
        c = self.config
        total = self.total_steps()
        bar = tqdm(
            total=total, initial=self.step, desc="train", disable=not c.progress, dynamic_ncols=True, mininterval=1.0
        )
        while self.step < total:
            batches = self.epoch_batches(self.epoch)
            while self.batch_in_epoch < len(batches) and self.step < total:
                group = batches[self.batch_in_epoch : self.batch_in_epoch + c.grad_accum]
                start = time.perf_counter()
                record = self.train_step([collate([self.train_examples[i] for i in b]) for b in group])
                self.batch_in_epoch += len(group)
                record["tokens_per_s"] = record["tokens"] / (time.perf_counter() - start)
                self._log(record)
                bar.update(1)
                bar.set_postfix(
                    loss=f"{record['loss']:.3f}",
                    lr=f"{record['lr']:.2e}",
                    tok_s=f"{record['tokens_per_s']:.0f}",
                    refresh=False,  # the bar redraws at most every `mininterval` seconds
                )
                if c.eval_every and self.step % c.eval_every == 0:
                    self.validate()
                if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                    self.save_checkpoint()
            if self.batch_in_epoch >= len(batches):  # the epoch is complete
                self.epoch += 1
                self.batch_in_epoch = 0
                if not c.eval_every:
                    self.validate()
                if not c.checkpoint_every:
                    self.save_checkpoint()
        bar.close()
        if not any("val_loss" in r and r["step"] == self.step for r in self.history):
            self.validate()  # stopped by max_steps between scheduled validations
        self.save_checkpoint()
        return self.history

    def train_step(self, batches: list[Batch]) -> dict:
        """One optimizer step on ``batches`` (``grad_accum`` of them in ``train``): the loss is
        summed over their target tokens and divided by their number; returns the step's record."""
        self.model.train()
        tokens = sum(b.n_tokens for b in batches)
        loss_sum = 0.0
        for batch in batches:
            batch = batch.to(self.device)
            with self.autocast:
                logits = self.run_model(batch.src, batch.tgt_in)
            loss = label_smoothed_cross_entropy(logits, batch.tgt_out, self.config.label_smoothing, reduction="sum")
            (loss / tokens).backward()
            loss_sum += loss.item()
        if self.config.clip_grad:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_grad)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return {"step": self.step, "epoch": self.epoch, "loss": loss_sum / tokens, "lr": lr, "tokens": tokens}

    @torch.no_grad()
    def validate(self, log: bool = True) -> dict | None:
        """Mean cross-entropy per target token on the validation pairs (no smoothing), and perplexity.

        The record goes to ``history`` and metrics.csv unless ``log`` is False.
        """
        if not self.val_examples:
            return None
        self.model.eval()
        total, count = 0.0, 0
        for indices in token_batches(self.val_examples, self.config.max_tokens, shuffle=False):
            batch = collate([self.val_examples[i] for i in indices]).to(self.device)
            with self.autocast:
                logits = self.run_model(batch.src, batch.tgt_in)
            total += F.cross_entropy(
                logits.float().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID, reduction="sum"
            ).item()
            count += batch.n_tokens
        record = {"step": self.step, "epoch": self.epoch, "val_loss": total / count, "val_ppl": math.exp(total / count)}
        if log:
            self._log(record)
        return record

    def _log(self, record: dict) -> None:
        self.history.append(record)
        if self.run_dir is None:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / "metrics.csv"
        fields = ["step", "epoch", "loss", "lr", "tokens", "tokens_per_s", "val_loss", "val_ppl"]
        new = not path.exists()
        with open(path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            if new:
                writer.writeheader()
            writer.writerow(record)

    # -- checkpoints ---------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything a resumed run needs: weights, optimizer, schedule, position, random states."""
        return {
            "model": self.model.state_dict(),
            "model_config": dataclasses.asdict(self.model.config),
            "train_config": dataclasses.asdict(self.config),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "position": {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch},
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "python": random.getstate(),
                "numpy": _numpy_state_to_list(np.random.get_state()),  # noqa: NPY002 -- the global state
            },
        }

    def save_checkpoint(self, path: str | os.PathLike | None = None, **extra) -> Path | None:
        """Write :meth:`state` (plus ``extra`` entries) atomically; by default to run_dir/checkpoint.pt.

        With ``keep_last`` set, the run folder also keeps the weights of the last ``keep_last``
        default checkpoints as ``weights-step<step>.pt``, which :func:`average_checkpoints` reads.
        """
        if path is None:
            if self.run_dir is None:
                return None
            path = self.run_dir / "checkpoint.pt"
            if self.config.keep_last:
                save_atomically(
                    {"model": self.model.state_dict(), "step": self.step},
                    self.run_dir / f"weights-step{self.step:07d}.pt",
                )
                for old in kept_weights(self.run_dir)[: -self.config.keep_last]:
                    old.unlink()
        return save_atomically({**self.state(), **self.extra_state, **extra}, path)

    def load_state(self, state: dict) -> None:
        """Continue from a checkpoint written by :meth:`save_checkpoint`."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.batch_in_epoch = (state["position"][k] for k in ("step", "epoch", "batch_in_epoch"))
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        random.setstate(rng["python"])
        name, keys, pos, has_gauss, cached = rng["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  # noqa: NPY002


def _numpy_state_to_list(state: tuple) -> list:
    """NumPy's RNG state with its array as a list, so that checkpoints load with weights_only=True."""
    name, keys, pos, has_gauss, cached = state
    return [name, keys.tolist(), pos, has_gauss, cached]


def save_atomically(obj: object, path: str | os.PathLike) -> Path:
    """torch.save to a temporary file in the same folder, then rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


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
    return torch.load(path, map_location=map_location, weights_only=True)
