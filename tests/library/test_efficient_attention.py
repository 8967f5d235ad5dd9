"""Lesson 12's variants against full attention: grouped-query heads, sliding windows, tiled attention."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import (
    InvalidValue,
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    causal_mask,
    greedy_decode,
    sliding_window_mask,
    tiled_attention,
)


def test_grouped_query_attention_equals_a_by_hand_reference():
    """4 query heads sharing 2 key-value heads: heads 0, 1 read kv head 0; heads 2, 3 read kv head 1."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, n_heads=4, n_kv_heads=2)
    x = torch.randn(3, 7, 32)
    mask = causal_mask(7)
    d_head = 8
    q = mha.q_proj(x).view(3, 7, 4, d_head).transpose(1, 2)  # (batch, 4, 7, 8)
    k = mha.k_proj(x).view(3, 7, 2, d_head).transpose(1, 2)  # (batch, 2, 7, 8)
    v = mha.v_proj(x).view(3, 7, 2, d_head).transpose(1, 2)
    heads = [
        F.scaled_dot_product_attention(q[:, h], k[:, h // 2], v[:, h // 2], attn_mask=mask[0, 0]) for h in range(4)
    ]
    expected = mha.out_proj(torch.cat(heads, dim=-1))
    torch.testing.assert_close(mha(x, x, x, mask), expected, atol=1e-6, rtol=1e-5)
    mha.need_weights = True  # the by-hand path gives the same
    torch.testing.assert_close(mha(x, x, x, mask), expected, atol=1e-6, rtol=1e-5)


def test_grouped_query_attention_with_a_padding_mask():
    """The fused path (no copies of the shared heads) matches the by-hand path on padded input."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, n_heads=8, n_kv_heads=2).eval()
    x = torch.randn(2, 6, 32)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (batch, 1, 1, k_len)
    fused = mha(x, x, x, mask)
    mha.need_weights = True
    torch.testing.assert_close(fused, mha(x, x, x, mask), atol=1e-6, rtol=1e-5)
    assert mha.weights[1, :, :, 4:].abs().max() == 0  # no head of the second row reads its padding


def test_n_kv_heads_equal_to_n_heads_is_standard_attention():
    torch.manual_seed(0)
    standard = MultiHeadAttention(32, 4)
    grouped = MultiHeadAttention(32, 4, n_kv_heads=4)
    grouped.load_state_dict(standard.state_dict())
    x = torch.randn(2, 5, 32)
    assert torch.equal(standard(x, x, x), grouped(x, x, x))


def test_fewer_kv_heads_mean_fewer_parameters_and_a_smaller_cache():
    sizes = {}
    for kv in (4, 2, 1):
        torch.manual_seed(0)
        config = TransformerConfig.preset("tiny", vocab_size=30, n_kv_heads=kv)
        model = Transformer(config).eval()
        cache = model.new_cache()
        src = torch.randint(4, 30, (2, 6))
        memory, src_mask = model.encode(src)
        model.decode(torch.ones(2, 3, dtype=torch.long), memory, src_mask, cache)
        layer = cache.layers[0].self_attn
        sizes[kv] = layer.k.shape
        assert greedy_decode(model, src, max_extra=4, use_cache=True) == greedy_decode(
            model, src, max_extra=4, use_cache=False
        )
    assert sizes == {4: (2, 4, 3, 16), 2: (2, 2, 3, 16), 1: (2, 1, 3, 16)}


def test_bad_kv_heads_are_one_line_errors():
    with pytest.raises(InvalidValue, match="n_heads=4 must be divisible by n_kv_heads=3"):
        MultiHeadAttention(32, 4, n_kv_heads=3)
    with pytest.raises(InvalidValue, match="n_kv_heads must be a positive integer"):
        MultiHeadAttention(32, 4, n_kv_heads=0)
    with pytest.raises(InvalidValue, match="n_heads=8 must be divisible by n_kv_heads=3"):
        TransformerConfig(vocab_size=10, n_kv_heads=3)


def test_sliding_window_mask_hand_computed_and_its_limits():
    expected = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(sliding_window_mask(5, window=2)[0, 0], expected)
    assert torch.equal(sliding_window_mask(6, window=6), causal_mask(6))
    assert torch.equal(sliding_window_mask(4, window=1)[0, 0], torch.eye(4, dtype=torch.bool))
    with pytest.raises(InvalidValue, match="window must be at least 1"):
        sliding_window_mask(4, window=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("q_len", "k_len", "block"), [(17, 17, 4), (8, 33, 5), (64, 64, 64), (3, 3, 100)])
def test_tiled_attention_equals_full_attention(causal, q_len, k_len, block):
    if causal and q_len != k_len:
        pytest.skip("the causal case is self-attention")
    g = torch.Generator().manual_seed(q_len * 100 + k_len)
    q, k = torch.randn(2, 3, q_len, 16, generator=g), torch.randn(2, 3, k_len, 16, generator=g)
    v = torch.randn(2, 3, k_len, 8, generator=g) * 5
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(tiled_attention(q, k, v, block=block, causal=causal), expected, atol=1e-5, rtol=1e-5)


def test_tiled_attention_survives_scores_that_overflow_a_plain_softmax():
    """The running maximum keeps exp() finite where exp(score) alone is inf in float32."""
    q = torch.full((1, 4, 8), 30.0)
    k = torch.full((1, 6, 8), 30.0)
    v = torch.randn(1, 6, 3)
    assert torch.isinf(torch.exp(q @ k.transpose(-2, -1) / 8**0.5)).all()
    torch.testing.assert_close(tiled_attention(q, k, v, block=2), F.scaled_dot_product_attention(q, k, v))
