"""Checks for the lessons' exercises: ``check("04.1", your_function)`` passes or says what is wrong.

Each check compares a learner's answer with an independent reference (a formula, or the
package's tested module) on inputs chosen so that the typical mistakes show, and names the
mistake it recognises in one line, with the helpers of :mod:`.checks` that the assignments'
tests use too. An exercise without a check is marked *(open-ended)* in its lesson.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lib.config import PAD_ID, UNK_ID
from transformer_lib.coursework.checks import Wrong, close, gap, inputs, tensor_of
from transformer_lib.errors import InvalidValue


@dataclass(frozen=True)
class Result:
    """The outcome of one check; shown as one line, true when the answer passed."""

    exercise: str
    passed: bool
    message: str  # what passed, or what is still wrong

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        verdict = "✓ {} passed" if self.passed else "✗ {} not yet"
        return f"{verdict.format(self.exercise)}: {self.message}"


@dataclass(frozen=True)
class Exercise:
    """One checked exercise: its id ("lesson.number"), a title, and the function that checks."""

    id: str
    title: str
    run: Callable[..., str]  # returns the line shown on success; raises Wrong otherwise


EXERCISES: dict[str, Exercise] = {}


def _exercise(exercise_id: str, title: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def register(run: Callable[..., str]) -> Callable[..., str]:
        EXERCISES[exercise_id] = Exercise(exercise_id, title, run)
        return run

    return register


def check(exercise: str, *answer: Any) -> Result:
    """Check an answer to exercise ``"LL.N"`` (lesson LL, exercise N); see each lesson's exercises."""
    if exercise not in EXERCISES:
        raise InvalidValue(f"no checked exercise {exercise!r}; the checked ones are {', '.join(sorted(EXERCISES))}")
    try:
        result = Result(exercise, True, EXERCISES[exercise].run(*answer))
    except Wrong as wrong:
        result = Result(exercise, False, str(wrong))
    except Exception as error:  # the learner's code failed: say so in one line, as the check's verdict
        result = Result(exercise, False, f"your answer raised {type(error).__name__}: {error}")
    return result


# ---------------------------------------------------------------------------------------------
# helpers


def _number(answer: Any, what: str) -> float:
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise Wrong(f"expected {what} as a number, got {type(answer).__name__}")
    return float(answer)


def _reference_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, tau: float = 1.0) -> Tensor:
    """PyTorch's fused attention (same mask convention), with the temperature in its scale."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / (tau * math.sqrt(q.shape[-1])))


D_MODEL, D_FF = 512, 2048  # the base model's sizes, which the counting exercises ask about


def _base_sublayers() -> tuple[int, int, int]:
    """Parameters of the base model's attention (with biases), feed-forward network and LayerNorm."""
    d = D_MODEL
    return 4 * d * d + 4 * d, 2 * d * D_FF + D_FF + d, 2 * d


# ---------------------------------------------------------------------------------------------
# the checks, lesson by lesson


@_exercise("01.2", "Crossing point: where attention's 2n²d overtakes its projections' 4nd² (d = 128)")
def _crossing_point(n: Any) -> str:
    n = _number(n, "the sequence length n")
    d = 128
    if n in (2 * d, 2 * d + 1):
        return f"at n = {2 * d} both terms are {2 * (2 * d) ** 2 * d:,}; beyond it, attention's own dominate"
    quadratic, projections = 2 * n**2 * d, 4 * n * d**2
    side = "still smaller" if quadratic < projections else "already larger"
    raise Wrong(f"at n = {n:g}, 2n²d = {quadratic:,.0f} is {side} than 4nd² = {projections:,.0f}")


@_exercise("02.3", "A character of test_2017_mscoco (German) that training never saw, encoded as <unk>")
def _unknown_character(char: Any, tokenizer: Any) -> str:
    from transformer_lib.data import load_multi30k

    if not isinstance(char, str) or len(char) != 1:
        raise Wrong(f"expected one character (a str of length 1), got {char!r}")
    if not any(char in line for line in load_multi30k("test_2017_mscoco", "de")):
        raise Wrong(f"{char!r} does not occur in load_multi30k('test_2017_mscoco', 'de')")
    for lang in ("de", "en"):
        if any(char in line for line in load_multi30k("train", lang)):
            raise Wrong(f"{char!r} occurs in the training split ({lang}), so the tokenizer has seen it")
    ids = tokenizer.encode(char)
    if UNK_ID not in ids:
        raise Wrong(f"tokenizer.encode({char!r}) = {ids} holds no UNK_ID ({UNK_ID}): is this the lesson's tokenizer?")
    return f"{char!r} (U+{ord(char):04X}) is in the test set only and encodes to {ids}"


