"""Encoder and decoder layers and stacks against nn.TransformerEncoderLayer / DecoderLayer."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib import Encoder, EncoderLayer, FeedForward, causal_mask, padding_mask
from transformer_lib.layers import DecoderLayer
from transformer_lib.reference import torch_decoder_layer, torch_encoder_layer

D, HEADS, D_FF = 32, 4, 64


def padded_tokens(batch, length, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, 50, (batch, length), generator=g)
    tokens[0, length // 2 :] = 0  # the first sentence is half padding
    return tokens


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    torch.manual_seed(0)
    ours = EncoderLayer(D, HEADS, D_FF, norm_first=norm_first).eval()
    ref = torch_encoder_layer(ours).eval()
    x, tokens = torch.randn(3, 6, D), padded_tokens(3, 6, seed=0)
    expected = ref(x, src_key_padding_mask=tokens == 0)
    got = ours(x, padding_mask(tokens))
    keep = tokens != 0  # PyTorch's fast path may zero the padded rows' outputs; compare the real ones
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    torch.manual_seed(1)
    ours = DecoderLayer(D, HEADS, D_FF, norm_first=norm_first).eval()
    ref = torch_decoder_layer(ours).eval()
    x, memory, src = torch.randn(3, 5, D), torch.randn(3, 7, D), padded_tokens(3, 7, seed=1)
    expected = ref(x, memory, tgt_mask=~causal_mask(5)[0, 0], memory_key_padding_mask=src == 0)
    torch.testing.assert_close(ours(x, memory, causal_mask(5), padding_mask(src)), expected, atol=1e-5, rtol=1e-5)


def test_feed_forward_acts_on_each_position_alone():
    torch.manual_seed(2)
    ff = FeedForward(D, D_FF)
    x = torch.randn(2, 6, D)
    perm = torch.randperm(6)
    torch.testing.assert_close(ff(x)[:, perm], ff(x[:, perm]))
    torch.testing.assert_close(ff(x)[:, 2], ff(x[:, 2:3])[:, 0])


@settings(max_examples=20, deadline=None)
@given(length=st.integers(2, 8), seed=st.integers(0, 2**16), norm_first=st.booleans())
def test_encoder_without_positions_is_permutation_equivariant(length, seed, norm_first):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    encoder = Encoder(2, norm_first, d_model=16, n_heads=2, d_ff=32).eval()
    x = torch.randn(2, length, 16, generator=g)
    perm = torch.randperm(length, generator=g)
    torch.testing.assert_close(encoder(x)[:, perm], encoder(x[:, perm]), atol=1e-5, rtol=1e-5)


def test_gradcheck_encoder_layer_float64():
    torch.manual_seed(3)
    layer = EncoderLayer(8, 2, 16).double()
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(torch.tensor([[5, 6, 0], [5, 6, 7]]))
    assert torch.autograd.gradcheck(lambda x: layer(x, mask), (x,))


def test_unknown_activation_is_a_clear_error():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, 16, activation="swish")
