"""Attention against PyTorch's own: F.scaled_dot_product_attention and nn.MultiheadAttention."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib import AttentionCache, MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention
from transformer_lib.reference import torch_multihead_attention


def random_padding(batch, length, generator=None):
    """Token ids with a random amount of trailing padding (at least one real token per row)."""
    tokens = torch.randint(4, 50, (batch, length), generator=generator)
    for row in range(batch):
        keep = int(torch.randint(1, length + 1, (1,), generator=generator))
        tokens[row, keep:] = 0
    return tokens


@pytest.mark.parametrize("masked", ["none", "padding", "causal", "both"])
def test_attention_equals_torch_sdpa(masked):
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 5)
    mask = {
        "none": None,
        "padding": padding_mask(random_padding(3, 6)),
        "causal": causal_mask(6),
        "both": padding_mask(random_padding(3, 6)) & causal_mask(6),
    }[masked]
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 6))
    if mask is not None:
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_attention_hand_computed_case():
    # One query, two keys: scores 1 * 2 / sqrt(1) = 2 and 0 -> weights e^2 / (e^2 + 1), 1 / (e^2 + 1).
    q, k, v = torch.tensor([[1.0]]), torch.tensor([[2.0], [0.0]]), torch.tensor([[10.0], [20.0]])
    out, weights = scaled_dot_product_attention(q, k, v)
    e2 = torch.exp(torch.tensor(2.0))
    torch.testing.assert_close(weights, torch.stack([e2, torch.tensor(1.0)])[None] / (e2 + 1))
    torch.testing.assert_close(out, ((10 * e2 + 20) / (e2 + 1)).reshape(1, 1))


@pytest.mark.parametrize(
    ("kind", "masked"),
    [("self", "none"), ("self", "padding"), ("self", "causal"), ("cross", "none"), ("cross", "padding")],
)
def test_multihead_equals_nn_multiheadattention(kind, masked):
    torch.manual_seed(1)
    ours = MultiHeadAttention(d_model=32, n_heads=4).eval()
    ref = torch_multihead_attention(ours).eval()
    x = torch.randn(3, 7, 32)
    memory = torch.randn(3, 5, 32) if kind == "cross" else x
    k_len = memory.shape[1]
    tokens = random_padding(3, k_len)
    ours_mask, ref_kwargs = None, {}
    if masked == "padding":
        ours_mask, ref_kwargs = padding_mask(tokens), {"key_padding_mask": tokens == 0}
    elif masked == "causal":
        ours_mask, ref_kwargs = causal_mask(7), {"attn_mask": ~causal_mask(7)[0, 0]}
    expected, _ = ref(x, memory, memory, need_weights=False, **ref_kwargs)
    for need_weights in (False, True):  # fused path and by-hand path
        ours.need_weights = need_weights
        torch.testing.assert_close(ours(x, memory, memory, ours_mask), expected, atol=1e-6, rtol=1e-5)


def test_kept_weights_equal_nn_multiheadattention_average():
    torch.manual_seed(2)
    ours = MultiHeadAttention(d_model=16, n_heads=2).eval()
    ours.need_weights = True
    x = torch.randn(2, 5, 16)
    ours(x, x, x)
    _, ref_weights = torch_multihead_attention(ours)(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(ours.weights, ref_weights, atol=1e-6, rtol=1e-5)


def test_gradcheck_attention_float64():
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = causal_mask(4)
    assert torch.autograd.gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], (q, k, v))


def test_gradcheck_multihead_float64():
    torch.manual_seed(4)
    mha = MultiHeadAttention(d_model=8, n_heads=2).double()
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    for need_weights in (False, True):
        mha.need_weights = need_weights
        assert torch.autograd.gradcheck(lambda x: mha(x, x, x, causal_mask(3)), (x,))


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    length=st.integers(2, 9),
    heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
def test_padding_invariance(batch, length, heads, seed):
    """Whatever stands at padded key positions never changes the outputs."""
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model=8, n_heads=heads).eval()
    tokens = random_padding(batch, length, g)
    mask = padding_mask(tokens)
    x = torch.randn(batch, length, 8, generator=g)
    noise = torch.randn(batch, length, 8, generator=g) * (tokens == 0)[..., None]
    query = torch.randn(batch, 3, 8, generator=g)
    torch.testing.assert_close(mha(query, x, x, mask), mha(query, x + noise, x + noise, mask))


@settings(max_examples=25, deadline=None)
@given(length=st.integers(2, 9), cut=st.integers(0, 8), seed=st.integers(0, 2**16))
def test_causality(length, cut, seed):
    """With a causal mask, changing positions after t never changes outputs up to t."""
    cut = cut % length
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model=8, n_heads=2).eval()
    x = torch.randn(2, length, 8, generator=g)
    changed = x.clone()
    changed[:, cut + 1 :] = torch.randn(2, length - cut - 1, 8, generator=g)
    mask = causal_mask(length)
    torch.testing.assert_close(mha(x, x, x, mask)[:, : cut + 1], mha(changed, changed, changed, mask)[:, : cut + 1])


@settings(max_examples=25, deadline=None)
@given(length=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_self_attention_without_positions_is_permutation_equivariant(length, seed):
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model=8, n_heads=2).eval()
    x = torch.randn(2, length, 8, generator=g)
    perm = torch.randperm(length, generator=g)
    torch.testing.assert_close(mha(x, x, x)[:, perm], mha(x[:, perm], x[:, perm], x[:, perm]))


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="d_model=30 must be divisible by n_heads=4"):
        MultiHeadAttention(30, 4)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match="must be boolean"):
        mha(x, x, x, torch.ones(2, 1, 1, 5))
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, x, x, torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, x, x, torch.ones(3, 1, 1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="heads=2"):  # three heads' masks for two heads
        mha(x, x, x, torch.ones(2, 3, 5, 5, dtype=torch.bool))
    mha(x, x, x, torch.ones(2, 2, 5, 5, dtype=torch.bool))  # one mask a head is fine
    with pytest.raises(ValueError, match="same batch size"):
        mha(x, torch.randn(3, 5, 8), torch.randn(3, 5, 8))
    with pytest.raises(ValueError, match=r"query must be \(batch, seq, d_model=8\)"):
        mha(torch.randn(2, 5, 6), x, x)


@pytest.mark.parametrize("rotary", [False, True])
def test_a_cache_fed_one_position_at_a_time_gives_full_causal_attention(rotary):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, rotary=rotary).eval()
    x = torch.randn(2, 7, 32)  # (batch, seq, d_model)
    full = mha(x, x, x, causal_mask(7))
    cache = AttentionCache()
    steps = [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], None, cache) for t in range(7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7 and cache.k.shape == (2, 4, 7, 8)  # (batch, heads, length, d_head)
    cache.reorder(torch.tensor([1, 1]))
    assert torch.equal(cache.k[0], cache.k[1])