@_exercise("03.1", "The longest wavelength of the sinusoidal encodings, as a function of d_model")
def _longest_wavelength(wavelength: Any) -> str:
    for d_model in (4, 64, 512):
        got = _number(wavelength(d_model), f"wavelength({d_model})")
        expected = 2 * math.pi * 10000 ** ((d_model - 2) / d_model)
        if not math.isclose(got, expected, rel_tol=1e-6):
            if math.isclose(got, 2 * math.pi * 10000, rel_tol=1e-6):
                raise Wrong(
                    f"wavelength({d_model}) = 2π·10000, the paper's bound; the last pair of dimensions "
                    "does not reach it (which i does it have?)"
                )
            if math.isclose(got * 2 * math.pi, expected, rel_tol=1e-6):
                raise Wrong(f"wavelength({d_model}) is off by a factor 2π: sin(ω·pos) repeats every 2π/ω positions")
            raise Wrong(f"wavelength({d_model}) = {got:,.6g}, which is not the period of any dimension's sinusoid")
    return f"wavelength(512) = {wavelength(512):,.0f} positions"


@_exercise("04.1", "Attention with a temperature: softmax(QKᵀ / (τ√d_k)) V")
def _temperature(attention_with_temperature: Any) -> str:
    q, k, v = inputs(2, 5, 16, seed=1, scale=2), inputs(2, 7, 16, seed=2, scale=2), inputs(2, 7, 8, seed=3)
    for tau in (0.1, 1.0, 10.0):
        out = tensor_of(attention_with_temperature(q, k, v, tau), (2, 5, 8), "attention_with_temperature(q, k, v, tau)")
        expected = _reference_attention(q, k, v, tau=tau)
        if close(out, expected):
            continue
        if tau != 1.0 and close(out, _reference_attention(q, k, v, tau=1 / tau)):
            raise Wrong(f"at τ = {tau:g} the scores are multiplied by τ: divide them by τ√d_k")
        if close(out, _reference_attention(q * math.sqrt(16), k, v, tau=tau)):
            raise Wrong(f"at τ = {tau:g} the scores miss the 1/√d_k scale")
        raise Wrong(f"at τ = {tau:g} the output differs from softmax(QKᵀ/(τ√d_k))V by up to {gap(out, expected)}")
    return "τ = 0.1, 1 and 10 all agree with softmax(QKᵀ/(τ√d_k))V"


@_exercise("04.2", "Masking by adding a large negative number instead of masked_fill(-inf)")
def _additive_mask(attention_with_additive_mask: Any) -> str:
    q, k, v = inputs(3, 6, 16, seed=4), inputs(3, 6, 16, seed=5), inputs(3, 6, 8, seed=6)
    mask = inputs(3, 6, 6, seed=7) > 0
    mask[..., 0], mask[..., 1] = True, False  # every row keeps a key, and so does the flipped mask
    out = tensor_of(
        attention_with_additive_mask(q, k, v, mask), (3, 6, 8), "attention_with_additive_mask(q, k, v, mask)"
    )
    if close(out, _reference_attention(q, k, v, mask)):
        return "equal to masked_fill(-inf) to rounding in float32"
    if close(out, _reference_attention(q, k, v, ~mask)):
        raise Wrong("the constant goes where the mask is True; in this package True means 'may attend'")
    if close(out, _reference_attention(q, k, v)):
        raise Wrong("the output ignores the mask: add the large negative number to the masked scores")
    raise Wrong(f"the output differs from masked attention by up to {gap(out, _reference_attention(q, k, v, mask))}")


