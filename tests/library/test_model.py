"""The whole Transformer: nn.Transformer equality, parameter count, masks, configuration errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib import Transformer, TransformerConfig, causal_mask, count_parameters, padding_mask
from transformer_lib.reference import torch_masks, torch_transformer


def tiny(**overrides):
    torch.manual_seed(0)
    return Transformer(TransformerConfig.preset("tiny", vocab_size=50, **overrides)).eval()


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 50, (3, 7), generator=g)
    src[1, 4:] = 0  # padding
    tgt = torch.randint(4, 50, (3, 5), generator=g)
    tgt[2, 3:] = 0
    return src, tgt


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_equals_nn_transformer(norm_first):
    model = tiny(norm_first=norm_first, n_layers=3)
    ref = torch_transformer(model).eval()
    src, tgt = batch()
    src_x = model.positional(model.src_embed(src))
    tgt_x = model.positional(model.tgt_embed(tgt))
    expected = ref(src_x, tgt_x, **torch_masks(src, tgt, pad_id=0))
    memory, src_mask = model.encode(src)
    tgt_mask = padding_mask(tgt) & causal_mask(tgt.shape[1])
    hidden = model.decoder(tgt_x, memory, tgt_mask, src_mask)
    torch.testing.assert_close(hidden, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(src, tgt), model.generator(expected), atol=1e-5, rtol=1e-5)


def test_base_parameter_count_matches_the_formula():
    model = Transformer(TransformerConfig.preset("base", vocab_size=37_000))
    d, d_ff, n, v = 512, 2048, 6, 37_000
    attention = 4 * (d * d + d)
    ffn = 2 * d * d_ff + d_ff + d
    norm = 2 * d
    expected = v * d + n * (attention + ffn + 2 * norm) + n * (2 * attention + ffn + 3 * norm)
    assert count_parameters(model) == expected == 63_082_496
    assert model.generator.weight is model.src_embed.weight is model.tgt_embed.weight


def test_untied_model_has_three_matrices():
    tied, untied = tiny(), tiny(tie_embeddings=False)
    assert count_parameters(untied) - count_parameters(tied) == 2 * 50 * 64


@settings(max_examples=20, deadline=None)
@given(cut=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_future_target_tokens_never_change_earlier_logits(cut, seed):
    model = tiny()
    src, tgt = batch(seed % 7)
    tgt = tgt.clamp_min(4)  # no padding in the target here
    changed = tgt.clone()
    g = torch.Generator().manual_seed(seed)
    changed[:, cut + 1 :] = torch.randint(4, 50, changed[:, cut + 1 :].shape, generator=g)
    torch.testing.assert_close(model(src, tgt)[:, : cut + 1], model(src, changed)[:, : cut + 1])


@settings(max_examples=20, deadline=None)
@given(extra=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_extra_source_padding_changes_nothing(extra, seed):
    model = tiny()
    src, tgt = batch(seed % 7)
    padded = torch.cat([src, torch.zeros(src.shape[0], extra, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=1e-5)


def test_positions_matter_for_the_model():
    model = tiny()
    src, tgt = batch()
    assert not torch.allclose(model(src, tgt), model(src.flip(1), tgt))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 30, "n_heads": 4}, "d_model=30 must be divisible by n_heads=4"),
        ({"dropout": 1.5}, r"dropout must be in \[0, 1\)"),
        ({"n_layers": 0}, "n_layers must be a positive integer"),
        ({"activation": "tanh"}, "activation must be one of"),
        ({"positional": "rope"}, r"positional must be one of \['sinusoidal', 'learned', 'rotary'\]"),
    ],
)
def test_bad_config_values_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.preset("tiny", vocab_size=50, **overrides)


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        TransformerConfig.preset("huge", vocab_size=50)


def test_bad_inputs_are_clear_errors():
    model = tiny()
    src, tgt = batch()
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 50\)"):
        model(src + 100, tgt)
    with pytest.raises(TypeError, match="integer tensor"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(src, tgt[:2])
    with pytest.raises(ValueError, match=r"src must be \(batch, src_len\)"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match="beyond max_len=8"):
        Transformer(TransformerConfig.preset("tiny", vocab_size=50, max_len=8))(src, torch.ones(3, 9, dtype=torch.long))


def test_rotary_positions_make_the_encoder_see_order_but_add_nothing_to_embeddings():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", vocab_size=50, positional="rotary")).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 2]])
    x = model.src_embed(src)
    assert torch.equal(model.positional(x), x)  # nothing added to the embeddings
    memory, _ = model.encode(src)
    permutation = torch.tensor([3, 1, 4, 0, 2, 5])
    permuted, _ = model.encode(src[:, permutation])
    # Without positions self-attention is permutation-equivariant (lesson 3); rotary breaks that.
    assert not torch.allclose(permuted, memory[:, permutation], atol=1e-4)
    assert all(layer.self_attn.rotary for layer in model.encoder.layers)
    assert not any(layer.cross_attn.rotary for layer in model.decoder.layers)
