"""The assignments' parts that run without Otter: the checks' helpers, the masters' structure, bad input.

Building and grading every assignment (solutions, student notebooks, seeded mistakes, hostile
submissions) runs in CI by .ci/assignments.py, a few minutes of its own; the sandbox a submission's
code runs in is tested in test_grader_sandbox.py.
"""

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import multiprocessing
import os
import re
import subprocess
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import torch
import yaml

import transformer_lib
from book_tools.cli import main as tools
from book_tools.coursework import grader, grading, guard, variants
from book_tools.coursework.checks import (
    BLEU_CEILING,
    REFERENCE_SHARE,
    copies,
    globals_of,
    standing_in,
    translation_bleu,
    without,
)
from transformer_lib import records
from transformer_lib.coursework import checks
from transformer_lib.coursework.checks import Wrong, call, defined, list_of
from transformer_lib.data import load_multi30k
from transformer_lib.errors import InvalidValue
from transformer_lib.training.run_config import load_config

ROOT = Path(__file__).resolve().parents[2]
MASTERS = grading.masters(ROOT / "assignments")


# ---------------------------------------------------------------------------------------------
# the helpers the tests are made of


def learner_attention(q, k, v):
    return transformer_lib.scaled_dot_product_attention(q, k, v)  # calls the package's own


def test_without_makes_a_component_unavailable_everywhere_and_puts_it_back():
    from transformer_lib import scaled_dot_product_attention as imported  # a learner's own reference to it

    namespace = {"sdpa": imported}
    banned = {"transformer_lib.scaled_dot_product_attention": transformer_lib.scaled_dot_product_attention}
    with without(banned, (namespace,)):
        with pytest.raises(Wrong, match=r"calls transformer_lib\.scaled_dot_product_attention: .* write it yourself"):
            learner_attention(None, None, None)
        with pytest.raises(Wrong):
            namespace["sdpa"](None, None, None)
    assert transformer_lib.scaled_dot_product_attention is imported and namespace["sdpa"] is imported


def test_globals_of_finds_a_class_methods_namespace():
    class Answer:
        def forward(self):
            return None

    assert globals_of(Answer) == (globals(),) and globals_of(learner_attention) == (globals(),)


def test_standing_in_replaces_earlier_answers_then_restores_them():
    namespace = {"attention": "the learner's"}
    with standing_in((namespace,), attention="correct", split_heads="correct"):
        assert namespace == {"attention": "correct", "split_heads": "correct"}
    assert namespace == {"attention": "the learner's"}


def test_call_turns_a_failure_into_one_line_and_stops_an_endless_loop():
    with pytest.raises(Wrong, match=r"^f raised ZeroDivisionError: division by zero$"):
        call(lambda: 1 / 0, name="f")

    def endless():
        while True:
            pass

    start = time.monotonic()
    with pytest.raises(Wrong, match=r"^endless stopped after 0.3 s: is there an endless loop\?$"):
        call(endless, name="endless", seconds=0.3)
    with pytest.raises(Wrong, match="stopped earlier"):  # not waited for a second time
        call(endless, name="endless", seconds=0.3)
    assert time.monotonic() - start < 3
    assert call(math.sqrt, 4.0, name="sqrt") == 2.0


@pytest.mark.parametrize("answer", [None, ...])
def test_an_answer_never_written_says_so(answer):
    with pytest.raises(Wrong, match="is not defined yet: write it, then run its cell"):
        defined(answer, "attention")


def test_an_answer_whose_cell_failed_says_with_what_a_failed_import_named(monkeypatch):
    failed = [
        ("import math\n\ndef split_heads(x, n):\n    pass", "SyntaxError: invalid syntax"),
        ("import no_such_module\n\ndef attention(q, k, v):\n    pass", "ModuleNotFoundError: No module named 'x'"),
    ]
    monkeypatch.setattr(checks, "FAILED_CELLS", failed)
    with pytest.raises(Wrong, match=r"^attention\(q, k, v\) is not defined: .* an import failed: ModuleNotFoundError"):
        defined(None, "attention(q, k, v)")
    with pytest.raises(Wrong, match=r"^split_heads is not defined: its cell stopped .*, SyntaxError"):
        defined(None, "split_heads")
    with pytest.raises(Wrong, match="merge_heads is not defined yet"):  # no failed cell defines it
        defined(None, "merge_heads")
    with pytest.raises(Wrong, match=r"raised NameError: name 'Counter' is not defined \(an import missing"):
        call(lambda: Counter, name="f")  # noqa: F821


# ---------------------------------------------------------------------------------------------
# what a submission may not do: change the libraries the tests use, hand in the references