@_exercise("05.2", "An input on which one full-width head and 8 heads with the same weights differ")
def _one_head_or_eight(x: Any) -> str:
    from transformer_lib.attention import MultiHeadAttention

    if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != 512:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise Wrong(f"expected a float tensor of shape (batch, seq, 512), got {got}")
    with torch.random.fork_rng():  # the same weights every time, without touching the learner's generator
        torch.manual_seed(0)
        one, eight = MultiHeadAttention(512, 1).eval(), MultiHeadAttention(512, 8).eval()
    eight.load_state_dict(one.state_dict())
    with torch.no_grad():
        x = x.float()
        gap = (one(x, x, x) - eight(x, x, x)).abs().max().item()
    if gap > 1e-3:
        return f"the outputs differ by up to {gap:.2f}: 8 heads mix 8 softmaxes, one head mixes one"
    if x.shape[1] == 1:
        raise Wrong("with one token every head gives it weight 1, so both compute W^O W^V x: use several tokens")
    raise Wrong(f"on this input the outputs agree (difference {gap:.2g}): every softmax row is the same in both")


@_exercise("05.3", "The parameters of MultiHeadAttention(512, 8, bias=False)")
def _no_bias_parameters(count: Any) -> str:
    count = _number(count, "a parameter count")
    d = D_MODEL
    if count == 4 * d * d:
        return f"4 · 512² = {4 * d * d:,}: W^Q, W^K, W^V and W^O, whatever the number of heads"
    hints = {
        4 * d * d + 4 * d: "that counts the four bias vectors",
        3 * d * d: "W^O counts too",
        4 * d * d // 8: "that is one head's share: count all eight",
    }
    raise Wrong(hints.get(count, f"{count:,.0f} is not the count of four {d} × {d} projections"))


@_exercise("06.3", "RMSNorm: divide by the root-mean-square over the features, no mean subtracted")
def _rms_norm(rms_norm: Any) -> str:
    x = inputs(4, 7, 32, seed=8) + 3.0  # a mean far from zero shows a subtracted mean
    out = tensor_of(rms_norm(x), (4, 7, 32), "rms_norm(x)")
    expected = x / x.pow(2).mean(-1, keepdim=True).sqrt()
    if close(out, expected, atol=1e-4):
        centred = x - x.mean(-1, keepdim=True)
        return "matches x / √mean(x²); on inputs of mean 0 it is LayerNorm: " + (
            "yes" if close(rms_norm(centred), F.layer_norm(centred, (32,)), atol=1e-4) else "no"
        )
    if close(out, F.layer_norm(x, (32,)), atol=1e-4):
        raise Wrong("your output subtracts the mean: that is LayerNorm; RMSNorm only divides by √mean(x²)")
    if close(out, x / x.pow(2).mean(-2, keepdim=True).sqrt(), atol=1e-4):
        raise Wrong("normalised over positions: RMSNorm averages over the last dimension, the features")
    raise Wrong(f"rms_norm(x) differs from x / √mean(x²) by up to {gap(out, expected)}")


@_exercise("07.2", "The parameters of one base decoder layer (d_model 512, 8 heads, d_ff 2048)")
def _decoder_layer_parameters(count: Any) -> str:
    count = _number(count, "a parameter count")
    d, d_ff = D_MODEL, D_FF
    attention, ffn, norm = _base_sublayers()
    if count == 2 * attention + ffn + 3 * norm:
        return f"{count:,.0f}; an encoder layer has {attention + ffn + 2 * norm:,}: cross-attention and a third norm"
    hints = {
        attention + ffn + 2 * norm: "that is an encoder layer: the decoder adds cross-attention and its LayerNorm",
        2 * attention + ffn + 2 * norm: "three sub-layers, three LayerNorms",
        2 * attention + ffn: "LayerNorm has a gain and a bias of d_model each, per sub-layer",
        2 * (4 * d * d) + 2 * d * d_ff + 3 * norm: "every linear map has a bias as well",
    }
    raise Wrong(hints.get(count, f"{count:,.0f} is not the sum of two attentions, the FFN and three LayerNorms"))


