"""The key-value cache of step-by-step decoding, typed (lesson 10).

Generating token t with the whole prefix recomputes every earlier position, although the causal
mask guarantees their results never change. The cache keeps what later steps need from them:
each decoder self-attention's projected keys and values, which grow by one position a step, and
each cross-attention's keys and values of the encoder output, computed once. Shapes are
(batch, heads, length, d_head); beam search reorders the batch rows when hypotheses swap places.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class AttentionCache:
    """One attention layer's projected keys and values so far (None before the first step)."""

    k: Tensor | None = None  # (batch, heads, length, d_head)
    v: Tensor | None = None  # (batch, heads, length, d_head)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add this step's keys and values after the stored ones; return all of them."""
        if self.k is not None:
            k, v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v

    def reorder(self, index: Tensor) -> None:
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


@dataclass
class LayerCache:
    """A decoder layer's two caches: its masked self-attention and its cross-attention."""

    self_attn: AttentionCache = field(default_factory=AttentionCache)
    cross_attn: AttentionCache = field(default_factory=AttentionCache)


@dataclass
class KVCache:
    """The whole decoder's cache: one :class:`LayerCache` per layer, and the positions decoded so far."""

    layers: list[LayerCache]
    length: int = 0

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls([LayerCache() for _ in range(n_layers)])

    def reorder(self, index: Tensor) -> None:
        """Keep the rows ``index`` of the batch (beam search keeps its best hypotheses)."""
        for layer in self.layers:
            layer.self_attn.reorder(index)
            layer.cross_attn.reorder(index)