CHANGED = {
    "import torch\ntorch.allclose = lambda *a, **k: True": "torch.allclose",
    "import torch.nn.functional as F\nF.softmax = None": "torch.nn.functional.softmax",
    "from torch import Tensor\nTensor.__eq__ = None": "torch.Tensor.__eq__",
    "import math\nsetattr(math, 'isclose', lambda *a, **k: True)": "math.isclose",
    "import torch\na, torch.x = 1, 2": "torch.x",
    "import torch\ndel torch.testing": "torch.testing",
    "import torch\ntorch.__dict__['allclose'] = None": "torch.__dict__",
    "import transformer_lib\nvars(transformer_lib)['MultiHeadAttention'] = None": "transformer_lib.__dict__",
    "from transformer_lib.coursework import checks as c\nc.close = None": "transformer_lib.coursework.checks.close",
    "import book_tools.coursework.checks as g\ng.without = None": "book_tools.coursework.checks.without",
    "__builtins__.isinstance = None": "builtins.isinstance",
    "import pickle\npickle.dump = print": "pickle.dump",
    "!echo magic lines are read too\nimport numpy as np\nnp.pi = 3": "numpy.pi",
}
UNCHANGED = [
    "import torch\ntorch.backends.cudnn.deterministic = True",
    "import torch\nx = torch.zeros(3)\nx[torch.arange(2)] = 1\nx.data = x * 2",
    "import torch\nclass A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = 1",
    "import torch\ntorch = None\nmath = 1",  # rebinding one's own names changes no library
    "def f(:\n    torch.allclose = None",  # a syntax error: the cell fails when run, nothing to read
    "x = " + "a." * 20_000 + "b",  # nested too deep for Python to read: the cell fails when run
]


@pytest.mark.parametrize("source, what", CHANGED.items())
def test_a_change_to_a_library_the_tests_use_is_found(source, what):
    finding = guard.tampering(["x = 1", source])
    assert finding.startswith(f"Wrong: code cell 2, line {source.count(chr(10)) + 1} changes {what}, "), finding


@pytest.mark.parametrize("source", UNCHANGED)
def test_ordinary_code_is_not_taken_for_a_change(source):
    assert guard.tampering([source]) is None


def test_an_import_in_one_cell_holds_in_the_next():
    assert "torch.allclose" in guard.tampering(["import torch", "torch.allclose = None"])


@pytest.mark.parametrize("notebook", sorted(ROOT.glob("notebooks/*.ipynb")) + MASTERS, ids=lambda p: p.stem)
def test_no_lesson_or_solution_is_taken_for_a_change(notebook):
    cells = nbformat.read(notebook, as_version=4).cells
    assert guard.tampering([c.source for c in cells if c.cell_type == "code"]) is None


BUILT_ON = {  # notebooks whose MultiQueryAttention is, or derives from, the package's class
    "direct": ["import transformer_lib", "class MultiQueryAttention(transformer_lib.MultiHeadAttention):\n    pass"],
    "imported as": ["from transformer_lib import MultiHeadAttention as M", "class MultiQueryAttention(M): pass"],
    "its module": ["import transformer_lib.attention as a", "class MultiQueryAttention(a.MultiHeadAttention): pass"],
    "assigned": ["import transformer_lib as tl\nBase = tl.MultiHeadAttention", "class MultiQueryAttention(Base): pass"],
    "through a class": [
        "from transformer_lib import MultiHeadAttention",
        "class Mine(MultiHeadAttention): pass\nclass MultiQueryAttention(Mine): pass",
    ],
    "renamed": ["from transformer_lib import *\nclass A(MultiHeadAttention): pass", "MultiQueryAttention = A"],
    "type()": ["import transformer_lib as t", "MultiQueryAttention = type('M', (t.MultiHeadAttention,), {})"],
    "a long chain of names": [
        "import transformer_lib\n" + "".join(f"a{i} = a{i + 1}\n" for i in range(3000)),
        "a3000 = transformer_lib.MultiHeadAttention\nclass MultiQueryAttention(a0): pass",
    ],
    "itself": ["import transformer_lib", "MultiQueryAttention = transformer_lib.MultiHeadAttention"],
    "unpacked": [
        "import transformer_lib",
        "Base, = transformer_lib.MultiHeadAttention,",
        "class MultiQueryAttention(Base): pass",
    ],
    "a partial": [
        "import functools, transformer_lib",
        "class Impl(transformer_lib.MultiHeadAttention): pass",
        "MultiQueryAttention = functools.partial(Impl, n_kv_heads=1)",
    ],
    "a loop": [
        "import transformer_lib",
        "for Base in [transformer_lib.MultiHeadAttention]:\n    pass",
        "class MultiQueryAttention(Base): pass",
    ],
    "bases set later": [
        "import torch, transformer_lib",
        "class MultiQueryAttention(torch.nn.Module): pass",
        "MultiQueryAttention.__bases__ = (transformer_lib.MultiHeadAttention,)",
    ],
    "its methods taken": [
        "import torch, transformer_lib",
        "class MultiQueryAttention(torch.nn.Module):\n    forward = transformer_lib.MultiHeadAttention.forward",
    ],
    "a default argument": [
        "import torch, transformer_lib",
        "class MultiQueryAttention(torch.nn.Module):\n"
        "    def __init__(self, d, h, make=transformer_lib.MultiHeadAttention):\n        super().__init__()",
    ],
    "a decorator": [
        "import transformer_lib",
        "@lambda c: transformer_lib.MultiHeadAttention\nclass MultiQueryAttention: pass",
    ],
}
OWN = [
    "import torch\nfrom transformer_lib import MultiHeadAttention\nclass MultiQueryAttention(torch.nn.Module): pass",
    # a method that names the package's class looks it up when called: taken away with it
    "import transformer_lib\n"
    "class MultiQueryAttention:\n    def f(self):\n        return transformer_lib.MultiHeadAttention",
    "A = B\nB = A\nclass MultiQueryAttention(A): pass",  # a loop of names is followed once
    "import torch\nx = x.view(3)\nclass MultiQueryAttention(x): pass",  # a name that grows: read so far
    # the student's own MultiHeadAttention, beside the package's imported to compare: left to the run
    "import torch, transformer_lib\nclass MultiHeadAttention(torch.nn.Module): pass\n"
    "class MultiQueryAttention(MultiHeadAttention): pass\n"
    "def compare():\n    from transformer_lib import MultiHeadAttention\n    return MultiHeadAttention(8, 2)",
    "import torch, transformer_lib\ndef compare(nn):\n    return nn\nclass MultiQueryAttention(torch.nn.Module): pass",
    # a name of the package that importing would run: read among the loaded modules only, never imported
    "import transformer_lib.__main__ as m\nclass MultiQueryAttention(m.X): pass",
]


