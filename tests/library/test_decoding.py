"""Greedy decoding, sampling and beam search: cache equality, beam 1 = greedy, sampled distributions; BLEU."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_lib import BOS_ID, InvalidValue, Transformer, TransformerConfig
from transformer_lib.decoding import NEVER_GENERATED, beam_search, greedy_decode, length_penalty, sample
from transformer_lib.metrics import sacrebleu_score, tokenized_bleu


@pytest.fixture(scope="module", params=["sinusoidal", "learned", "rotary"])
def model(request):
    """Every test runs with each kind of positions: the cache must know where a step is."""
    torch.manual_seed(0)
    return Transformer(TransformerConfig.preset("tiny", vocab_size=40, positional=request.param)).eval()


@pytest.fixture(scope="module")
def src():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 40, (5, 8), generator=g)
    src[1, 5:] = 0
    src[3, 3:] = 0
    return src


def test_cache_gives_the_same_logits_step_by_step(model, src):
    memory, src_mask = model.encode(src)
    tgt = torch.randint(4, 40, (5, 6), generator=torch.Generator().manual_seed(2))
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    steps = torch.cat([model.decode(tgt[:, i : i + 1], memory, src_mask, cache) for i in range(6)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_a_static_cache_gives_the_same_logits_step_by_step(model, src):
    """Fixed buffers longer than the output, written in place: the unwritten positions stay hidden."""
    memory, src_mask = model.encode(src)
    tgt = torch.randint(4, 40, (5, 6), generator=torch.Generator().manual_seed(2))
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache(capacity=9)
    steps = torch.cat([model.decode(tgt[:, i : i + 1], memory, src_mask, cache) for i in range(6)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    attn = model.decoder.layers[0].self_attn
    assert cache.length.item() == 6 and cache.layers[0].self_attn.k.shape == (5, attn.n_kv_heads, 9, attn.d_head)
    rows = torch.tensor([4, 4, 0, 1, 2])
    kept = cache.layers[0].cross_attn.k
    cache.reorder(rows)  # in place: the buffers keep their addresses
    assert cache.layers[0].cross_attn.k is kept
    torch.testing.assert_close(cache.layers[0].self_attn.k[0], cache.layers[0].self_attn.k[1])


class HostReads(TorchDispatchMode):
    """Records every operation that reads device values back to the host: ``.item()``, ``int(t)`` and
    ``if t`` (``_local_scalar_dense``), or an output whose shape depends on the values (``nonzero``)."""

    READS = frozenset({"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select"})

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in self.READS:
            self.seen.append(func._schema.name)
        return func(*args, **(kwargs or {}))


@torch.no_grad()
def test_a_static_cache_step_never_reads_the_device_from_the_host(model, src, monkeypatch):
    """Recording a CUDA graph fails on any read of device values by the host. A step over the static
    cache, run as it would be recorded, makes none; the token ids' check, which reads two, steps aside."""
    memory, src_mask = model.encode(src)
    cache = model.new_cache(capacity=9)
    first = model.decode(torch.full((5, 1), BOS_ID), memory, src_mask, cache, last=True)  # cross-attention's keys
    token = first[:, -1].argmax(-1, keepdim=True)  # (batch, 1)
    with HostReads() as outside:  # the check reads when no graph is being recorded: the detector sees it
        model.decode(token, memory, src_mask, cache, last=True)
    assert outside.seen == ["aten::_local_scalar_dense"] * 2  # the smallest id and the largest
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)  # as torch.cuda.graph records
    with HostReads() as recording:
        model.decode(token, memory, src_mask, cache, last=True)
    assert recording.seen == []
    assert cache.length.item() == 3


def test_a_static_cache_must_fit_the_model(model):
    with pytest.raises(InvalidValue, match="exceeds max_len"):
        model.new_cache(capacity=model.config.max_len + 1)
    with pytest.raises(InvalidValue, match="capacity of at least 1"):
        model.new_cache(capacity=0)


def test_last_scores_only_the_last_position(model, src):
    memory, src_mask = model.encode(src)
    tgt = torch.randint(4, 40, (5, 6), generator=torch.Generator().manual_seed(3))
    last = model.decode(tgt, memory, src_mask, last=True)
    assert last.shape == (5, 1, 40)
    assert torch.allclose(last, model.decode(tgt, memory, src_mask)[:, -1:], atol=1e-6)


def test_greedy_same_with_and_without_cache(model, src):
    assert greedy_decode(model, src, max_extra=10, use_cache=True) == greedy_decode(
        model, src, max_extra=10, use_cache=False
    )


@pytest.mark.parametrize("beam", [2, 4])
def test_beam_same_with_and_without_cache(model, src, beam):
    a = beam_search(model, src, beam, max_extra=10, use_cache=True)
    assert a == beam_search(model, src, beam, max_extra=10, use_cache=False)


