"""Encoder-only: a BERT-style masked language model and its classifier (lesson 13; Devlin et al., 2019).

Keep the encoder alone, let every position attend to every other (padding only is masked), and
train it to fill in hidden tokens: 15 % of the tokens are chosen, and of those 80 % become
``<mask>``, 10 % a random token and 10 % stay as they are, so that the model cannot learn that
only ``<mask>`` positions matter. The first position's output then summarises the sentence for
a classifier fine-tuned on a small labelled task.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from transformer_lib.attention import padding_mask
from transformer_lib.batching import pad_ids
from transformer_lib.config import PAD_ID
from transformer_lib.errors import InvalidValue
from transformer_lib.family.gpt import LanguageModelTask
from transformer_lib.model import SingleStack
from transformer_lib.training.tasks import LabelledBatch, token_cross_entropy


class BERT(SingleStack):
    """Token ids in; contextual vectors (:meth:`encode`) or masked-token logits (``forward``) out."""

    def encode(self, tokens: Tensor) -> Tensor:
        """(batch, seq) ids -> (batch, seq, d_model); every position sees every non-padding position."""
        return self.hidden(tokens, padding_mask(tokens, PAD_ID))

    def forward(self, tokens: Tensor) -> Tensor:
        """(batch, seq) ids -> logits (batch, seq, vocab_size) for the token at each position."""
        return self.generator(self.encode(tokens))


class SequenceClassifier(nn.Module):
    """A linear layer on the first position's vector (BERT's ``[CLS]``): (batch, seq) ids -> (batch, n_classes)."""

    def __init__(self, encoder: BERT, n_classes: int) -> None:
        super().__init__()
        if n_classes < 2:
            raise InvalidValue(f"a classifier needs at least 2 classes, got {n_classes}")
        self.encoder = encoder
        self.d_model = encoder.d_model
        self.dropout = nn.Dropout(encoder.config.dropout)
        self.head = nn.Linear(encoder.d_model, n_classes)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.dropout(self.encoder.encode(tokens)[:, 0]))


def mask_tokens(
    tokens: Tensor,
    mask_id: int,
    vocab_size: int,
    protected: Sequence[int],
    rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption of (batch, seq) ids: returns (inputs, labels).

    Each token not in ``protected`` (padding and the other special ids) is chosen with
    probability ``rate``; a chosen token becomes ``mask_id`` (80 %), a random ordinary token
    (10 %, drawn from the ids above every protected id) or stays (10 %). ``labels`` hold the
    original id at chosen positions and ``PAD_ID`` (ignored by the loss) everywhere else.
    """
    if not 0 < rate < 1:
        raise InvalidValue(f"rate must be in (0, 1), got {rate}")
    first_ordinary = max(protected) + 1
    if not first_ordinary < vocab_size:
        raise InvalidValue(
            f"no ordinary ids left above the protected ones {sorted(protected)} in a vocabulary of {vocab_size}"
        )
    can_choose = ~torch.isin(tokens, torch.tensor(list(protected), device=tokens.device))
    draw = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    chosen = can_choose & (draw < rate)
    action = torch.rand(tokens.shape, generator=generator, device=tokens.device)  # which of 80 / 10 / 10
    random_ids = torch.randint(first_ordinary, vocab_size, tokens.shape, generator=generator, device=tokens.device)
    inputs = torch.where(chosen & (action < 0.8), mask_id, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    labels = torch.where(chosen, tokens, PAD_ID)
    return inputs, labels


def _batch_seed(seed: int, indices: Sequence[int]) -> int:
    """A seed that depends only on the run's seed and the batch's examples, so a resumed run masks alike."""
    return zlib.crc32(repr((seed, list(indices))).encode())


class MaskedLMTask(LanguageModelTask):
    """Masked-language-model pre-training on sequences of ids (each as the model will read it).

    Batches as in :class:`~transformer_lib.family.gpt.LanguageModelTask`; each batch is masked with
    :func:`mask_tokens`, seeded by the batch's own examples (so the same run masks the same way
    after a resume, and an epoch's new batches get new masks). Validation batches keep one
    fixed masking. The loss is the cross-entropy at chosen positions; they are its items.
    """

    def __init__(
        self,
        train: Sequence[Sequence[int]],
        val: Sequence[Sequence[int]] | None,
        mask_id: int,
        vocab_size: int,
        protected: Sequence[int],
        rate: float = 0.15,
        max_tokens: int = 2048,
        seed: int = 0,
    ) -> None:
        super().__init__(train, val, max_tokens, seed)
        self.mask_id, self.vocab_size, self.protected, self.rate = mask_id, vocab_size, list(protected), rate

    def make_batch(self, indices: Sequence[int], train: bool) -> LabelledBatch:
        """The corrupted inputs and, as labels, the hidden tokens (``PAD_ID`` where nothing is hidden)."""
        tokens = pad_ids([(self.train if train else self.val)[i] for i in indices])
        generator = torch.Generator().manual_seed(_batch_seed(self.seed if train else -1, indices))
        return LabelledBatch(*mask_tokens(tokens, self.mask_id, self.vocab_size, self.protected, self.rate, generator))

    def loss(self, model: nn.Module, batch: LabelledBatch, train: bool) -> tuple[Tensor, Tensor]:
        return token_cross_entropy(model(batch.inputs), batch.labels)