@pytest.mark.parametrize("cells", BUILT_ON.values(), ids=BUILT_ON)
def test_a_class_built_on_the_packages_is_read_from_the_notebook(cells):
    from book_tools.coursework.checks import _names

    found = guard.ancestors(cells, "MultiQueryAttention")
    assert any(_names(name, transformer_lib.MultiHeadAttention) for name in found), found


@pytest.mark.parametrize("source", OWN)
def test_a_class_of_ones_own_is_not_taken_for_the_packages(source):
    from book_tools.coursework.checks import _names

    found = guard.ancestors([source], "MultiQueryAttention")
    assert not any(_names(name, transformer_lib.MultiHeadAttention) for name in found), found


def test_without_refuses_a_name_that_does_not_name_its_component():
    """Where the submission runs apart, a component is found there by its name alone."""
    from book_tools.coursework.checks import without

    with pytest.raises(ValueError, match="'Residual' does not name"), without({"Residual": transformer_lib.Encoder}):
        pass


def test_without_empties_a_librarys_own_tables_and_puts_them_back():
    import sacrebleu
    from sacrebleu.metrics import METRICS

    from book_tools.coursework.checks import without

    bleu = sacrebleu.BLEU
    with without({"sacrebleu.BLEU": bleu}):
        assert METRICS["BLEU"] is not bleu
    assert METRICS["BLEU"] is bleu


def test_the_guard_fails_every_question_with_its_finding():
    @dataclasses.dataclass
    class Result:  # the two fields of Otter's TestCaseResult the guard sets
        message: str | None
        passed: bool

    files = {q: SimpleNamespace(test_case_results=[Result(None, True), Result(None, True)]) for q in ("q1", "q2")}
    results = SimpleNamespace(results=files, set_output=lambda text: setattr(results, "output", text))
    plugin = guard.LibraryGuard.__new__(guard.LibraryGuard)  # Otter passes it a submission; none is needed here
    plugin.before_execution(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import math\nmath.pi = 3")]))
    plugin.after_grading(results)
    assert all(not r.passed and "changes math.pi" in r.message for f in files.values() for r in f.test_case_results)
    assert results.output.startswith("Wrong: code cell 1, line 2 changes math.pi")


@contextlib.contextmanager
def check_that(what: str):
    """Name the case that failed: a disguise the check did not see through."""
    try:
        yield
    except BaseException as error:
        raise AssertionError(f"{what}: {error}") from None


def test_translations_that_copy_the_references_are_not_graded_however_disguised(tmp_path, mirror, monkeypatch):
    """A line copies its reference once Unicode (NFKC), case, spacing and punctuation are set aside, or
    within a few characters of it, or with every word of it in order and others put between; beyond a
    quarter of such lines the file is refused (a trained model's: about 10 %)."""
    monkeypatch.chdir(tmp_path)
    references = load_multi30k("test_2016_flickr", "en")
    recorded = records.read_text(ROOT / "results/multi30k/cpu/de_en/test_2016_flickr.hyp.txt").splitlines()
    handed_in = tmp_path / "translations.de-en.txt"
    handed_in.write_text("\n".join(references) + "\n", encoding="utf-8")
    with pytest.raises(Wrong, match=r"1,000 of 1,000 lines copy test_2016_flickr's references"):
        translation_bleu(handed_in.name, "test_2016_flickr", "en")
    disguises = {
        "doubled spaces": lambda line: line.replace(" ", "  "),
        "lower case, tokenised": lambda line: line.lower().replace(".", " ."),
        "full-width letters": lambda line: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in line),
        "a word swapped": lambda line: line.replace(" a ", " the ", 1),
        "words put between its words": lambda line: " ".join(
            w + " wonderfully" * (i % 4 == 1) for i, w in enumerate(line.split())
        ),
    }
    for what, disguise in disguises.items():
        lines = [disguise(r) for r in references[:300]] + recorded[300:]
        handed_in.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with check_that(what), pytest.raises(Wrong, match=r" 3\d\d of 1,000 lines copy"):
            translation_bleu(handed_in.name, "test_2016_flickr", "en")
    assert 0.05 < copies(recorded, references) / 1000 < 0.15  # a trained model's: graded
    handed_in.write_text("\n".join(recorded) + "\n", encoding="utf-8")
    assert 40 < translation_bleu(handed_in.name, "test_2016_flickr", "en") < 42


