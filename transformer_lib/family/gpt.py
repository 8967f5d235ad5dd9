"""Decoder-only: a GPT-style language model (lesson 13; Radford et al., 2018).

Drop the encoder, and the decoder's cross-attention has nothing to attend to: what remains of a
decoder layer is causal self-attention and the feed-forward network, which is exactly the
package's :class:`~transformer_lib.layers.EncoderLayer` run with a causal mask. Trained to
predict every next token of plain text, the model generates text one token at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from transformer_lib.attention import causal_mask
from transformer_lib.batching import pad_ids, token_batches
from transformer_lib.decoding import check_sampling, extend, sample_token
from transformer_lib.errors import InvalidValue
from transformer_lib.model import SingleStack
from transformer_lib.training.tasks import token_cross_entropy


class GPT(SingleStack):
    """Token ids in, next-token logits out; position t sees only positions 0..t.

    Sizes come from a :class:`~transformer_lib.config.TransformerConfig` (``n_layers`` is the one
    stack's depth). GPT-2 and its successors are pre-norm (``norm_first=True``); the output
    projection shares the embedding matrix when ``tie_embeddings``.
    """

    def forward(self, tokens: Tensor) -> Tensor:
        """(batch, seq) ids -> logits (batch, seq, vocab_size); position t scores token t + 1.

        Right padding needs no mask of its own: the causal mask already hides every later
        position, and padding only follows the real tokens.
        """
        return self.generator(self.hidden(tokens, causal_mask(tokens.shape[-1], tokens.device)))


@torch.no_grad()
def generate(
    model: GPT,
    prompt: Tensor,
    max_new: int = 30,
    temperature: float = 1.0,
    top_k: int | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Continue each row of ``prompt`` (batch, len), all rows of one length, until ``<eos>``.

    Every step scores the whole prefix again (captions are short; lesson 10's key-value cache
    would make each step cost one position). ``greedy`` takes the most probable token, else it is
    drawn as in :func:`~transformer_lib.decoding.sample_token`. Returns the new ids of each row,
    without the ``<eos>``.
    """
    check_sampling(temperature, top_k)
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise InvalidValue(f"prompt must be (batch, len) ids with len >= 1, got shape {tuple(prompt.shape)}")
    model.eval()
    n_new = min(max_new, model.config.max_len - prompt.shape[1])
    limits = torch.full((prompt.shape[0],), n_new + 1, device=prompt.device)  # + 1: the <eos> it may end with

    def pick(logits: Tensor) -> Tensor:
        return logits.argmax(dim=-1) if greedy else sample_token(logits, temperature, top_k, generator)

    return extend(prompt, lambda tokens: model(tokens)[:, -1], pick, limits)


class LanguageModelTask:
    """Next-token prediction over sequences that start with ``<bos>`` and end with ``<eos>``.

    Batches hold sequences of similar length under a budget of ``max_tokens`` token slots
    (shuffled with ``seed + epoch``); the loss is the cross-entropy of every next token, padding
    excluded, and its items are those tokens (so exp(validation loss) is the perplexity).
    """

    def __init__(
        self,
        train: Sequence[Sequence[int]],
        val: Sequence[Sequence[int]] | None = None,
        max_tokens: int = 2048,
        seed: int = 0,
    ) -> None:
        if not train:
            raise InvalidValue("the training set is empty: there is nothing to train on")
        short = [i for i, s in enumerate(list(train) + list(val or [])) if len(s) < 2]
        if short:
            raise InvalidValue(f"{len(short)} sequences have fewer than 2 tokens: there is no next token to predict")
        self.train, self.val = train, val or []
        self.max_tokens, self.seed = max_tokens, seed

    def train_batches(self, epoch: int) -> list[list[int]]:
        return token_batches(self.train, self.max_tokens, shuffle=True, seed=self.seed + epoch, size=len)

    def val_batches(self) -> list[list[int]]:
        return token_batches(self.val, self.max_tokens, shuffle=False, size=len) if self.val else []

    def make_batch(self, indices: Sequence[int], train: bool) -> Tensor:
        examples = self.train if train else self.val
        return pad_ids([examples[i] for i in indices])  # (batch, longest)

    def loss(self, model: nn.Module, batch: Tensor, train: bool) -> tuple[Tensor, Tensor]:
        return token_cross_entropy(model(batch[:, :-1]), batch[:, 1:])  # position t predicts token t + 1