@_exercise("08.1", "The base model's parameters with two 20,000-token vocabularies and no tying")
def _untied_parameters(count: Any) -> str:
    count = _number(count, "a parameter count")
    d, n, v = D_MODEL, 6, 20_000
    attention, ffn, norm = _base_sublayers()
    body = n * (attention + ffn + 2 * norm) + n * (2 * attention + ffn + 3 * norm)  # post-norm: no final norms
    if count == body + 3 * v * d:
        return f"{count:,.0f}: two embeddings and the output projection, {3 * v * d:,} of them"
    if count == body + 2 * v * d:
        raise Wrong("untied, the output projection is a third 20,000 × 512 matrix")
    if count == body + v * d:
        raise Wrong("that is the tied model: untie the two embeddings and the output projection")
    raise Wrong(f"{count:,.0f} is not the body plus the vocabulary matrices")


@_exercise("08.2", "The parameters that learned positions (max_len=512) add to the base model")
def _learned_position_parameters(count: Any) -> str:
    count = _number(count, "a parameter count")
    if count == 512 * 512:
        return "512 · 512 = 262,144: one table, shared by the encoder and the decoder"
    if count == 2 * 512 * 512:
        raise Wrong("the package builds one table for both stacks: check with count_parameters")
    raise Wrong(f"{count:,.0f} is not max_len × d_model")


@_exercise("09.4", "The paper's learning rate as a function of the step")
def _schedule(rate: Any) -> str:
    d_model, warmup = 512, 4000
    for step in (1, 100, 4000, 10_000, 100_000):
        got = _number(rate(step, d_model, warmup), f"rate({step}, 512, 4000)")
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        if not math.isclose(got, expected, rel_tol=1e-6):
            side = "warm-up" if step < warmup else "decay"
            raise Wrong(f"rate({step}, 512, 4000) = {got:.3g}, expected {expected:.3g} (the {side} part)")
    return f"its peak, at step 4,000, is {d_model**-0.5 * warmup**-0.5:.2e}"


@_exercise("10.3", "Sampling the next token at temperature τ")
def _sampling(draw_token: Any) -> str:
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -3.0]).repeat(20_000, 1)  # (batch, vocab)
    for tau in (0.5, 2.0):
        ids = tensor_of(draw_token(logits, tau), (20_000,), "draw_token(logits, tau)")
        if ids.dtype not in (torch.int64, torch.int32) or ids.min() < 0 or ids.max() >= 5:
            raise Wrong(f"draw_token(logits, tau) should return ids in [0, 5), got {ids.dtype} {ids.unique()[:5]}")
        frequencies = torch.bincount(ids.long(), minlength=5).double() / len(ids)
        if (ids == ids[0]).all():
            raise Wrong(f"at τ = {tau:g} every draw is token {ids[0].item()}: draw from the softmax, not its argmax")
        if (frequencies - (logits[0] / tau).softmax(-1)).abs().max() < 0.02:
            continue
        if (frequencies - (logits[0] * tau).softmax(-1)).abs().max() < 0.02:
            raise Wrong(f"at τ = {tau:g} the draws follow softmax(logits · τ): divide the logits by τ")
        raise Wrong(f"at τ = {tau:g} token frequencies {frequencies.numpy().round(3)} are not softmax(logits / τ)")
    return "20,000 draws follow softmax(logits / τ) at τ = 0.5 and 2"


@_exercise("11.5", "Checkpoint averaging: the element-wise mean of several state dicts")
def _average_weights(average: Any) -> str:
    states = [{"w": inputs(3, 4, seed=s), "b": inputs(4, seed=10 + s), "step": torch.tensor(s)} for s in range(4)]
    out = average([dict(state) for state in states])
    if not isinstance(out, dict) or set(out) != {"w", "b", "step"}:
        raise Wrong(f"average should return a dict with the same keys, got {type(out).__name__}")
    for name in ("w", "b"):
        mean = torch.stack([state[name] for state in states]).mean(0)
        got = tensor_of(out[name], tuple(mean.shape), f"average(...)[{name!r}]")
        if close(got, states[-1][name]):
            raise Wrong(f"{name!r} is the last state's: average all of them")
        if close(got, mean * len(states)):
            raise Wrong(f"{name!r} is the sum: divide by the number of states")
        if not close(got, mean):
            raise Wrong(f"{name!r} differs from the mean of the four states by up to {gap(got, mean)}")
    if out["step"].is_floating_point() or out["step"].item() != 3:
        raise Wrong("an integer buffer (a step count) cannot be averaged: take the last state's")
    return "the mean of every float tensor, integer buffers from the last state"