@pytest.mark.parametrize(
    "content, says",
    [
        ("translations.de-en.txt".encode("utf-16"), "is not UTF-8 text (saved as UTF-16?)"),
        (None, "no file translations.de-en.txt next to the notebook"),
    ],
)
def test_a_translations_file_that_cannot_be_read_says_what_to_hand_in(tmp_path, monkeypatch, content, says):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "translations.de-en.txt").write_bytes(content)
    with pytest.raises(Wrong, match=re.escape(says)) as raised:
        checks.handed_in_lines("translations.de-en.txt")
    assert "UTF-8" in str(raised.value) and "\n" not in str(raised.value)


def test_a_translations_file_named_wrong_says_what_to_hand_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Wrong, match="should be the file's name, a string, got list"):
        checks.handed_in_lines(["a dog runs ."])
    with pytest.raises(Wrong, match="not a file handed in beside the notebook"):  # the grader's copies only
        checks.handed_in_lines("/etc/hostname")


# ---------------------------------------------------------------------------------------------
# the master notebooks


def questions(master: Path) -> list[dict]:
    cells = nbformat.read(master, as_version=4).cells
    configs = [yaml.safe_load(c.source.split("\n", 1)[1]) for c in cells if c.source.startswith("# BEGIN QUESTION")]
    prompts = {m[0]: int(m[1]) for c in cells for m in re.findall(r"\*\*Question (\d+) \((\d+) points?", c.source)}
    for config in configs:
        config["stated"] = prompts.get(config["name"].removeprefix("q"))
    return configs


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_each_assignment_has_its_questions_with_the_points_its_prompts_state(master):
    configs = questions(master)
    graded = [c for c in configs if not c.get("manual")]
    assert len(graded) >= (1 if "capstone" in master.stem else 4), "at least four auto-graded questions"
    assert any(c.get("manual") for c in configs), "a written question, graded by hand"
    assert all(c["stated"] == c["points"] for c in configs), [(c["name"], c["stated"], c["points"]) for c in configs]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_each_assignment_is_graded_with_the_guard_then_the_cell_time_limit(master):
    config = yaml.safe_load(nbformat.read(master, as_version=4).cells[0].source.split("\n", 1)[1])
    assert config["generate"]["plugins"] == [
        "book_tools.coursework.guard.LibraryGuard",  # first: the cells it names are the student's
        "book_tools.coursework.grading.CellTimeLimit",
    ]


def test_every_auto_graded_question_has_two_correct_and_three_wrong_variants():
    answers = yaml.safe_load((ROOT / "assignments/variants.yaml").read_text(encoding="utf-8"))
    for master in MASTERS:
        graded = {c["name"] for c in questions(master) if not c.get("manual")}
        mine = answers[master.parent.name]
        assert set(mine) == graded, master.stem
        for question, kinds in mine.items():
            assert len(kinds["correct"]) >= 2 and len(kinds["wrong"]) >= 3, (master.stem, question)


def test_public_tests_carry_no_points_and_hidden_ones_the_questions():
    for master in MASTERS:
        for question in variants.read_master(master).questions.values():
            if question.manual:
                continue
            points = question.test_points()
            assert all(points[t.name] == 0 for t in question.tests if not t.hidden), (master.stem, question.name)
            assert sum(points.values()) == question.points, (master.stem, question.name)


def test_public_tests_import_only_the_package():
    """A student on Colab has the package, not the book's tools: only the hidden tests may import them."""
    for master in MASTERS:
        for question in variants.read_master(master).questions.values():
            for test in question.tests:
                if not test.hidden:
                    assert "book_tools" not in test.source, (master.stem, question.name, test.name)