def test_the_static_step_gives_the_same_tokens(model, src):
    """cuda_graph=True on a CPU runs the static cache's step as it is: the same tokens as the growing cache."""
    assert greedy_decode(model, src, max_extra=10, cuda_graph=True) == greedy_decode(model, src, max_extra=10)
    for beam in (2, 4):
        static = beam_search(model, src, beam, max_extra=10, cuda_graph=True)
        assert static == beam_search(model, src, beam, max_extra=10)


def test_cuda_graph_without_the_cache_says_what_it_needs(model, src):
    with pytest.raises(InvalidValue, match="needs use_cache=True"):
        greedy_decode(model, src, use_cache=False, cuda_graph=True)


def test_beam_size_one_equals_greedy(model, src):
    assert beam_search(model, src, beam_size=1, max_extra=10) == greedy_decode(model, src, max_extra=10)


def test_outputs_respect_the_length_limit(model, src):
    lengths = (src != 0).sum(1)
    for hyps in (greedy_decode(model, src, max_extra=3), beam_search(model, src, 3, max_extra=3)):
        for hyp, n in zip(hyps, lengths.tolist(), strict=True):
            assert len(hyp) < n + 3  # the last allowed token is <eos>, which is stripped
            assert 0 not in hyp and 1 not in hyp and 2 not in hyp


def test_beam_finds_a_sequence_at_least_as_probable_as_greedy(model, src):
    def log_prob(ids, row):
        tgt = torch.tensor([[1, *ids]])
        logits = model(src[row : row + 1], tgt).log_softmax(-1)[0]
        targets = [*ids, 2]
        return sum(logits[i, t].item() for i, t in enumerate(targets))

    greedy = greedy_decode(model, src, max_extra=10)
    beam = beam_search(model, src, beam_size=8, alpha=0.0, max_extra=10)
    for row in range(src.shape[0]):
        assert log_prob(beam[row], row) >= log_prob(greedy[row], row) - 1e-4


def test_length_penalty_values():
    assert length_penalty(torch.tensor(1.0), 0.6).item() == pytest.approx(1.0)
    assert length_penalty(torch.tensor(7.0), 1.0).item() == pytest.approx(2.0)


def test_bleu_variants():
    refs = ["A dog runs in the snow.", "Two men play football."]
    assert sacrebleu_score(refs, refs) == pytest.approx(100.0)
    lower = ["a dog runs in the snow.", "two men play football."]
    assert tokenized_bleu(lower, refs) == pytest.approx(100.0)
    assert sacrebleu_score(lower, refs) < 100.0
    with pytest.raises(ValueError, match="must pair up"):
        sacrebleu_score(refs, refs[:1])


def seeded(seed=0):
    return torch.Generator().manual_seed(seed)


def test_sampling_with_top_k_1_is_greedy(model, src):
    assert sample(model, src, top_k=1, max_extra=10, generator=seeded()) == greedy_decode(model, src, max_extra=10)


def test_sampling_repeats_with_a_seeded_generator_with_and_without_the_cache(model, src):
    first = sample(model, src, max_extra=10, generator=seeded(5))
    assert first == sample(model, src, max_extra=10, generator=seeded(5), use_cache=False)
    assert first != sample(model, src, max_extra=10, generator=seeded(6))


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, None), (2.0, None), (0.5, None), (1.0, 3)])
def test_sampled_first_tokens_follow_the_tempered_distribution(model, temperature, top_k):
    """20,000 draws of the first token against the probabilities computed from the logits."""
    one = torch.tensor([[7, 2]])
    with torch.no_grad():
        memory, src_mask = model.encode(one)
        logits = model.decode(torch.tensor([[BOS_ID]]), memory, src_mask)[0, -1]
    logits[NEVER_GENERATED] = float("-inf")
    logits = logits / temperature
    if top_k:
        logits[logits < logits.topk(top_k).values[-1]] = float("-inf")
    expected = logits.softmax(-1)
    draws = sample(model, one.expand(20_000, -1), temperature, top_k, max_extra=0, generator=seeded())
    counts = torch.bincount(torch.tensor([d[0] if d else 2 for d in draws]), minlength=expected.numel())
    observed = counts[: expected.numel()].double() / 20_000
    # Total variation distance: about 0.02 from chance here; 0.15 and more from the wrong temperature.
    assert (observed - expected.double()).abs().sum() / 2 < 0.05
    if top_k:
        assert (counts > 0).sum() <= top_k


def test_sampling_never_emits_pad_or_bos_and_refuses_bad_settings(model, src):
    for out in sample(model, src, temperature=5.0, max_extra=10, generator=seeded()):
        assert not set(out) & set(NEVER_GENERATED)
    with pytest.raises(InvalidValue, match="temperature must be positive"):
        sample(model, src, temperature=0)
    with pytest.raises(InvalidValue, match="top_k must be at least 1"):
        sample(model, src, top_k=0)