@_exercise("11.6", "The minutes a run took to reach a BLEU, read off its curve by linear interpolation")
def _minutes_to(minutes_to: Any) -> str:
    curve = [(5, 30.37), (10, 38.36), (20, 39.43), (40, 40.71)]  # lesson 11's 40-minute CPU run, de→en
    cases = [(15.185, 2.5), (30.37, 5.0), (34.365, 7.5), (39.43, 20.0), (40.07, 30.0)]
    for target, expected in cases:
        got = _number(minutes_to(curve, target), f"minutes_to(curve, {target})")
        if not math.isclose(got, expected, rel_tol=1e-6):
            if target < curve[0][1] and math.isclose(got, curve[0][0]):
                raise Wrong(f"below the first point the curve starts from (0 minutes, BLEU 0): expected {expected}")
            raise Wrong(f"minutes_to(curve, {target}) = {got:g}, expected {expected:g} (linear between points)")
    if minutes_to(curve, 41.0) is not None:
        raise Wrong("a BLEU the curve never reaches should give None")
    return f"35 BLEU after {minutes_to(curve, 35.0):.1f} minutes on the curve of lesson 11's 40-minute CPU run"


@_exercise("12.3", "Causal linear attention with a running sum")
def _causal_linear_attention(attend: Any) -> str:
    q, k, v = inputs(2, 9, 8, seed=9), inputs(2, 9, 8, seed=10), inputs(2, 9, 4, seed=11)
    out = tensor_of(attend(q, k, v), (2, 9, 4), "causal_linear_attention(q, k, v)")
    scores = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)  # (batch, n, n), all positive
    scores = scores * torch.ones(9, 9).tril()
    expected = (scores @ v) / scores.sum(-1, keepdim=True)
    if close(out, expected):
        return "equal to the quadratic form with a causal mask"
    k_later = k.clone()
    k_later[:, 5:] += 1.0
    if not close(attend(q, k_later, v)[..., :5, :], out[..., :5, :]):
        raise Wrong("changing keys after position 4 changes earlier outputs: the sums must stop at position i")
    raise Wrong(f"differs from the causal quadratic form (φ = elu + 1) by up to {gap(out, expected)}")


@_exercise("13.7", "BERT's corruption: 15 % chosen, then 80 % <mask>, 10 % random, 10 % unchanged")
def _bert_masking(corrupt: Any) -> str:
    mask_id, vocab_size, protected = 4, 1000, (0, 1, 2, 3, 4)
    tokens = torch.randint(5, vocab_size, (200, 500), generator=torch.Generator().manual_seed(0))
    tokens[:, -20:] = 0  # padding
    inputs, labels = corrupt(tokens, mask_id, vocab_size, protected, torch.Generator().manual_seed(1))
    inputs = tensor_of(inputs, tuple(tokens.shape), "the inputs")
    labels = tensor_of(labels, tuple(tokens.shape), "the labels")
    chosen = labels != PAD_ID
    if (labels[chosen] != tokens[chosen]).any():
        raise Wrong("labels must hold the original token at chosen positions and PAD_ID elsewhere")
    if chosen[:, -20:].any() or (inputs[:, -20:] != 0).any():
        raise Wrong("padding was chosen: protected ids are never corrupted")
    if ((inputs != tokens) & ~chosen).any():
        raise Wrong("a token that was not chosen changed: only chosen tokens are corrupted")
    share = chosen[:, :-20].double().mean().item()
    if abs(share - 0.15) > 0.01:
        raise Wrong(f"{share:.1%} of the tokens were chosen, expected 15 %")
    picked = inputs[chosen]
    masked = (picked == mask_id).double().mean().item()
    unchanged = (picked == tokens[chosen]).double().mean().item()
    if picked.min() < 5 and (picked[picked != mask_id] < 5).any():
        raise Wrong("a random replacement drew a special id: draw from the ordinary ids above the protected ones")
    if abs(masked - 0.8) > 0.02 or abs(unchanged - 0.1) > 0.02:
        raise Wrong(
            f"of the chosen tokens {masked:.0%} became <mask> and {unchanged:.0%} stayed; expected 80 % and 10 %"
        )
    random = 1 - masked - unchanged
    return f"{share:.1%} chosen; of those {masked:.0%} <mask>, {random:.0%} random, {unchanged:.0%} kept"