def test_every_assignment_has_a_seeded_mistake():
    mistakes = yaml.safe_load((ROOT / "assignments/mistakes.yaml").read_text(encoding="utf-8"))
    assert sorted(mistakes) == sorted(m.parent.name for m in MASTERS)


# ---------------------------------------------------------------------------------------------
# bad input: one line, no traceback


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["grade", "nothing.zip", "a.ipynb"], "no autograder zip nothing.zip"),
        (["assign", "no_such_folder"], "no folder no_such_folder"),
        (["assign", "--release", "0.2"], "--release takes a release tag vX.Y.Z"),
    ],
)
def test_bad_input_is_one_line(arguments, message, capsys):
    assert tools(arguments) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_grade_refuses_what_is_not_an_autograder_or_a_submission(tmp_path, capsys):
    autograder = tmp_path / "autograder.zip"
    autograder.write_bytes(b"not a zip")
    assert tools(["grade", str(autograder), str(tmp_path)]) == 2
    assert "is not an autograder zip: give the autograder.zip that assign wrote" in capsys.readouterr().err
    with zipfile.ZipFile(autograder, "w") as archive:
        archive.writestr("otter_config.json", "{}")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    assert tools(["grade", str(autograder), str(tmp_path / "notes.txt")]) == 2
    assert "is not a submission: give notebooks (.ipynb), zips or folders of them" in capsys.readouterr().err
    assert tools(["grade", str(autograder), str(tmp_path)]) == 2  # the folder holds only the autograder
    assert "no submissions besides the autograder" in capsys.readouterr().err


def notebook_bytes(assignment: str | None = "a9", cells: tuple[str, ...] = ()) -> bytes:
    metadata = {"otter": {"assignment_name": assignment}} if assignment else {}
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata=metadata)
    return nbformat.writes(notebook).encode("utf-8")


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


# What cannot be graded, and the one line that says what to hand in instead.
NOT_GRADED = {
    "not json": (b"not json\n", "not a notebook Jupyter can read (not JSON): ask for the .ipynb as Jupyter saved it"),
    "UTF-16": (notebook_bytes().decode("utf-8").encode("utf-16"), "not a notebook Jupyter can read (not JSON)"),
    "another assignment's": (
        notebook_bytes("a2_attention"),
        "this is a notebook of a2_attention, not a9: grade it with a2_attention's autograder.zip",
    ),
    "no assignment": (notebook_bytes(None), "this notebook names no assignment: it is not the student notebook of a9"),
    "a zip without a notebook": (
        zipped({"notes.txt": b"x"}),
        "holds 0 notebooks: hand in the zip the notebook's last cell",
    ),
    "not a zip": (b"PK\x03\x04broken", "is not a zip that can be read: hand in the zip the notebook's last cell"),
}


@pytest.mark.parametrize("case", NOT_GRADED)
def test_why_a_notebook_was_not_graded_says_what_to_do(tmp_path, case):
    content, says = NOT_GRADED[case]
    path = tmp_path / "hurried.ipynb"
    path.write_bytes(content)
    with pytest.raises(grader.NotGraded) as raised:
        grader.read_submission(path, "a9")
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_a_submission_is_read_and_hashed_before_anything_runs(tmp_path):
    """The notebook and each file beside it, in memory, with its SHA-256; a kernel of the student's own
    is no matter (no kernel is started)."""
    notebook = json.loads(notebook_bytes(cells=("x = 1",)))
    notebook["metadata"]["kernelspec"] = {"name": "conda-env-course-py", "display_name": "Python [conda env:course]"}
    content = zipped({"work.ipynb": json.dumps(notebook).encode(), "translations.de-en.txt": b"a dog .\n"})
    path = tmp_path / "export.zip"
    path.write_bytes(content)
    handed = grader.read_submission(path, "a9")
    assert handed.files == {"translations.de-en.txt": b"a dog .\n"}
    assert handed.sha256["export.zip"] == hashlib.sha256(content).hexdigest()
    assert grader.code_cells(handed.notebook) == [(1, "x = 1")]


def small_autograder(folder: Path) -> Path:
    """An autograder zip of two questions, 3 and 2.5 points, with no tests."""
    autograder = folder / "autograder.zip"
    with zipfile.ZipFile(autograder, "w") as archive:
        archive.writestr("otter_config.json", json.dumps({"assignment_name": "a9", "lang": "python"}))
        archive.writestr("tests/q1.py", "from otter.test_files import test_case\n\nname = 'q1'\npoints = 3\n")
        archive.writestr("tests/q2.py", "name = 'q2'\npoints = 2.5\n")
    return autograder


