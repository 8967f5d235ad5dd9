"""Token embeddings and position encodings (lesson 3; the paper's section 3.4 and 3.5).

Attention treats its input as a set: permute the tokens and the outputs permute with them. The
order of a sentence must therefore be written into the vectors themselves. The paper adds a
fixed sinusoidal encoding to each token's embedding; a learned table, rotary encodings (RoPE,
Su et al. 2021) and linear biases in attention (ALiBi, Press et al. 2022) are the alternatives.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer_lib.config import POSITIONALS
from transformer_lib.errors import InvalidType, InvalidValue


class TokenEmbedding(nn.Module):
    """Token ids to vectors, multiplied by sqrt(d_model) (section 3.4).

    The weights start with standard deviation ``d_model ** -0.5``, so the scaled embedding has
    entries of size about 1, like the position encoding added to it. The same matrix can serve
    as the output projection (weight tying, lesson 8), where the small scale suits logits.
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        nn.init.normal_(self.weight, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        """(batch, seq) integer ids -> (batch, seq, d_model)."""
        check_token_ids(tokens, self.vocab_size)
        return nn.functional.embedding(tokens, self.weight) * math.sqrt(self.d_model)


def reading_back_is_forbidden() -> bool:
    """Whether this code runs in a compiled graph or while a CUDA graph is recorded, where reading
    a device value back to the host (as a check of its values does) breaks the graph or the recording."""
    return torch.compiler.is_compiling() or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def check_token_ids(tokens: Tensor, vocab_size: int) -> None:
    """Raise a clear error for ids that are not int64 or int32, or an id outside ``[0, vocab_size)``."""
    if tokens.dtype not in (torch.int64, torch.int32):
        raise InvalidType(f"token ids must be an integer tensor (torch.long), got {tokens.dtype}")
    if reading_back_is_forbidden():
        return
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise InvalidValue(
            f"token ids must lie in [0, {vocab_size}) for this vocabulary, got ids from "
            f"{int(tokens.min())} to {int(tokens.max())}; was the text encoded with another tokenizer?"
        )


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The paper's encodings, (max_len, d_model):

    PE[pos, 2i] = sin(pos / 10000^(2i / d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model)).
    """
    if d_model % 2:
        raise InvalidValue(f"sinusoidal encodings pair sines with cosines: d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    frequency = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float()


def positions(offset: int | Tensor, n: int, max_len: int, hint: str) -> slice | Tensor:
    """Where positions ``offset .. offset + n - 1`` lie in a table of ``max_len`` rows. An int offset
    gives a slice (a view, which an ONNX export keeps as the table itself), checked here (``hint``
    ends the error). A () tensor, a static cache's position on the device, gives an (n,) index and
    is never read back: its cache's capacity was checked against ``max_len``."""
    if isinstance(offset, Tensor):
        return offset + torch.arange(n, device=offset.device)
    if offset + n > max_len:
        raise InvalidValue(f"position {offset + n - 1} is beyond max_len={max_len}; {hint}")
    return slice(offset, offset + n)


class SinusoidalPositionalEncoding(nn.Module):
    """Add the fixed sinusoidal encoding of each position, then dropout (section 3.5 and 5.4)."""

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int | Tensor = 0) -> Tensor:
        """(batch, seq, d_model) -> the same, with positions ``offset .. offset + seq - 1`` added."""
        return self.dropout(x + self.table[positions(offset, x.shape[1], self.max_len, "raise max_len in the config")])


class LearnedPositionalEncoding(nn.Module):
    """Add a trained vector per position (the paper's alternative, Table 3 row E); cannot extrapolate."""

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def forward(self, x: Tensor, offset: int | Tensor = 0) -> Tensor:
        index = positions(offset, x.shape[1], self.max_len, "a learned table cannot extrapolate")
        return self.dropout(x + self.table.weight[index])


class RotaryPositions(nn.Module):
    """The embedding side of rotary positions: nothing is added (dropout only).

    With rotary encodings positions enter inside self-attention, where queries and keys are
    rotated (:func:`apply_rotary`); the token embeddings themselves carry no position.
    """

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int | Tensor = 0) -> Tensor:
        return self.dropout(x)


# The one place where a config's ``positional`` name meets its module (rotary: see MultiHeadAttention).
POSITIONAL_ENCODINGS: dict[str, type[nn.Module]] = dict(
    zip(POSITIONALS, (SinusoidalPositionalEncoding, LearnedPositionalEncoding, RotaryPositions), strict=True)
)


def apply_rotary(x: Tensor, offset: int | Tensor = 0, base: float = 10000.0) -> Tensor:
    """Rotary position encoding (RoPE): rotate each pair of features by a position-dependent angle.

    x: (..., seq, d) with d even. Pair ``(x[2i], x[2i+1])`` at position ``p`` turns by angle
    ``p * base^(-2i/d)``. Applied to queries and keys, it makes ``q_m . k_n`` depend on the
    positions only through ``m - n``.
    """
    seq, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise InvalidValue(f"rotary encoding rotates pairs of features: the last dimension must be even, got {d}")
    position = (offset + torch.arange(seq, device=x.device, dtype=torch.float32))[:, None]  # (seq, 1)
    frequency = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angle = position * frequency  # (seq, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., seq, d/2, 2)
    return rotated.flatten(-2)


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's fixed slope per head: the geometric sequence 2^(-8/h), 2^(-16/h), ..., 2^(-8) for h heads."""
    if n_heads < 1:
        raise InvalidValue(f"n_heads must be at least 1, got {n_heads}")
    return 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)


def alibi_bias(slopes: Tensor, q_len: int, k_len: int | None = None, offset: int = 0) -> Tensor:
    """ALiBi (Press et al. 2022): ``-slope * |i - j|`` added to the attention score of query i and key j.

    slopes: (heads,), e.g. :func:`alibi_slopes`. Returns (1, heads, q_len, k_len), to add to the
    scores before the softmax; queries sit at positions ``offset .. offset + q_len - 1`` (for a
    decoding step with a cache), keys at ``0 .. k_len - 1``. Under a causal mask only ``j <= i``
    counts, where this is the paper's ``-slope * (i - j)``: no position is added to the tokens,
    attention is only pushed towards nearby keys, and any length works.
    """
    k_len = q_len + offset if k_len is None else k_len
    i = torch.arange(offset, offset + q_len, device=slopes.device)[:, None]
    j = torch.arange(k_len, device=slopes.device)[None, :]
    distance = (i - j).abs().to(slopes.dtype)  # (q_len, k_len)
    return -(slopes[:, None, None] * distance)[None]  # (1, heads, q_len, k_len)
