"""The encoder and decoder stacks (lessons 6 and 7; section 3.1 and 3.3).

Each layer is a few sub-layers (attention, feed-forward), each wrapped in a residual connection
with layer normalisation. The paper normalises after the residual sum (post-norm):
``LayerNorm(x + Dropout(Sublayer(x)))``. Most later models normalise the sub-layer's input
instead (pre-norm): ``x + Dropout(Sublayer(LayerNorm(x)))``, which trains deep stacks without a
warm-up; a pre-norm stack then needs one final LayerNorm. ``norm_first`` selects it.

Layers are built from a config, as nanoGPT and Hugging Face build theirs, rather than from
sub-modules handed in, as the Annotated Transformer and PyTorch do: the lessons build a layer by its
sizes (``EncoderLayer(512, 8, 2048)``), a model passes its sizes whole
(:class:`~transformer_lib.config.LayerConfig`), and
every check of those sizes sits in one place. Injected sub-modules would make each caller build and
check the attention and feed-forward itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lib.attention import LayerCache, MultiHeadAttention
from transformer_lib.config import ACTIVATIONS, LayerConfig, check_name

FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = dict(zip(ACTIVATIONS, (F.relu, F.gelu), strict=True))


class FeedForward(nn.Module):
    """FFN(x) = W_2 activation(W_1 x + b_1) + b_2, applied to every position alone (section 3.3)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        check_name("activation", activation, ACTIVATIONS)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = FUNCTIONS[activation]

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


class _Layer(nn.Module):
    """What both layers are: self-attention (and, in the decoder, attention to the encoder's output),
    the feed-forward network, and a residual connection around each, built from one
    :class:`~transformer_lib.config.LayerConfig`.

    ``EncoderLayer(d_model, n_heads, d_ff, ...)`` takes the config's fields, as the lessons write it;
    :meth:`of` takes a config whole. The sub-modules are created in the order the paper lists them,
    which fixes the random initial weights a seed gives.
    """

    cross_attention = False  # the decoder's attention to the encoder's output

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
        self.config = c = LayerConfig(
            d_model, n_heads, d_ff, dropout, attention_dropout, activation, norm_first, rotary, n_kv_heads
        )
        self.self_attn = MultiHeadAttention(
            c.d_model, c.n_heads, c.attention_dropout, rotary=c.rotary, n_kv_heads=c.n_kv_heads
        )
        if self.cross_attention:
            self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attention_dropout, n_kv_heads=c.n_kv_heads)
        self.feed_forward = FeedForward(c.d_model, c.d_ff, c.dropout, c.activation)
        for i in range(3 if self.cross_attention else 2):
            self.add_module(f"residual{i + 1}", Residual(c.d_model, c.dropout, c.norm_first))

    @classmethod
    def of(cls, config: LayerConfig) -> _Layer:
        """The layer ``config`` describes."""
        return cls(**dataclasses.asdict(config))


class EncoderLayer(_Layer):
    """Self-attention over the source, then the feed-forward network."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x (batch, src_len, d_model); mask broadcastable to (batch, heads, src_len, src_len)"""
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask))
        return self.residual2(x, self.feed_forward)


class DecoderLayer(_Layer):
    """Masked self-attention over the target, attention to the encoder's output, feed-forward."""

    cross_attention = True

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> Tensor:
        """x (batch, tgt_len, d_model); memory (batch, src_len, d_model), the encoder's output.

        tgt_mask: broadcastable to (batch, heads, tgt_len, tgt_len), causal (and the target's padding in a batch);
        memory_mask: broadcastable to (batch, heads, tgt_len, src_len), the source's padding;
        cache: this layer's keys and values from earlier decoding steps (lesson 10), updated in place.
        """
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask, self_cache))
        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, memory_mask, cross_cache, static_kv=True))
        return self.residual3(x, self.feed_forward)


class _Stack(nn.Module):
    """N layers of one :class:`~transformer_lib.config.LayerConfig`; with pre-norm, a final LayerNorm.

    ``Encoder(n_layers, d_model=..., n_heads=..., d_ff=...)`` takes the config's fields, as the
    lessons write it; :meth:`of` takes a config whole.
    """

    layer_type: type[_Layer]

    def __init__(self, n_layers: int, norm_first: bool = False, **layer_settings) -> None:
        super().__init__()
        config = LayerConfig(norm_first=norm_first, **layer_settings)
        self.layers = nn.ModuleList(self.layer_type.of(config) for _ in range(n_layers))
        self.norm = nn.LayerNorm(config.d_model) if norm_first else nn.Identity()

    @classmethod
    def of(cls, n_layers: int, config: LayerConfig) -> _Stack:
        """A stack of ``n_layers`` layers, each as ``config`` describes."""
        return cls(n_layers, **dataclasses.asdict(config))


class Encoder(_Stack):
    """N encoder layers; with pre-norm, a final LayerNorm."""

    layer_type = EncoderLayer

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(_Stack):
    """N decoder layers; with pre-norm, a final LayerNorm."""

    layer_type = DecoderLayer

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