@pytest.mark.parametrize("fork", [True, False], ids=["forked from the server", "a new Python (Windows)"])
def test_a_notebook_that_cannot_be_graded_is_zero_out_of_the_assignments_points(tmp_path, monkeypatch, fork):
    """Not 0/0: a gradebook must see the points missed. The total is read from the tests, never run.
    The line reaches the instructor whichever way the grader's process started."""
    if not fork:
        monkeypatch.setattr(grading, "_grading_context", lambda: multiprocessing.get_context("spawn"))
    autograder = small_autograder(tmp_path)
    submission = tmp_path / "hurried.ipynb"
    submission.write_text("not json\n", encoding="utf-8")
    assert grading.possible_points(autograder) == 5.5
    (score,) = grading.grade_one(autograder, submission)
    assert (score.points, score.possible) == (0.0, 5.5)
    assert score.message == "not graded: " + NOT_GRADED["not json"][1]


def test_a_submission_past_the_time_limit_is_zero_and_says_so(tmp_path):
    """A kernel that never finishes (sleeping here, hung in C code elsewhere): the grading process is
    stopped at the limit, and the submission scores zero with the reason."""
    autograder = small_autograder(tmp_path)
    submission = tmp_path / "slow.ipynb"
    sleeping = nbformat.v4.new_code_cell("import time\ntime.sleep(120)")
    notebook = nbformat.v4.new_notebook(cells=[sleeping], metadata={"otter": {"assignment_name": "a9"}})
    nbformat.write(notebook, submission)
    (score,) = [s for s in grading.grade_one(autograder, submission, seconds=3) if not s.note]
    assert (score.points, score.possible) == (0.0, 5.5)
    assert score.message == "not graded: grading stopped after 3 s"


