"""Token embeddings and position encodings against hand-computed values and their defining properties."""

import math

import pytest
import torch

from transformer_lib import (
    LearnedPositionalEncoding,
    TokenEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    sinusoidal_table,
)


def test_sinusoidal_table_hand_computed_entries():
    table = sinusoidal_table(50, 8)
    assert table[0].tolist() == [0.0, 1.0] * 4
    assert table[1, 0] == pytest.approx(math.sin(1.0))
    assert table[1, 1] == pytest.approx(math.cos(1.0))
    assert table[7, 4] == pytest.approx(math.sin(7 / 10000 ** (4 / 8)))
    assert table[49, 7] == pytest.approx(math.cos(49 / 10000 ** (6 / 8)))


def test_shift_is_a_fixed_linear_map():
    """PE(pos + k) = M_k PE(pos) with the same M_k at every position (section 3.5)."""
    table = sinusoidal_table(100, 16).double()
    k = 5
    solution = torch.linalg.lstsq(table[:-k], table[k:]).solution
    torch.testing.assert_close(table[:-k] @ solution, table[k:], atol=1e-6, rtol=0)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    torch.manual_seed(0)
    embed = TokenEmbedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(embed(tokens), embed.weight[tokens] * 4.0)


def test_rotary_scores_depend_only_on_the_offset():
    torch.manual_seed(1)
    q, k = torch.randn(16), torch.randn(16)
    at = lambda x, pos: apply_rotary(x.expand(pos + 1, 16))[pos]  # noqa: E731 - x placed at position pos
    assert at(q, 3) @ at(k, 1) == pytest.approx(float(at(q, 12) @ at(k, 10)), rel=1e-4)
    assert at(q, 3) @ at(k, 1) != pytest.approx(float(at(q, 3) @ at(k, 2)), rel=1e-4)
    torch.testing.assert_close(at(q, 7).norm(), q.norm())  # a rotation keeps lengths


def test_positions_beyond_max_len_are_clear_errors():
    with pytest.raises(ValueError, match="cannot extrapolate"):
        LearnedPositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="d_model must be even"):
        sinusoidal_table(4, 7)


def test_alibi_slopes_are_the_papers_for_8_heads():
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    assert torch.equal(alibi_slopes(8), expected)


def test_alibi_bias_hand_computed_and_with_a_cache_offset():
    bias = alibi_bias(torch.tensor([0.5, 2.0]), q_len=3)
    assert bias.shape == (1, 2, 3, 3)
    assert torch.equal(bias[0, 0], torch.tensor([[0.0, -0.5, -1.0], [-0.5, 0.0, -0.5], [-1.0, -0.5, 0.0]]))
    assert torch.equal(bias[0, 1], 4 * bias[0, 0])
    # A decoding step at position 5 with 6 cached keys: the last row of the full bias.
    step = alibi_bias(torch.tensor([0.5, 2.0]), q_len=1, offset=5)
    assert torch.equal(step, alibi_bias(torch.tensor([0.5, 2.0]), q_len=6)[:, :, -1:])


def test_alibi_scores_depend_only_on_the_distance():
    bias = alibi_bias(alibi_slopes(4), q_len=20)[0]
    for h in range(4):
        assert bias[h].diagonal(offset=-3).unique().numel() == 1
