"""The encoder and decoder stacks (lessons 6 and 7; section 3.1 and 3.3).

Each layer is a few sub-layers (attention, feed-forward), each wrapped in a residual connection
with layer normalisation. The paper normalises after the residual sum (post-norm):
``LayerNorm(x + Dropout(Sublayer(x)))``. Most later models normalise the sub-layer's input
instead (pre-norm): ``x + Dropout(Sublayer(LayerNorm(x)))``, which trains deep stacks without a
warm-up; a pre-norm stack then needs one final LayerNorm. ``norm_first`` selects it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lib.attention import MultiHeadAttention
from transformer_lib.cache import LayerCache
from transformer_lib.errors import InvalidValue

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = W_2 activation(W_1 x + b_1) + b_2, applied to every position alone (section 3.3)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise InvalidValue(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model), through (batch, seq, d_ff)"""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class Residual(nn.Module):
    """A sub-layer's residual connection, dropout and LayerNorm, post-norm or pre-norm."""

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the feed-forward network."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        rotary: bool = False,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, rotary=rotary, n_kv_heads=n_kv_heads)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.residual1 = Residual(d_model, dropout, norm_first)
        self.residual2 = Residual(d_model, dropout, norm_first)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x (batch, src_len, d_model); mask broadcastable to (batch, heads, src_len, src_len)"""
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask))
        return self.residual2(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention over the target, attention to the encoder's output, feed-forward."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        rotary: bool = False,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, rotary=rotary, n_kv_heads=n_kv_heads)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, n_kv_heads=n_kv_heads)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.residual1 = Residual(d_model, dropout, norm_first)
        self.residual2 = Residual(d_model, dropout, norm_first)
        self.residual3 = Residual(d_model, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> Tensor:
        """x (batch, tgt_len, d_model); memory (batch, src_len, d_model), the encoder's output.

        tgt_mask: broadcastable to (batch, heads, tgt_len, tgt_len), causal;
        memory_mask: broadcastable to (batch, heads, tgt_len, src_len), the source's padding;
        cache: this layer's keys and values from earlier decoding steps (lesson 10), updated in place.
        """
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask, self_cache))
        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, memory_mask, cross_cache, static_kv=True))
        return self.residual3(x, self.feed_forward)


class Encoder(nn.Module):
    """N encoder layers; with pre-norm, a final LayerNorm."""

    def __init__(self, n_layers: int, norm_first: bool = False, **layer_kwargs) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(norm_first=norm_first, **layer_kwargs) for _ in range(n_layers))
        self.norm = nn.LayerNorm(layer_kwargs["d_model"]) if norm_first else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N decoder layers; with pre-norm, a final LayerNorm."""

    def __init__(self, n_layers: int, norm_first: bool = False, **layer_kwargs) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(norm_first=norm_first, **layer_kwargs) for _ in range(n_layers))
        self.norm = nn.LayerNorm(layer_kwargs["d_model"]) if norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[LayerCache] | None = None,
    ) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, None if cache is None else cache[i])
        return self.norm(x)
