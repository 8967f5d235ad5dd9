"""Scaled dot-product attention and multi-head attention (lessons 4 and 5; section 3.2).

Mask convention, everywhere in this package: a **boolean** tensor, ``True`` where a query may
attend to a key, broadcastable to ``(batch, heads, q_len, k_len)`` (the attention layers take it with
all four dimensions, each 1 or the full size: :func:`check_mask`). This is the convention of
``torch.nn.functional.scaled_dot_product_attention``, and the opposite of
``nn.MultiheadAttention``'s ``key_padding_mask``. Every query must be allowed at least one key.

The key-value cache of step-by-step decoding (lesson 10), typed: :class:`AttentionCache`,
:class:`LayerCache` and :class:`KVCache`.

Generating token t with the whole prefix recomputes every earlier position, although the causal
mask guarantees their results never change. The cache keeps what later steps need from them:
each decoder self-attention's projected keys and values, which grow by one position a step, and
each cross-attention's keys and values of the encoder output, computed once. Shapes are
(batch, heads, length, d_head); beam search reorders the batch rows when hypotheses swap places.

:class:`StaticKVCache` keeps the same keys and values in buffers allocated once, written in place
at a position held on the device. Every step then has the same shapes and reads the same memory,
so on a GPU the whole step can be recorded once as a CUDA graph and replayed
(:class:`~transformer_lib.decoding.StaticStep`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer_lib.config import PAD_ID, check_heads
from transformer_lib.embeddings import apply_rotary
from transformer_lib.errors import InvalidType, InvalidValue


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

    def self_mask(self, n: int, device: torch.device | str | None = None) -> Tensor:
        """(1, 1, n, length + n) mask of the next ``n`` positions over every key so far: causal."""
        return causal_mask(self.length + n, device)[:, :, self.length :]

    def advance(self, n: int) -> None:
        """Count ``n`` more positions as decoded."""
        self.length += n

    def reorder(self, index: Tensor) -> None:
        """Keep the rows ``index`` of the batch (beam search keeps its best hypotheses)."""
        for layer in self.layers:
            layer.self_attn.reorder(index)
            layer.cross_attn.reorder(index)


@dataclass
class StaticAttentionCache(AttentionCache):
    """A self-attention's keys and values in buffers of ``capacity`` positions, allocated at the
    first step and written in place at ``position`` (a () tensor shared by the decoder's layers).

    Attention reads the whole buffers; the mask of :meth:`StaticKVCache.self_mask` hides the
    positions not yet written. Nothing here reads the position on the host, so a step never waits
    for the device.
    """

    capacity: int = 0
    position: Tensor | None = None  # () long, on the device

    @property
    def length(self) -> Tensor:  # type: ignore[override]
        return self.position

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's keys and values at the current position; return the whole buffers."""
        if self.k is None:  # (batch, heads, capacity, d_head)
            shape = (*k.shape[:2], self.capacity, k.shape[3])
            self.k, self.v = k.new_zeros(shape), v.new_zeros(shape)
        index = self.position + torch.arange(k.shape[2], device=k.device)  # (k_len,) positions written
        self.k.index_copy_(2, index, k)
        self.v.index_copy_(2, index, v)
        return self.k, self.v


@dataclass
class StaticKVCache(KVCache):
    """The decoder's cache in fixed buffers of ``capacity`` positions (the longest output, <bos>
    included): the same shapes and addresses at every step, as a CUDA graph needs.

    ``length`` is a () tensor on the device, advanced in place. Beam search's reordering copies
    rows within the buffers, cross-attention's included, so that nothing moves.
    """

    capacity: int = 0

    @classmethod
    def empty(cls, n_layers: int, capacity: int = 0, device: torch.device | str | None = None) -> StaticKVCache:  # type: ignore[override]
        if capacity < 1:
            raise InvalidValue(f"a static cache needs a capacity of at least 1 position, got {capacity}")
        position = torch.zeros((), dtype=torch.long, device=device)
        layers = [LayerCache(StaticAttentionCache(capacity=capacity, position=position)) for _ in range(n_layers)]
        return cls(layers, position, capacity)  # type: ignore[arg-type]

    def self_mask(self, n: int, device: torch.device | str | None = None) -> Tensor:
        """(1, 1, n, capacity) mask: query i (at length + i) attends to keys 0 .. length + i."""
        queries = self.length + torch.arange(n, device=device)  # (n,) positions of the new tokens
        keys = torch.arange(self.capacity, device=device)  # (capacity,)
        return (keys[None, :] <= queries[:, None])[None, None]

    def advance(self, n: int) -> None:
        self.length.add_(n)  # type: ignore[union-attr]

    def reorder(self, index: Tensor) -> None:
        for layer in self.layers:
            for cache in (layer.self_attn, layer.cross_attn):
                if cache.k is not None:  # in place: a recorded graph reads these addresses
                    cache.k.copy_(cache.k.index_select(0, index))
                    cache.v.copy_(cache.v.index_select(0, index))


def padding_mask(tokens: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """(batch, k_len) ids -> (batch, 1, 1, k_len) mask: attend to every key that is not padding."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(n: int, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, n, n) mask: position i may attend to positions 0..i, never to the future."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()[None, None]


def sliding_window_mask(n: int, window: int, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, n, n) causal local mask: position i may attend to positions i - window + 1 .. i (lesson 12)."""
    if window < 1:
        raise InvalidValue(f"window must be at least 1 (the position itself), got {window}")
    i = torch.arange(n, device=device)
    distance = i[:, None] - i[None, :]  # (n, n): how far back key j lies from query i
    return ((distance >= 0) & (distance < window))[None, None]


def check_mask(mask: Tensor, batch: int, q_len: int, k_len: int, heads: int | None = None) -> None:
    """Raise a clear error unless ``mask`` is boolean with four dimensions, each 1 or the size of
    (batch, heads, q_len, k_len) (the shapes :func:`padding_mask` and :func:`causal_mask` build);
    ``heads`` None: any number of heads."""
    if mask.dtype != torch.bool:
        raise InvalidType(
            f"attention masks must be boolean (True = may attend), got {mask.dtype}; "
            "build them with padding_mask() and causal_mask()"
        )
    any_heads = mask.shape[1] if mask.dim() == 4 else 1
    expected = (batch, any_heads if heads is None else heads, q_len, k_len)
    if mask.dim() != 4 or any(m not in (1, n) for m, n in zip(mask.shape, expected, strict=True)):
        raise InvalidValue(
            f"attention mask of shape {tuple(mask.shape)} does not broadcast to "
            f"(batch={batch}, heads{'' if heads is None else f'={heads}'}, q_len={q_len}, k_len={k_len}); "
            "use (batch, 1, 1, k_len) for "
            "padding or (1, 1, q_len, k_len) for causal masks"
        )


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, computed by hand so that the weights can be returned.

    query (..., q_len, d_k), key (..., k_len, d_k), value (..., k_len, d_v), mask broadcastable
    to (..., q_len, k_len). Returns the output (..., q_len, d_v) and the weights
    (..., q_len, k_len), whose rows sum to 1 and are 0 wherever the mask is False (a row the
    mask leaves empty is all 0, as in ``F.scaled_dot_product_attention``). With ``dropout_p``, the
    weights returned are the ones used: dropped to 0 at random and the rest scaled by 1 / (1 - p).
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., q_len, k_len)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:  # a query with no key to attend to gets zeros, as the fused kernel gives, not NaN
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ value, weights


def tiled_attention(query: Tensor, key: Tensor, value: Tensor, block: int = 64, causal: bool = False) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V a tile of keys at a time, never holding the (q_len, k_len) scores.

    FlashAttention's idea (Dao et al. 2022), written for reading, not for speed (lesson 12): for
    each block of queries, walk over blocks of keys and values keeping, per query, the running
    maximum score ``m``, the running sum ``total`` of ``exp(score - m)`` and the running weighted sum
    of values; when a new block raises the maximum, the old sums are rescaled by
    ``exp(m_old - m_new)``. The result equals full attention to rounding. query (..., q_len, d_k),
    key (..., k_len, d_k), value (..., k_len, d_v); ``causal`` hides keys after each query.
    """
    if block < 1:
        raise InvalidValue(f"block must be at least 1, got {block}")
    scale = 1.0 / math.sqrt(query.shape[-1])
    q_len, k_len = query.shape[-2], key.shape[-2]
    out = torch.empty(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
    for q0 in range(0, q_len, block):
        q = query[..., q0 : q0 + block, :] * scale  # (..., bq, d_k)
        m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)  # running max (..., bq)
        total = torch.zeros_like(m)  # running sum of exp(score - m)
        acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype, device=q.device)  # (..., bq, d_v)
        for k0 in range(0, k_len if not causal else min(k_len, q0 + q.shape[-2]), block):
            scores = q @ key[..., k0 : k0 + block, :].transpose(-2, -1)  # (..., bq, bk): one tile
            if causal:
                rows = torch.arange(q0, q0 + q.shape[-2], device=q.device)[:, None]
                cols = torch.arange(k0, k0 + scores.shape[-1], device=q.device)[None, :]
                scores = scores.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1))
            p = torch.exp(scores - m_new[..., None])  # (..., bq, bk)
            rescale = torch.exp(m - m_new)  # how much the old sums shrink under the new maximum
            total = total * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ value[..., k0 : k0 + block, :]
            m = m_new
        out[..., q0 : q0 + block, :] = acc / total[..., None]
    return out


class MultiHeadAttention(nn.Module):
    """h attention heads over d_model / h-dimensional projections, concatenated and mixed by W_O.

    By default the heads run through PyTorch's fused ``scaled_dot_product_attention`` (fast, no
    weights kept). Set ``need_weights = True`` to run them by hand and keep the attention weights
    of the last call in ``self.weights``, (batch, heads, q_len, k_len), for plots. Both paths
    compute the same function. With ``rotary=True`` (self-attention with rotary positions) each
    head's queries and keys are rotated by their positions before the scores, so that the scores
    depend on positions only through their difference.

    ``n_kv_heads`` below ``n_heads`` gives grouped-query attention (Ainslie et al. 2023; lesson 12):
    only ``n_kv_heads`` key and value heads are projected (and cached when decoding), each shared
    by ``n_heads / n_kv_heads`` query heads; ``n_kv_heads=1`` is multi-query attention. The
    default, ``n_kv_heads = n_heads``, is the paper's attention.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        rotary: bool = False,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        n_kv_heads = check_heads(d_model, n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads = n_kv_heads
        self.dropout = dropout
        self.rotary = rotary  # rotate queries and keys by their positions (RoPE; self-attention only)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.need_weights = False
        self.weights: Tensor | None = None

    def split_heads(self, x: Tensor) -> Tensor:
        """(batch, seq, heads * d_head) -> (batch, heads, seq, d_head), for query or key-value heads"""
        batch, seq, width = x.shape
        return x.view(batch, seq, width // self.d_head, self.d_head).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(batch, heads, seq, d_head) -> (batch, seq, d_model)"""
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        cache: AttentionCache | None = None,
        static_kv: bool = False,
    ) -> Tensor:
        """query (batch, q_len, d_model); key, value (batch, k_len, d_model) -> (batch, q_len, d_model)

        ``cache`` serves step-by-step decoding (lesson 10): it keeps this layer's projected keys
        and values between calls. For self-attention the new keys and values are appended to
        the cached ones; with ``static_kv=True`` (cross-attention, whose keys and values come from
        the fixed encoder output) they are computed on the first call and reused after it.
        """
        self._check_inputs(query, key, value)
        q = self.split_heads(self.q_proj(query))  # (batch, heads, q_len, d_head)
        past = 0 if cache is None or static_kv else cache.length  # positions decoded before these
        if self.rotary:
            q = apply_rotary(q, offset=past)
        if cache is not None and static_kv and cache.k is not None:
            k, v = cache.k, cache.v  # the encoder output's, computed at the first step
        else:
            k = self.split_heads(self.k_proj(key))  # (batch, kv_heads, k_len, d_head)
            v = self.split_heads(self.v_proj(value))  # (batch, kv_heads, k_len, d_head)
            if self.rotary:
                k = apply_rotary(k, offset=past)  # stored rotated: a key's position never changes
            if cache is not None:
                k, v = cache.append(k, v)  # (batch, kv_heads, cached + k_len, d_head)
        if mask is not None:
            check_mask(mask, query.shape[0], query.shape[1], k.shape[2], self.n_heads)
        dropout_p = self.dropout if self.training else 0.0
        grouped = self.n_kv_heads != self.n_heads  # each key-value head serves a group of query heads
        if self.need_weights:
            if grouped:  # copy each key-value head to its group: (batch, heads, k_len, d_head)
                group = self.n_heads // self.n_kv_heads
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            out, self.weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        else:  # the fused kernel reads the shared heads in place, without copying them
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=grouped)
            self.weights = None
        return self.out_proj(self.merge_heads(out))  # (batch, q_len, d_model)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise InvalidValue(f"{name} must be (batch, seq, d_model={self.d_model}), got shape {tuple(x.shape)}")
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise InvalidValue(
                f"query, key and value must have the same batch size, got "
                f"{query.shape[0]}, {key.shape[0]} and {value.shape[0]}"
            )
        if key.shape[1] != value.shape[1]:
            raise InvalidValue(f"key and value must have the same length, got {key.shape[1]} and {value.shape[1]}")


def attention_kernels(device: torch.device):
    """PyTorch's fused attention without cuDNN's kernel on a GPU: cuDNN plans anew for each shape
    (11-13 ms of CPU time per call on an H100, as profiled), and token batches change shape every step.
    Decoding's CUDA graphs are recorded with the same kernels (:class:`~transformer_lib.decoding.StaticStep`)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def keep_attention_weights(model: nn.Module, keep: bool = True) -> None:
    """Switch every MultiHeadAttention inside ``model`` to the by-hand path that keeps its weights."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.need_weights = keep
