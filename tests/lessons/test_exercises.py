"""The exercises' checks: every exercise is checked or open-ended, every solution passes its check,
typical wrong answers fail with the line that names the mistake."""

import ast
import builtins
import contextlib
import importlib
import io
import math
import re
import shlex
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import transformer_lib
from book_tools.cli import main as tools
from book_tools.sweep import plan
from conftest import run_cli
from transformer_lib import PAD_ID, Tokenizer, load_multi30k
from transformer_lib.cli import TOOLS_COMMANDS, main
from transformer_lib.coursework import exercises
from transformer_lib.coursework.exercises import EXERCISES, check
from transformer_lib.errors import InvalidValue
from transformer_lib.records import archive_of
from transformer_lib.training.run_config import load_config

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


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
# every exercise runnable as stated: the files it names exist, its commands run, its names import

CODE = re.compile(r"`([^`\n]+)`")
# A command as a lesson's cell runs it (the kernel's Python), or as a terminal in the repository does.
COMMAND = re.compile(r"^!?(?:PYTHONPATH=\S+ )?(?:\{sys\.executable\}|python) -m (transformer_lib|book_tools) (.+)$")
# The lessons' folders, as their set-up cells name them, seen from the repository's root.
FOLDERS = {"{REPO}": ".", "{RESULTS}": "results/multi30k"}
# Names an exercise may use without the lesson or the package defining them: PyTorch's.
TORCH = (torch, torch.nn, F, torch.Tensor)


def lesson_names(path: Path) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """Every name the lesson's code defines or imports, and of those, the ones imported from
    transformer_lib: name -> (module, attribute)."""
    names, from_package = set(), {}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        # a shell or magic line (`!python ...`) as a statement that defines nothing
        lines = [re.sub(r"^(\s*)[!%].*", r"\1pass", line) for line in cell.source.splitlines()]
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Import):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    names.add(alias.asname or alias.name)
                    if (node.module or "").startswith("transformer_lib"):
                        from_package[alias.asname or alias.name] = (node.module, alias.name)
    return names, from_package


def flat_items(path: Path) -> dict[str, str]:
    """The lesson's exercises, each on one line: a span and the word after it may be a line apart."""
    return {number: " ".join(text.split()) for number, text in exercise_items(path).items()}


def exercise_code(path: Path) -> list[tuple[str, str, str]]:
    """(exercise, code span, the text right after it) for every `code` span of the lesson's exercises."""
    lesson = path.name[:2]
    return [
        (f"{lesson}.{number}", m.group(1), text[m.end() : m.end() + 12])
        for number, text in flat_items(path).items()
        for m in CODE.finditer(text)
    ]


def commands(path: Path) -> list[tuple[str, list[str]]]:
    """(exercise, arguments) of every `python -m transformer_lib ...` (or `book_tools ...`) an exercise
    shows, with the lesson's folder variables as the repository's paths."""
    found = []
    for exercise, span, _ in exercise_code(path):
        match = COMMAND.match(span)
        if match:
            line = match.group(2)
            for variable, folder in FOLDERS.items():
                line = line.replace(variable, folder)
            found.append((exercise, shlex.split(line)))
    return found


COMMANDS = [(exercise, args) for path in NOTEBOOKS for exercise, args in commands(path)]


def is_record(path: Path) -> bool:
    """Whether ``path`` is in the repository: a file or folder, or a file in a sweep's archive."""
    return path.exists() or archive_of(path) is not None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_file_an_exercise_names_exists(path):
    for exercise, span, _ in exercise_code(path):
        if "/" in span and " " not in span and "(" not in span and "://" not in span:
            assert is_record(ROOT / span), f"exercise {exercise} names {span}, which the repository lacks"


def is_command(name: str) -> bool:
    """Whether ``python -m transformer_lib NAME --help`` (or the book's tools', for theirs) succeeds."""
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), pytest.raises(SystemExit) as stop:
        (tools if name in TOOLS_COMMANDS else main)([name, "--help"])
    return stop.value.code == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_command_an_exercise_asks_for_is_shown_in_full(path):
    """An exercise that says "with the `score` command" shows the line to run: arguments are not a guess."""
    shown = {(exercise, args[0]) for exercise, args in commands(path)}
    for exercise, span, after in exercise_code(path):
        if after.startswith(" command"):
            assert is_command(span), f"exercise {exercise}: no package has a `{span}` command"
            assert (exercise, span) in shown, f"exercise {exercise} asks for the `{span}` command without showing it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_command_an_exercise_shows_names_the_package_that_has_it(path):
    """The tools' commands (sweep, ...) run with `-m book_tools`, the library's with `-m transformer_lib`."""
    for exercise, span, _ in exercise_code(path):
        match = COMMAND.match(span)
        if match:
            name = shlex.split(match.group(2))[0]
            package = "book_tools" if name in TOOLS_COMMANDS else "transformer_lib"
            assert match.group(1) == package, f"exercise {exercise}: `{name}` is a command of {package}"


@pytest.mark.parametrize("exercise, args", COMMANDS, ids=[f"{e}-{a[0]}" for e, a in COMMANDS])
def test_every_command_an_exercise_shows_runs(exercise, args, mirror, monkeypatch, tmp_path):
    """Run from the repository's root, as written; a command that trains runs its first step only:
    every config it would train is written and checked (`sweep`), or loaded (`train`)."""
    monkeypatch.chdir(ROOT)
    if args[0] == "sweep":
        assert plan(args[1], tmp_path / "sweep"), exercise
    elif args[0] == "train":
        load_config(args[args.index("--config") + 1])
    else:
        result = run_cli(*args)
        assert result.returncode == 0, f"exercise {exercise}: {result.stderr.strip()}"
        assert result.stdout.strip(), f"exercise {exercise}: the command printed nothing"


def importable(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_name_an_exercise_uses_imports(path):
    """A name in an exercise is the lesson's own, PyTorch's, a builtin, one the reader is asked to
    write, or transformer_lib's; transformer_lib's must import from where the lesson says."""
    defined, from_package = lesson_names(path)
    for number, text in flat_items(path).items():
        exercise = f"{path.name[:2]}.{number}"
        written = set()  # "Write `rate(step, d_model, warmup)`": the function and its parameters
        for m in re.finditer(r"Write\s+`(\w+)\(([^`]*)\)`", text):
            written |= {m.group(1), *re.findall(r"\w+", m.group(2))}
        settings = set(re.findall(r"`(\w+)(?:=|` ?=)", text))  # `warmup=1`, `block` = 16: values to set
        for m in CODE.finditer(text):
            span, after = m.group(1), text[m.end() : m.end() + 12]
            chain = re.match(r"([A-Za-z_]\w*)((?:\.\w+)*)", span)
            if not chain or "/" in span or COMMAND.match(span) or after.startswith(" command"):
                continue
            root, attributes = chain.group(1), chain.group(2).split(".")[1:]
            if root in from_package:
                assert importable(*from_package[root]), f"exercise {exercise}: {root} no longer imports"
            elif root == "transformer_lib":
                module, found = transformer_lib, True
                for attribute in attributes:
                    found = hasattr(module, attribute)
                    if not found:
                        break
                    module = getattr(module, attribute)
                assert found, f"exercise {exercise}: {span} does not import"
            elif not (
                root in defined
                or root in written
                or root in settings
                or root == "self"
                or hasattr(builtins, root)
                or any(hasattr(module, root) for module in TORCH)
            ):
                assert hasattr(transformer_lib, root), (
                    f"exercise {exercise} names `{span}`, which neither the lesson nor transformer_lib defines"
                )


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