def test_a_folder_of_student_folders_is_found_and_each_row_says_whose(tmp_path):
    """GitHub Classroom's layout: one folder a student, each holding a notebook of the same name."""
    for student in ("alice", "bob"):
        folder = tmp_path / "sec1" / student
        (folder / ".ipynb_checkpoints").mkdir(parents=True)
        for name in ("a2_attention.ipynb", ".ipynb_checkpoints/a2_attention-checkpoint.ipynb", "notes.txt"):
            (folder / name).write_text("{}", encoding="utf-8")
    (tmp_path / "sec2" / "alice").mkdir(parents=True)
    (tmp_path / "sec2" / "alice" / "a2_attention.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "late.zip").write_bytes(b"PK")
    found = grading.submissions_in([tmp_path / "sec1", tmp_path / "late.zip"])
    assert list(found) == ["alice/a2_attention.ipynb", "bob/a2_attention.ipynb", "late.zip"]
    assert found["bob/a2_attention.ipynb"] == tmp_path / "sec1" / "bob" / "a2_attention.ipynb"
    # the same name from two folders: each row names its file's whole path, so no student is lost
    found = grading.submissions_in([tmp_path / "sec1", tmp_path / "sec2"])
    assert len(found) == 3 and "bob/a2_attention.ipynb" in found
    assert (tmp_path / "sec2" / "alice" / "a2_attention.ipynb").as_posix() in found


def test_every_file_is_graded_a_notebook_and_its_export_alike(tmp_path):
    """Files are never dropped by their names: in a flat folder of exports, every one has the same stem."""
    for name in ("a2_attention_2026_12_01T09_00_00_000000.zip", "a2_attention_2026_12_03T10_00_00_000001.zip"):
        (tmp_path / name).write_bytes(b"PK")
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "a2_attention.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "alice" / "a2_attention_2026_12_02T09_00_00_000000.zip").write_bytes(b"PK")
    assert len(grading.submissions_in([tmp_path])) == 4


def test_a_name_that_is_not_utf8_is_escaped_so_the_rows_can_be_written(tmp_path):
    folder = os.fsencode(tmp_path / "mallory")
    os.mkdir(folder)
    with open(os.path.join(folder, b"a2_attention\xff.ipynb"), "wb") as f:
        f.write(b"{}")
    (name,) = grading.submissions_in([tmp_path])
    assert name == "mallory/a2_attention\\xff.ipynb"
    scores = [grading.Score(name, "q1", 0.0, 3.0, "not graded")]
    grading.write_csv(scores, tmp_path / "grades.csv")  # it raised UnicodeEncodeError after the whole run
    assert "a2_attention\\xff.ipynb" in grading.table(scores)


def test_a_link_is_not_graded_whatever_it_names(tmp_path):
    """A student's link could name the assignment's solutions on the grader's machine."""
    solution = tmp_path / "solutions" / "a9.ipynb"
    solution.parent.mkdir()
    solution.write_bytes(notebook_bytes())
    link = tmp_path / "mallory" / "a9.ipynb"
    link.parent.mkdir()
    link.symlink_to(solution)
    with pytest.raises(grader.NotGraded, match=r"a9\.ipynb is a link to another file: hand in the notebook"):
        grader.read_submission(link, "a9")


def test_a_grading_only_helper_imported_from_the_library_says_where_it_is():
    from book_tools.coursework import checks as grading_checks

    for name in checks.GRADING_ONLY:
        assert callable(getattr(grading_checks, name))
        where = rf"^{name} is the book's tools' now: from book_tools\.coursework\.checks import {name}$"
        with pytest.raises(ImportError, match=where):
            exec(f"from transformer_lib.coursework.checks import {name}", {})


def test_list_of_says_what_a_stub_returned():
    assert list_of((1, 2), "f") == [1, 2] and list_of([], "f") == []
    for stub in (None, "ab", torch.zeros(2), {"a": 1}):
        with pytest.raises(Wrong, match=f"^f should return a list, got {type(stub).__name__}$"):
            list_of(stub, "f")


def test_a_release_is_pinned_only_from_its_own_checkout(tmp_path):
    """Masters built from a newer checkout may use what the release lacks (a plugin, a helper): refused."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    package = tmp_path / "transformer_lib"
    package.mkdir()
    (package / "checks.py").write_text("def call(): ...\n", encoding="utf-8")
    for step in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "v1"], ["tag", "v1.2.3"]):
        subprocess.run(git + step, check=True, capture_output=True)
    grading.check_release("v1.2.3", (package,))  # the release's own checkout
    (package / "checks.py").write_text("def call(): ...\ndef list_of(): ...\n", encoding="utf-8")
    with pytest.raises(InvalidValue, match=r"^this checkout's package is not v1\.2\.3's.*git checkout v1\.2\.3"):
        grading.check_release("v1.2.3", (package,))
    with pytest.raises(InvalidValue, match=r"^cannot tell whether this checkout is v9\.9\.9: no tag v9\.9\.9 here"):
        grading.check_release("v9.9.9", (package,))
    with pytest.raises(InvalidValue, match=r"--release takes a release tag vX\.Y\.Z "):
        grading.check_release("1.2.3", (package,))


def test_a_release_pins_every_master_and_the_autograders_requirements(tmp_path):
    """--release vX.Y.Z: what students and the autograder install is that tag, everywhere main was named."""
    copy = grading.pinned(ROOT / "assignments", "v9.8.7", tmp_path)
    for master in grading.masters(copy):
        code = ["".join(c["source"]) for c in json.loads(master.read_text(encoding="utf-8"))["cells"]]
        assert sum('RELEASE = "v9.8.7"' in c for c in code) == 1 and not any('RELEASE = "main"' in c for c in code)
    requirements = (copy / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^transformer-book @ git\+https://\S+@v9\.8\.7$", requirements, re.M), requirements
    assert re.search(r"^transformer-book-tools @ git\+https://\S+@v9\.8\.7#subdirectory=tools$", requirements, re.M)
    assert "@main" not in requirements
    assert "@main" in (ROOT / "assignments" / "requirements.txt").read_text(encoding="utf-8")  # the masters untouched


def test_a_folder_with_two_masters_is_refused(tmp_path):
    (tmp_path / "a1").mkdir()
    (tmp_path / "a1" / "one.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "a1" / "two.ipynb").write_text("{}", encoding="utf-8")
    with pytest.raises(transformer_lib.InvalidValue, match="should hold one master notebook, found 2"):
        grading.masters(tmp_path)


def test_scores_table_and_csv(tmp_path):
    scores = [
        grading.Score("alice.ipynb", "q1", 3, 3, "passed"),
        grading.Score("alice.ipynb", "q2", 0, 2, "Wrong: off by one"),
        grading.Score("alice.ipynb", "q3", 0, 2, grading.BY_HAND_MESSAGE, by_hand=True),
    ]
    assert grading.table(scores).splitlines()[-1].split() == [
        *("alice.ipynb", "total", "3/5", "+", "2", "by", "hand,", "7", "in", "all")
    ]
    grading.write_csv(scores, tmp_path / "grades.csv")
    lines = (tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert lines[2:] == ["alice.ipynb,q2,0,2,Wrong: off by one", f"alice.ipynb,q3,,2,{grading.BY_HAND_MESSAGE}"]
    assert [path.name for path in tmp_path.iterdir()] == ["grades.csv"]  # no temporary file left
    assert (tmp_path / "grades.csv").stat().st_mode & 0o777 == 0o600  # students' grades: the owner's only


def test_a_questions_tests_and_their_points_are_read_as_otter_resolves_them():
    tests = (
        "from otter.test_files import test_case\n\nname = 'q2'\npoints = 2\n\n"
        "@test_case(points=0, hidden=False)\ndef test_small(decoder_mask):\n    pass\n\n"
        "@test_case(hidden=True)\ndef test_hidden(decoder_mask):\n    pass\n"
    )
    question = grader.read_tests(tests, "q2.py")
    assert [(c.name, c.hidden) for c in question.cases] == [("test_small", False), ("test_hidden", True)]
    assert question.case_points() == {"test_small": 0.0, "test_hidden": 2.0}


def test_assign_builds_one_assignment_given_its_folder():
    master = ROOT / "assignments/a2_attention/a2_attention.ipynb"
    assert grading.masters(master.parent) == [master]
    assert grading.by_hand_questions(master) == {"q5": 2.0}


def test_the_grading_record_has_the_masters_questions_and_points():
    record = json.loads((ROOT / "results/coursework/grading.json").read_text(encoding="utf-8"))
    for master in MASTERS:
        graded = {c["name"]: c["points"] for c in questions(master) if not c.get("manual")}
        assert record["assignments"][master.parent.name]["questions"] == graded, f"{master.stem}: record again"


def test_gradescope_results_show_the_student_one_line_and_the_instructor_the_refusals():
    from book_tools.coursework import gradescope

    scores = [
        grading.Score("s", "q1", 3.0, 3.0, "passed"),
        grading.Score("s", "q2", 0.0, 2.0, "test_q2: Wrong: off by one"),
        grading.Score("s", "q5", 0.0, 2.0, grading.BY_HAND_MESSAGE, by_hand=True),
        grading.Score("s", grading.NOTES_ROW, 0.0, 0.0, "writes the tests: in its own process", note=True),
    ]
    report = gradescope.results(scores)
    assert report["score"] == 3.0 and report["output"].startswith("Graded")
    rows = {t["name"]: t for t in report["tests"]}
    assert set(rows) == {"q1", "q2", grading.NOTES_ROW}  # the question graded by hand is Gradescope's rubric's
    assert rows["q2"]["max_score"] == 2.0 and rows["q2"]["visibility"] == "after_published"
    assert rows[grading.NOTES_ROW]["visibility"] == "hidden"
    not_graded = gradescope.results([grading.Score("s", "-", 0.0, 12.0, "not graded: not JSON")])
    assert not_graded == {"score": 0.0, "output": "not graded: not JSON", "stdout_visibility": "hidden", "tests": []}


def test_gradescope_grades_the_zip_handed_in_or_the_notebook_with_its_files(tmp_path):
    from book_tools.coursework import gradescope

    handed, scratch = tmp_path / "submission", tmp_path / "scratch"
    handed.mkdir()
    scratch.mkdir()
    (handed / "a2.zip").write_bytes(b"PK")
    assert gradescope.submission_file(handed, scratch) == handed / "a2.zip"
    (handed / "a2.zip").unlink()
    (handed / "a6.ipynb").write_text("{}", encoding="utf-8")
    assert gradescope.submission_file(handed, scratch) == handed / "a6.ipynb"
    (handed / "translations.de-en.txt").write_text("a man .\n", encoding="utf-8")
    packed = gradescope.submission_file(handed, scratch)
    assert sorted(zipfile.ZipFile(packed).namelist()) == ["a6.ipynb", "translations.de-en.txt"]
    (handed / "copy.ipynb").write_text("{}", encoding="utf-8")
    assert "2 notebooks" in gradescope.submission_file(handed, scratch)


def test_the_capstone_quotes_lesson_11s_cpu_recipe_as_its_records_score_it():
    """The capstone's score to aim at is lesson 11's: the mean test BLEU of the CPU recipe's seeds at 20 minutes,
    with the decoding they were scored with and the one the recipe has now; its refusal rule is the grader's."""
    master = nbformat.read(ROOT / "assignments" / "a6_capstone" / "a6_capstone.ipynb", as_version=4)
    text = " ".join(" ".join(cell.source for cell in master.cells if cell.cell_type == "markdown").split())
    stated = re.search(
        r"Lesson 11's recipe scored ([\d.]+) cased sacreBLEU on average over (\w+) runs of (\d+) minutes .*?"
        r"decoded with beam (\d+) and α ([\d.]+)\. The recipe now decodes with beam (\d+) and α ([\d.]+),",
        text,
    )
    assert stated, "the capstone no longer quotes lesson 11's recipe in the sentence this test reads"
    with contextlib.redirect_stdout(io.StringIO()):  # the reader prints the lesson's table
        recipes = records.cpu_recipes(ROOT / "results" / "multi30k" / "cpu")
    minutes = int(stated.group(3))
    seeds = records.seed_runs(recipes.recipe["de→en"])
    scored = yaml.safe_load((seeds[0] / "config.yaml").read_text(encoding="utf-8"))["decoding"]
    now = load_config("multi30k_de_en_cpu").decoding
    assert stated.groups() == (
        f"{recipes.curves['de→en'][minutes].test:.1f}",
        {3: "three"}.get(len(seeds)),
        str(minutes),
        str(scored["beam_size"]),
        str(scored["alpha"]),
        str(now.beam_size),
        str(now.alpha),
    )
    assert "more than a quarter of the lines" in text and REFERENCE_SHARE == 0.25
    assert f"BLEU is above {BLEU_CEILING:g}" in text
