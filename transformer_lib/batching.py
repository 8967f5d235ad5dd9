"""Sentence pairs to padded batches, grouped by length under a token budget (lesson 9; section 5.1).

The paper batches "by approximate sequence length", about 25,000 source and 25,000 target tokens
a batch. Sorting by length before cutting batches keeps the padding small; shuffling the batches
(not the sentences) keeps the order random. A batch of ``n`` pairs whose longest side has
``L`` tokens costs ``n * L`` token slots, padding included, and that is what the budget limits.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from transformer_lib.config import BOS_ID, EOS_ID, PAD_ID
from transformer_lib.errors import InvalidValue

if TYPE_CHECKING:  # the tokenizer needs SentencePiece, which batching itself does not
    from transformer_lib.tokenizer import Tokenizer


@dataclass
class Batch:
    """One training batch: the source, the decoder's input and the labels it must predict.

    src:     (batch, src_len)  x1 .. xm <eos>
    tgt_in:  (batch, tgt_len)  <bos> y1 .. yn   (teacher forcing: the target shifted right)
    tgt_out: (batch, tgt_len)  y1 .. yn <eos>
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str) -> Batch:
        """The batch on ``device``. To a GPU it goes from pinned memory, so the copy need not wait for
        the GPU's earlier work and the CPU goes on preparing the next step."""
        pin = torch.device(device).type == "cuda"
        parts = (self.src, self.tgt_in, self.tgt_out)
        return Batch(*((t.pin_memory() if pin else t).to(device, non_blocking=True) for t in parts))

    @property
    def n_tokens(self) -> int:
        """Target tokens to predict (padding excluded): what the loss averages over."""
        return int((self.tgt_out != PAD_ID).sum())


def encode_pairs(pairs: Sequence[tuple[str, str]], tokenizer: Tokenizer) -> list[tuple[list[int], list[int]]]:
    """Sentence pairs to id pairs: the source ends with <eos>; the target is bare (collate frames it)."""
    sources = tokenizer.encode_batch([s for s, _ in pairs], eos=True)
    targets = tokenizer.encode_batch([t for _, t in pairs])
    return list(zip(sources, targets, strict=True))


def round_up(n: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is at least ``n``."""
    return -(-n // multiple) * multiple


def pad_ids(rows: Sequence[Sequence[int]], multiple: int = 1) -> Tensor:
    """Id lists of different lengths -> (len(rows), longest) tensor, padded with <pad>.

    ``multiple`` > 1 pads the length further, up to a multiple of it: fewer distinct batch shapes,
    which a GPU's per-shape work (kernel choice, compiled graphs) repeats less often.
    """
    longest = round_up(max(map(len, rows)), multiple)
    return torch.tensor([[*row, *[PAD_ID] * (longest - len(row))] for row in rows], dtype=torch.long)  # one copy


def collate(examples: Sequence[tuple[list[int], list[int]]], multiple: int = 1) -> Batch:
    """Pad a list of (source ids, target ids) into a :class:`Batch` (lengths up to a ``multiple``)."""
    return Batch(
        src=pad_ids([src for src, _ in examples], multiple),
        tgt_in=pad_ids([[BOS_ID, *tgt] for _, tgt in examples], multiple),
        tgt_out=pad_ids([[*tgt, EOS_ID] for _, tgt in examples], multiple),
    )


def example_size(example: tuple[list[int], list[int]]) -> int:
    """Token slots one pair needs in a batch: its longer side (the target gains <bos>/<eos>)."""
    src, tgt = example
    return max(len(src), len(tgt) + 1)


def token_batches(
    examples: Sequence,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    size: Callable[..., int] = example_size,
) -> list[list[int]]:
    """Indices of ``examples`` cut into batches of at most ``max_tokens`` padded token slots.

    ``size(example)`` is the token slots one example needs: :func:`example_size` for sentence
    pairs, ``len`` for single sequences (lesson 13's language models). Every example appears in
    exactly one batch. Examples are sorted by size and cut greedily. With ``shuffle``, ties are
    broken at random and the batches shuffled, both with ``seed``; without, ties keep their order
    and the batches their sizes' order. The same seed gives the same batches, which is what makes
    resuming exact.
    """
    rng = random.Random(seed)
    sizes = [size(e) for e in examples]
    too_long = [i for i, n in enumerate(sizes) if n > max_tokens]
    if too_long:
        raise InvalidValue(
            f"{len(too_long)} examples need more than max_tokens={max_tokens} token slots on their own "
            f"(the longest needs {max(sizes)}); raise max_tokens or drop long sentences"
        )
    tie_break = [rng.random() for _ in examples] if shuffle else [0.0] * len(examples)
    order = sorted(range(len(examples)), key=lambda i: (sizes[i], tie_break[i]))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * max(sizes[current[-1]], sizes[i]) > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches


def padding_fraction(examples: Sequence[tuple[list[int], list[int]]], batches: list[list[int]]) -> float:
    """Share of the token slots of ``batches`` (source and target sides) that are padding."""
    slots = real = 0
    for indices in batches:
        src = [len(examples[i][0]) for i in indices]
        tgt = [len(examples[i][1]) + 1 for i in indices]
        slots += len(indices) * (max(src) + max(tgt))
        real += sum(src) + sum(tgt)
    return 1 - real / slots
