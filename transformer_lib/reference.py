"""PyTorch's own Transformer modules, loaded with our weights: the independent references.

The lessons and tests check each component built here against the module PyTorch ships, with
the same weights copied in and dropout off. Two differences of convention are bridged here:
``nn.MultiheadAttention`` keeps W_Q, W_K, W_V stacked in one ``in_proj_weight``, and its boolean
masks mean the opposite of ours (True = *may not* attend).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from transformer_lib.attention import MultiHeadAttention
from transformer_lib.layers import DecoderLayer, Encoder, EncoderLayer, Residual
from transformer_lib.model import Transformer


@torch.no_grad()
def torch_multihead_attention(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` (batch_first, no dropout) computing the same function as ``ours``."""
    ref = nn.MultiheadAttention(ours.d_model, ours.n_heads, dropout=0.0, batch_first=True)
    ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    ref.out_proj.load_state_dict(ours.out_proj.state_dict())
    return ref.to(ours.out_proj.weight.dtype)


def _layer_settings(ours: EncoderLayer | DecoderLayer) -> dict:
    residual: Residual = ours.residual1
    return dict(
        d_model=ours.self_attn.d_model,
        nhead=ours.self_attn.n_heads,
        dim_feedforward=ours.feed_forward.linear1.out_features,
        dropout=0.0,
        activation=ours.feed_forward.activation,
        batch_first=True,
        norm_first=residual.norm_first,
    )


def _copy_layer(
    ref: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer, ours: EncoderLayer | DecoderLayer
) -> None:
    """Copy what encoder and decoder layers share: self-attention, feed-forward, the norms."""
    ref.self_attn = torch_multihead_attention(ours.self_attn)
    ref.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
    ref.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
    n_norms = 3 if isinstance(ours, DecoderLayer) else 2
    for i in range(1, n_norms + 1):
        getattr(ref, f"norm{i}").load_state_dict(getattr(ours, f"residual{i}").norm.state_dict())


@torch.no_grad()
def torch_encoder_layer(ours: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` (the same activation, no dropout) with the weights of ``ours``."""
    ref = nn.TransformerEncoderLayer(**_layer_settings(ours))
    _copy_layer(ref, ours)
    return ref.to(ours.feed_forward.linear1.weight.dtype)


@torch.no_grad()
def torch_decoder_layer(ours: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer`` (the same activation, no dropout) with the weights of ``ours``."""
    ref = nn.TransformerDecoderLayer(**_layer_settings(ours))
    _copy_layer(ref, ours)
    ref.multihead_attn = torch_multihead_attention(ours.cross_attn)
    return ref.to(ours.feed_forward.linear1.weight.dtype)


@torch.no_grad()
def torch_transformer(ours: Transformer) -> nn.Transformer:
    """An ``nn.Transformer`` whose encoder and decoder stacks compute what ours do.

    ``nn.Transformer`` always ends each stack with a LayerNorm. Our post-norm stacks (the
    paper's) have none, since each layer already ends in one; there the reference's final norms
    are removed. Embeddings, positions and the output projection are outside ``nn.Transformer``.
    """
    c = ours.config
    with warnings.catch_warnings():  # "enable_nested_tensor ... norm_first": a fast path we do not use
        warnings.simplefilter("ignore", UserWarning)
        ref = nn.Transformer(
            d_model=c.d_model,
            nhead=c.n_heads,
            num_encoder_layers=c.n_layers,
            num_decoder_layers=c.n_layers,
            dim_feedforward=c.d_ff,
            dropout=0.0,
            activation=c.activation,
            batch_first=True,
            norm_first=c.norm_first,
        )
    ref.encoder = torch_encoder(ours.encoder)
    ref.decoder.layers = nn.ModuleList(torch_decoder_layer(layer) for layer in ours.decoder.layers)
    if c.norm_first:
        ref.decoder.norm.load_state_dict(ours.decoder.norm.state_dict())
    else:
        ref.decoder.norm = None
    return ref.to(ours.generator.weight.dtype)


@torch.no_grad()
def torch_encoder(ours: Encoder) -> nn.TransformerEncoder:
    """An ``nn.TransformerEncoder`` computing what our stack of encoder layers computes.

    The reference for the encoder of :class:`~transformer_lib.model.Transformer` and for the
    stacks of lesson 13's BERT (a padding mask) and GPT (a causal mask, PyTorch's ``mask``).
    A post-norm stack has no final LayerNorm, so the reference's is removed.
    """
    first = ours.layers[0]
    with warnings.catch_warnings():  # "enable_nested_tensor ... norm_first": a fast path we do not use
        warnings.simplefilter("ignore", UserWarning)
        ref = nn.TransformerEncoder(torch_encoder_layer(first), len(ours.layers), enable_nested_tensor=False)
    ref.layers = nn.ModuleList(torch_encoder_layer(layer) for layer in ours.layers)
    ref.norm = copy.deepcopy(ours.norm) if first.residual1.norm_first else None
    return ref


def torch_masks(src: Tensor, tgt: Tensor, pad_id: int) -> dict[str, Tensor]:
    """Our model's masks in ``nn.Transformer``'s convention (True = may *not* attend)."""
    causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool, device=tgt.device).tril()
    return dict(
        src_key_padding_mask=src == pad_id,
        tgt_key_padding_mask=tgt == pad_id,
        memory_key_padding_mask=src == pad_id,
        tgt_mask=~causal,
    )
