"""The whole encoder-decoder Transformer (lesson 8; section 3); its configuration and sizes are in :mod:`.config`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_lib.attention import KVCache, StaticKVCache, causal_mask, padding_mask
from transformer_lib.config import PAD_ID, TransformerConfig
from transformer_lib.embeddings import POSITIONAL_ENCODINGS, TokenEmbedding
from transformer_lib.errors import InvalidValue
from transformer_lib.layers import Decoder, Encoder


class Transformer(nn.Module):
    """Encoder-decoder Transformer: source ids and shifted target ids in, next-token logits out."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.d_model = c.d_model  # what the Trainer's warm-up schedule scales with
        self.src_embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.tgt_embed = self.src_embed if c.tie_embeddings else TokenEmbedding(c.vocab_size, c.d_model)
        self.positional = POSITIONAL_ENCODINGS[c.positional](c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder.of(c.n_layers, c.layer)
        self.decoder = Decoder.of(c.n_layers, c.layer)
        self.generator = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._init_weights()
        if c.tie_embeddings:
            self.generator.weight = self.src_embed.weight

    def _init_weights(self) -> None:
        """Glorot-uniform matrices and zero biases in every linear layer (nn.Transformer also starts
        its matrices Glorot-uniform, but keeps its feed-forward layers' default biases)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(batch, src_len) ids -> memory (batch, src_len, d_model) and its padding mask (batch, 1, 1, src_len)."""
        if src.dim() != 2:
            raise InvalidValue(f"src must be (batch, src_len) token ids, got shape {tuple(src.shape)}")
        src_mask = padding_mask(src, PAD_ID)
        memory = self.encoder(self.positional(self.src_embed(src)), src_mask)
        return memory, src_mask

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: KVCache | None = None, last: bool = False
    ) -> Tensor:
        """(batch, tgt_len) ids, starting with <bos> -> logits (batch, tgt_len, vocab_size).

        With a ``cache`` (step-by-step generation, lesson 10), ``tgt`` holds only the tokens that
        follow those already decoded, which the cache remembers; targets are then unpadded.
        ``last=True`` scores only the last position, (batch, 1, vocab_size): all that generation needs.
        """
        if tgt.dim() != 2:
            raise InvalidValue(f"tgt must be (batch, tgt_len) token ids, got shape {tuple(tgt.shape)}")
        if tgt.shape[0] != memory.shape[0]:
            raise InvalidValue(f"source and target batch sizes differ: {memory.shape[0]} and {tgt.shape[0]}")
        if cache is None:
            past, tgt_mask = 0, causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, PAD_ID)
        else:  # (1, 1, tgt_len, keys): every key up to each new position
            past, tgt_mask = cache.length, cache.self_mask(tgt.shape[1], tgt.device)
        x = self.positional(self.tgt_embed(tgt), offset=past)
        hidden = self.decoder(x, memory, tgt_mask, src_mask, None if cache is None else cache.layers)
        if cache is not None:
            cache.advance(tgt.shape[1])
        return self.generator(hidden[:, -1:] if last else hidden)

    def new_cache(self, capacity: int | None = None, device: torch.device | str | None = None) -> KVCache:
        """An empty key-value cache for step-by-step decoding with :meth:`decode`: one that grows,
        or with ``capacity`` positions a :class:`~transformer_lib.attention.StaticKVCache` on ``device``."""
        if capacity is None:
            return KVCache.empty(len(self.decoder.layers))
        if capacity > self.config.max_len:
            raise InvalidValue(f"a cache of {capacity} positions exceeds max_len={self.config.max_len}")
        return StaticKVCache.empty(len(self.decoder.layers), capacity, device)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src (batch, src_len), tgt (batch, tgt_len) ids -> logits (batch, tgt_len, vocab_size).

        Position t of the output scores the token that follows tgt[:, :t+1] (teacher forcing).
        """
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)


class SingleStack(nn.Module):
    """Embedded tokens through one stack of encoder layers, and an output projection (tied when
    ``tie_embeddings``): the body of lesson 13's GPT and BERT, which differ in the mask they give
    :meth:`hidden` (causal or padding) and in what they are trained to predict.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.d_model = c.d_model  # what the Trainer's warm-up schedule scales with
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.positional = POSITIONAL_ENCODINGS[c.positional](c.d_model, c.max_len, c.dropout)
        self.blocks = Encoder.of(c.n_layers, c.layer)
        self.generator = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.embed.weight

    def hidden(self, tokens: Tensor, mask: Tensor) -> Tensor:
        """(batch, seq) ids -> (batch, seq, d_model), attending as ``mask`` allows."""
        if tokens.dim() != 2:
            raise InvalidValue(f"tokens must be (batch, seq) ids, got shape {tuple(tokens.shape)}")
        return self.blocks(self.positional(self.embed(tokens)), mask)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable numbers; a tied matrix counts once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(model: Transformer) -> dict[str, int]:
    """Parameters of each part of the model, each tied matrix counted where it first appears."""
    seen: set[int] = set()
    breakdown = {}
    for name, child in model.named_children():
        params = [p for p in child.parameters() if id(p) not in seen]
        seen.update(id(p) for p in params)
        breakdown[name] = sum(p.numel() for p in params)
    return breakdown
