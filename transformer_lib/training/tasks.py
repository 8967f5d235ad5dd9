"""What a model learns, separated from how it is trained: the :class:`Task` contract and the losses.

The :class:`~transformer_lib.training.trainer.Trainer` runs the loop (optimizer, schedule, clipping,
accumulation, autocast, compile, validation, logging, checkpoints, several processes) and knows
nothing about what a batch holds or how a loss is computed: a task tells it. Translation is one
task; a language model, a masked-language model or an image classifier is another, trained by
the same loop. The losses live here too: lesson 9's :func:`label_smoothed_cross_entropy`, and the
fused :func:`token_cross_entropy` that every token-predicting task trains with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lib.batching import Batch, collate, example_size, round_up, token_batches
from transformer_lib.config import PAD_ID, TaskConfig
from transformer_lib.errors import InvalidType, InvalidValue


class Task(Protocol):
    """The contract between a training problem and the :class:`~transformer_lib.training.trainer.Trainer`.

    Batches are lists of example indices, so that a run can resume exactly: ``train_batches(epoch)``
    must return the same batches every time it is called with the same epoch. A batch object
    (from :meth:`make_batch`) must have ``.to(device)``.
    """

    def train_batches(self, epoch: int) -> Sequence[Sequence[int]]:
        """The batches of one training epoch, in the order they are used."""
        ...

    def val_batches(self) -> Sequence[Sequence[int]]:
        """The validation batches (empty if there is no validation set)."""
        ...

    def make_batch(self, indices: Sequence[int], train: bool):
        """The examples ``indices`` of the training (``train=True``) or validation set, as one batch."""
        ...

    def loss(self, model: nn.Module, batch, train: bool) -> tuple[Tensor, int | Tensor]:
        """The loss *summed* over the batch's items, and how many items it covers (a number, or a
        0-dim tensor counted on the device, which the trainer need not wait for).

        The trainer divides by the items of the whole step (all accumulated batches, all
        processes), so every item weighs the same however the step was split. ``train=False``
        is the validation loss (say, without label smoothing).
        """
        ...


TASK_METHODS = tuple(name for name, value in vars(Task).items() if callable(value) and not name.startswith("_"))


def missing_methods(task: object) -> list[str]:
    """The methods of the :class:`Task` contract that ``task`` lacks, looked up as a call finds them.

    The Trainer checks a task with this, not with ``isinstance`` on a runtime-checkable Protocol: from
    Python 3.12 on that looks past ``__getattr__``, so a task that wraps another and hands it every
    call would be refused there and accepted on 3.10 and 3.11.
    """
    return [name for name in TASK_METHODS if not callable(getattr(task, name, None))]


def check_trainable(model: nn.Module, task: Task) -> int:
    """The model's ``d_model`` (the warm-up schedule scales with it), or one clear error."""
    missing = missing_methods(task)
    if missing:
        raise InvalidType(
            f"task must meet the Task contract (transformer_lib.training.tasks): {type(task).__name__} has no "
            + ", ".join(missing)
        )
    d_model = getattr(model, "d_model", None)
    if not isinstance(d_model, int):
        raise InvalidValue(f"{type(model).__name__} has no integer d_model, which the warm-up schedule scales with")
    return d_model


def summed_loss(task: Task, model: nn.Module, batches: Sequence[Sequence[int]], device: torch.device) -> list[float]:
    """The task's validation loss summed over ``batches``, and their items (the caller sets no_grad, autocast)."""
    total, count = 0.0, 0
    for indices in batches:
        loss, items = task.loss(model, task.make_batch(indices, train=False).to(device), train=False)
        total, count = total + loss.item(), count + int(items)
    return [total, float(count)]


Example = tuple[list[int], list[int]]
"""One training example: the source ids and the target ids (lists of token ids)."""


