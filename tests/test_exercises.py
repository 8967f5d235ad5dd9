"""The exercises' checks: every exercise is checked or open-ended, every solution passes its check,
typical wrong answers fail with the line that names the mistake."""

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from transformer_lib import PAD_ID, Tokenizer, load_multi30k
from transformer_lib.coursework import exercises
from transformer_lib.coursework.exercises import EXERCISES, check
from transformer_lib.errors import InvalidValue

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def exercise_items(path: Path) -> dict[str, str]:
    """The numbered items of a lesson's Exercises section: {"1": text, ...}."""
    cells = nbformat.read(path, as_version=4).cells
    section = next(c.source for c in cells if c.cell_type == "markdown" and c.source.startswith("## Exercises"))
    return dict(re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", section, flags=re.M | re.S))


def solution_cells(path: Path) -> list[str]:
    cells = nbformat.read(path, as_version=4).cells
    return [c.source for c in cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_is_checked_or_open_ended(path):
    lesson = path.name[:2]
    items = exercise_items(path)
    assert items, "no numbered exercises"
    solutions = solution_cells(path)
    for number, text in items.items():
        exercise = f"{lesson}.{number}"
        open_ended = text.startswith("*(open-ended")
        called = f'check("{exercise}"' in text
        assert open_ended != called, f"exercise {exercise} must be marked open-ended or show its check, not both"
        if called:
            assert exercise in EXERCISES, f"{exercise} has no check in transformer_lib.coursework.exercises"
            assert sum(f'check("{exercise}"' in s for s in solutions) == 1, f"{exercise} needs one solution"
    cells = nbformat.read(path, as_version=4).cells
    for cell in cells:
        if "solution" in cell.metadata.get("tags", []):
            assert "hide-input" in cell.metadata.tags and cell.metadata.jupyter.source_hidden, "solutions are hidden"


def test_every_check_belongs_to_a_lesson_exercise():
    shown = {f"{p.name[:2]}.{n}" for p in NOTEBOOKS for n, t in exercise_items(p).items() if "check(" in t}
    assert set(EXERCISES) == shown


@pytest.fixture(scope="module")
def lesson_02_namespace(mirror):
    """What lesson 2's solution reads from the lesson: its training text and a tokenizer of it."""
    both_train = load_multi30k("train", "de") + load_multi30k("train", "en")
    return {"both_train": both_train, "tokenizer": Tokenizer.train(both_train[::10], vocab_size=2000)}


SOLUTIONS = [(p, i) for p in NOTEBOOKS for i, _ in enumerate(solution_cells(p))]


@pytest.mark.parametrize("path, index", SOLUTIONS, ids=[f"{p.stem[:2]}-{i}" for p, i in SOLUTIONS])
def test_solution_passes_its_check(path, index, monkeypatch, request):
    results = []  # every check the solution calls, through the module it imports check from
    monkeypatch.setattr(exercises, "check", lambda *args: results.append(check(*args)) or results[-1])
    namespace = {"load_multi30k": load_multi30k}
    if path.name.startswith("02_"):
        namespace |= request.getfixturevalue("lesson_02_namespace")
    torch.manual_seed(0)
    exec(solution_cells(path)[index], namespace)
    assert len(results) == 1 and results[0].passed, results


# ---------------------------------------------------------------------------------------------
# wrong answers: each fails, with the line that names its mistake


def scores(q, k, scale=True):
    return q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)


def temperature_multiplied(q, k, v, tau):
    return (scores(q, k) * tau).softmax(-1) @ v


def temperature_unscaled(q, k, v, tau):
    return (scores(q, k, scale=False) / tau).softmax(-1) @ v


def additive_mask_flipped(q, k, v, mask):
    return (scores(q, k) - 1e9 * mask).softmax(-1) @ v


def additive_mask_ignored(q, k, v, mask):
    return scores(q, k).softmax(-1) @ v


def rms_subtracting_mean(x):
    return F.layer_norm(x, x.shape[-1:])


def rms_over_positions(x):
    return x / x.pow(2).mean(-2, keepdim=True).sqrt()


def sample_argmax(logits, tau):
    return logits.argmax(-1)


def sample_multiplied(logits, tau):
    return torch.multinomial((logits * tau).softmax(-1), 1).squeeze(-1)


def linear_not_causal(q, k, v):
    q, k = F.elu(q) + 1, F.elu(k) + 1
    return (q @ (k.transpose(-2, -1) @ v)) / (q @ k.sum(-2, keepdim=True).transpose(-2, -1))


def corrupt_all_masked(tokens, mask_id, vocab_size, protected, generator):
    chosen = ~torch.isin(tokens, torch.tensor(protected)) & (torch.rand(tokens.shape, generator=generator) < 0.15)
    return torch.where(chosen, mask_id, tokens), torch.where(chosen, tokens, PAD_ID)


def corrupt_padding_too(tokens, mask_id, vocab_size, protected, generator):
    chosen = torch.rand(tokens.shape, generator=generator) < 0.15
    return torch.where(chosen, mask_id, tokens), torch.where(chosen, tokens, PAD_ID)


WRONG = [
    ("01.2", (128,), "still smaller"),
    ("01.2", (1000,), "already larger"),
    ("01.2", ("256",), "as a number"),
    ("02.3", ("a", None), "occurs in the training split"),
    ("02.3", ("ab", None), "one character"),
    ("03.1", (lambda d: 2 * math.pi * 10000,), "the paper's bound"),
    ("03.1", (lambda d: 10000 ** ((d - 2) / d),), "factor 2π"),
    ("04.1", (temperature_multiplied,), "multiplied by τ"),
    ("04.1", (temperature_unscaled,), "1/√d_k"),
    ("04.1", (lambda q, k, v, tau: v,), "returned shape"),
    ("04.2", (additive_mask_flipped,), "True means 'may attend'"),
    ("04.2", (additive_mask_ignored,), "ignores the mask"),
    ("05.2", (torch.randn(2, 1, 512),), "with one token"),
    ("05.2", (torch.zeros(1, 4, 512),), "the outputs agree"),
    ("05.2", (torch.randn(1, 4, 64),), "shape (batch, seq, 512)"),
    ("05.3", (4 * 512 * 512 + 4 * 512,), "bias"),
    ("05.3", (3 * 512 * 512,), "W^O"),
    ("06.3", (rms_subtracting_mean,), "that is LayerNorm"),
    ("06.3", (rms_over_positions,), "over positions"),
    ("07.2", (3_152_384,), "that is an encoder layer"),
    ("07.2", (4_200_960,), "gain and a bias"),
    ("08.1", (63_082_496 - 37_000 * 512 + 20_000 * 512,), "tied model"),
    ("08.1", (63_082_496 - 37_000 * 512 + 2 * 20_000 * 512,), "third"),
    ("08.2", (2 * 512 * 512,), "one table"),
    ("09.4", (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),), "warm-up part"),
    ("09.4", (lambda s, d, w: min(s**-0.5, s * w**-1.5),), "expected"),
    ("10.3", (sample_argmax,), "not its argmax"),
    ("10.3", (sample_multiplied,), "divide the logits by τ"),
    ("12.3", (linear_not_causal,), "must stop at position i"),
    ("13.7", (corrupt_all_masked,), "became <mask>"),
    ("13.7", (corrupt_padding_too,), "padding was chosen"),
    ("13.7", (lambda *args: 1 / 0,), "raised ZeroDivisionError"),
]


@pytest.mark.parametrize("exercise, answer, mistake", WRONG, ids=[f"{e}-{m[:20]}" for e, _, m in WRONG])
def test_wrong_answer_fails_and_names_the_mistake(exercise, answer, mistake, request):
    if exercise == "02.3":
        request.getfixturevalue("mirror")  # the check reads the Multi30k files
    result = check(exercise, *answer)
    assert not result.passed
    assert mistake in result.message, result.message
    assert "\n" not in repr(result) and repr(result).startswith(f"✗ {exercise} not yet: ")


def test_unknown_exercise_is_one_clear_error():
    with pytest.raises(InvalidValue, match=r"no checked exercise '04\.9'; the checked ones are 01\.2"):
        check("04.9", None)
