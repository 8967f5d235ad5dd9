"""The Vision Transformer: an image as a sequence of patches (lesson 13; Dosovitskiy et al., 2021).

Cut the image into square patches, flatten each into a vector and project it to ``d_model``:
the patches are the tokens. A learned ``[CLS]`` vector is put in front, learned positions are
added, and a pre-norm encoder (GELU, as in the paper) reads the sequence; the classifier reads
the ``[CLS]`` position. Nothing in the model knows that neighbouring patches are neighbours:
that, like the order of words, must come from the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from transformer_lib.config import check_heads
from transformer_lib.embeddings import LearnedPositionalEncoding
from transformer_lib.errors import InvalidValue, check_fields
from transformer_lib.layers import Encoder


@dataclass(frozen=True)
class ViTConfig:
    """Image and model sizes; the defaults suit scikit-learn's 8 x 8 digits."""

    image_size: int = 8
    patch_size: int = 2
    channels: int = 1
    n_classes: int = 10
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_fields(self)
        if self.image_size % self.patch_size:
            raise InvalidValue(f"patch_size={self.patch_size} must divide image_size={self.image_size}")
        check_heads(self.d_model, self.n_heads)

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """(batch, channels, H, W) -> (batch, H/p * W/p, channels * p * p): patches in reading order,
    each flattened channel by channel, row by row."""
    if images.dim() != 4:
        raise InvalidValue(f"images must be (batch, channels, height, width), got shape {tuple(images.shape)}")
    b, c, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise InvalidValue(f"patch_size={p} must divide the image's height and width, got {h} x {w}")
    x = images.reshape(b, c, h // p, p, w // p, p)  # (batch, c, rows, p, cols, p)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // p) * (w // p), c * p * p)


class VisionTransformer(nn.Module):
    """(batch, channels, H, W) images -> (batch, n_classes) logits."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.d_model = c.d_model
        self.patch_embed = nn.Linear(c.channels * c.patch_size**2, c.d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, c.d_model))
        self.positional = LearnedPositionalEncoding(c.d_model, c.n_patches + 1, c.dropout)
        self.encoder = Encoder(
            c.n_layers,
            norm_first=True,
            d_model=c.d_model,
            n_heads=c.n_heads,
            d_ff=c.d_ff,
            dropout=c.dropout,
            activation="gelu",
        )
        self.head = nn.Linear(c.d_model, c.n_classes)

    def forward(self, images: Tensor) -> Tensor:
        c = self.config
        if images.dim() != 4 or images.shape[1:] != (c.channels, c.image_size, c.image_size):
            raise InvalidValue(
                f"images must be (batch, {c.channels}, {c.image_size}, {c.image_size}), got shape {tuple(images.shape)}"
            )
        patches = self.patch_embed(patchify(images, c.patch_size))  # (batch, n_patches, d_model)
        x = torch.cat([self.cls.expand(len(images), -1, -1), patches], dim=1)  # (batch, 1 + n_patches, d_model)
        return self.head(self.encoder(self.positional(x))[:, 0])