def token_cross_entropy(logits: Tensor, target: Tensor, label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """The loss of every task that predicts tokens: cross-entropy of (batch, seq, vocab) ``logits``
    against (batch, seq) ``target`` ids, summed over the tokens that are not padding, and their number.

    The number stays a 0-dim tensor on the logits' device: reading it back to Python would make the
    CPU wait for the GPU to finish the forward pass before it could launch the backward.
    """
    loss = F.cross_entropy(
        logits.float().flatten(0, 1),
        target.flatten(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    return loss, (target != PAD_ID).sum()


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


class TranslationTask:
    """Sentence pairs (source ids ending in <eos>, bare target ids) for an encoder-decoder model.

    Batches are cut under a budget of ``max_tokens`` token slots, sorted by length and shuffled
    per epoch with ``seed + epoch`` (lesson 9); with ``pad_multiple`` > 1 lengths are padded up to
    a multiple of it, and the budget counts the padded slots. The training loss is cross-entropy with
    ``label_smoothing``, through PyTorch's fused ``F.cross_entropy`` (equal to lesson 9's
    :func:`label_smoothed_cross_entropy`, which the tests check); the
    validation loss is plain cross-entropy. Items are target tokens, padding excluded.
    """

    def __init__(
        self,
        train: Sequence[Example],
        val: Sequence[Example] | None = None,
        max_tokens: int = TaskConfig.max_tokens,
        label_smoothing: float = TaskConfig.label_smoothing,
        seed: int = 0,
        pad_multiple: int = TaskConfig.pad_multiple,
    ) -> None:
        if not train:
            raise InvalidValue("the training set is empty: there is nothing to train on")
        self.train, self.val, self.seed = train, val or [], seed
        self.config = TaskConfig(max_tokens, label_smoothing, pad_multiple)  # checks them

    @classmethod
    def from_config(
        cls, train: Sequence[Example], val: Sequence[Example] | None, config: TaskConfig, seed: int = 0
    ) -> TranslationTask:
        """The task a run config's ``task`` section describes (the keyword form takes its fields one by one)."""
        return cls(train, val, config.max_tokens, config.label_smoothing, seed, config.pad_multiple)

    def _size(self, example: Example) -> int:
        return round_up(example_size(example), self.config.pad_multiple)

    def train_batches(self, epoch: int) -> list[list[int]]:
        return token_batches(self.train, self.config.max_tokens, shuffle=True, seed=self.seed + epoch, size=self._size)

    def val_batches(self) -> list[list[int]]:
        return token_batches(self.val, self.config.max_tokens, shuffle=False, size=self._size) if self.val else []

    def make_batch(self, indices: Sequence[int], train: bool) -> Batch:
        examples = self.train if train else self.val
        return collate([examples[i] for i in indices], self.config.pad_multiple)

    def loss(self, model: nn.Module, batch: Batch, train: bool) -> tuple[Tensor, Tensor]:
        logits = model(batch.src, batch.tgt_in)  # (batch, tgt_len, vocab)
        return token_cross_entropy(logits, batch.tgt_out, self.config.label_smoothing if train else 0.0)


@dataclass
class LabelledBatch:
    """Inputs (token ids or images) and what the model must predict from them: class labels, or
    (for a masked language model) the hidden tokens."""

    inputs: Tensor
    labels: Tensor

    def to(self, device: torch.device | str) -> LabelledBatch:
        return LabelledBatch(self.inputs.to(device), self.labels.to(device))


class ClassificationTask:
    """One label per example: (N, ...) ``inputs`` (images, or token ids padded on the right) and (N,) ``labels``.

    Batches of ``batch_size`` examples in a new random order every epoch (``seed + epoch``); token
    batches are cut to their longest row. The loss is cross-entropy; its items are examples.
    """

    def __init__(
        self,
        inputs: Tensor,
        labels: Tensor,
        val_inputs: Tensor | None = None,
        val_labels: Tensor | None = None,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        if len(inputs) == 0:
            raise InvalidValue("the training set is empty: there is nothing to train on")
        for x, y in ((inputs, labels), (val_inputs, val_labels)):
            if (x is None) != (y is None) or (x is not None and len(x) != len(y)):
                raise InvalidValue("inputs and labels must come in pairs of equal length")
        if batch_size < 1:
            raise InvalidValue(f"batch_size must be a positive integer, got {batch_size!r}")
        self.sets = {True: (inputs, labels), False: (val_inputs, val_labels)}
        self.batch_size, self.seed = batch_size, seed

    def _chunks(self, order: list[int]) -> list[list[int]]:
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def train_batches(self, epoch: int) -> list[list[int]]:
        order = torch.randperm(len(self.sets[True][0]), generator=torch.Generator().manual_seed(self.seed + epoch))
        return self._chunks(order.tolist())

    def val_batches(self) -> list[list[int]]:
        val_inputs = self.sets[False][0]
        return self._chunks(list(range(len(val_inputs)))) if val_inputs is not None else []

    def make_batch(self, indices: Sequence[int], train: bool) -> LabelledBatch:
        inputs, labels = self.sets[train]
        x = inputs[list(indices)]
        if not x.is_floating_point():  # token ids: drop the columns that are padding in every row
            x = x[:, : int((x != PAD_ID).sum(dim=1).max())]
        return LabelledBatch(x, labels[list(indices)])

    def loss(self, model: nn.Module, batch: LabelledBatch, train: bool) -> tuple[Tensor, int]:
        return F.cross_entropy(model(batch.inputs).float(), batch.labels, reduction="sum"), len(batch.labels)


@torch.no_grad()
def accuracy(model: nn.Module, inputs: Tensor, labels: Tensor, batch_size: int = 256) -> float:
    """Share of ``inputs`` whose most probable class is the label (the model in eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    hits = sum(
        int((model(inputs[i : i + batch_size].to(device)).argmax(-1) == labels[i : i + batch_size].to(device)).sum())
        for i in range(0, len(inputs), batch_size)
    )
    return hits / len(inputs)
