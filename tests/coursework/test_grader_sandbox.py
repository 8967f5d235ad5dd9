"""The sandbox a submission's code runs in while it is graded, apart from the tests.

Each test grades a small notebook with a small autograder (two questions), as `grade` does: the
notebook's cells in their own process, the tests here. Where these tests run as root and the
machine lets a process become another user (CI), the submission runs as a user of its own without
network; elsewhere as the grader's own user, its audit hook refusing what the operating system
would. Whole assignments and the hostile submissions of assignments/mistakes.yaml are graded by
.ci/assignments.py.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch

from book_tools.coursework import channel, grading, sandbox

TESTS = {
    "q1": """from otter.test_files import test_case

name = "q1"
points = 2

@test_case(points=2, hidden=True)
def test_double(double):
    import torch
    from transformer_lib.coursework.checks import call, expect_close, inputs
    x = inputs(3, 4, seed=1)
    expect_close(call(double, x, name="double"), 2 * x, "double(x)")
""",
    "q2": """from otter.test_files import test_case

name = "q2"
points = 3

@test_case(points=3, hidden=True)
def test_total(total):
    from transformer_lib.coursework.checks import Wrong, call
    if call(total, [1, 2, 3.5], name="total") != 6.5:
        raise Wrong("total([1, 2, 3.5]) should be 6.5")
""",
}
HONEST = ["import torch", "def double(x):\n    return x * 2", "def total(xs):\n    return sum(xs)"]


def autograder(folder: Path, tests: dict[str, str] = TESTS) -> Path:
    path = folder / "autograder.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("otter_config.json", json.dumps({"assignment_name": "a9", "lang": "python"}))
        for question, text in tests.items():
            archive.writestr(f"tests/{question}.py", text)
    return path


def grade(
    folder: Path, cells: list[str], seconds: int = 120, tests: dict[str, str] = TESTS
) -> tuple[dict[str, tuple[float, str]], str]:
    """({question: (points, message)}, the row of what was refused) for a notebook of ``cells``."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={"otter": {"assignment_name": "a9"}}
    )
    submission = folder / "submission.ipynb"
    nbformat.write(notebook, submission)
    scores = grading.grade_one(autograder(folder, tests), submission, seconds)
    questions = {s.question: (s.points, s.message) for s in scores if not s.note}
    return questions, next((s.message for s in scores if s.note), "")


def leftovers() -> list[str]:
    """Folders of gradings in the temporary folder, and processes carrying a grading's mark."""
    folders = [p.name for p in Path(tempfile.gettempdir()).glob("tl-*")]
    marked = [pid for pid, _ in sandbox._processes() if sandbox._marked(pid, "tl-grading-")]
    return folders + [str(pid) for pid in marked]


@pytest.fixture
def clean():
    """Nothing of the test's gradings is left once they return. A grading of another test, run at the
    same time by another worker (pytest -n), has folders and processes of its own for a few seconds:
    what was there at the end is waited for, up to a minute; what the test left stays for good."""
    before = set(leftovers())
    yield
    extra, waited_until = set(leftovers()) - before, time.monotonic() + 60
    while extra and time.monotonic() < waited_until:
        time.sleep(0.5)
        extra &= set(leftovers())
    assert not extra, f"a grading left folders or processes behind: {sorted(extra)}"


def test_honest_answers_get_full_marks_and_nothing_is_refused(tmp_path, clean):
    questions, refused = grade(tmp_path, HONEST)
    assert questions == {"q1": (2, "passed"), "q2": (3, "passed")}
    assert refused == ""


def test_a_call_that_swallows_its_time_limit_is_stopped_from_outside_and_costs_its_question_only(tmp_path, clean):
    """A retry loop inside `except BaseException` catches any exception a limit could raise inside the
    process: the grader kills the process instead, and the next question runs in a new one."""
    stubborn = (
        "def total(xs):\n    import time\n    while True:\n"
        "        try:\n            time.sleep(1)\n        except BaseException:\n            pass"
    )
    started = time.monotonic()
    questions, refused = grade(tmp_path, [*HONEST[:2], stubborn])
    assert questions["q1"] == (2, "passed")
    assert questions["q2"][0] == 0 and "stopped after 10 s" in questions["q2"][1]
    assert "a call ran past 10 s: stopped from outside" in refused
    assert time.monotonic() - started < 60


def test_patching_what_the_tests_compare_with_changes_nothing_but_is_said(tmp_path, clean):
    patch = (
        "import importlib\n"
        "setattr(importlib.import_module('torch'), 'allclose', lambda *a, **k: True)\n"
        "exec('import torch; torch.' + 'equal = lambda *a, **k: True')\n"
        "import transformer_lib.coursework.checks as c\n"
        "c.close = lambda *a, **k: True"
    )
    wrong = "def double(x):\n    return x * 3"
    questions, refused = grade(tmp_path, [HONEST[0], patch, wrong, HONEST[2]])
    assert questions["q1"][0] == 0 and "differs from the expected values" in questions["q1"][1]
    assert questions["q2"] == (3, "passed")
    assert "torch.allclose" in refused and "torch.equal" in refused and "checks.close" in refused


def test_one_submission_cannot_stop_the_run_for_the_others(tmp_path, clean):
    """A message no encoding writes, and folders nested past Python's recursion limit (shutil.rmtree
    and rglob recurse): the run ends with its CSV, every student graded, nothing left behind."""
    hostile = [
        *HONEST[:2],
        "def total(xs):\n    raise ValueError('\\udc80')",
        "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')",
    ]
    folder = tmp_path / "submissions"
    for student, cells in {"alice": HONEST, "mallory": hostile}.items():
        (folder / student).mkdir(parents=True)
        notebook = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={"otter": {"assignment_name": "a9"}}
        )
        nbformat.write(notebook, folder / student / "a9.ipynb")
    scores = grading.grade(autograder(tmp_path), [folder], tmp_path / "grades.csv", seconds=120)
    rows = {(s.submission, s.question): s for s in scores}
    assert rows["alice/a9.ipynb", "q2"].points == 3 and rows["mallory/a9.ipynb", "q1"].points == 2
    assert rows["mallory/a9.ipynb", "q2"].points == 0 and "\\x80" in rows["mallory/a9.ipynb", "q2"].message
    assert "mallory/a9.ipynb" in (tmp_path / "grades.csv").read_text(encoding="utf-8")


def test_a_cell_too_deeply_nested_for_python_fails_alone(tmp_path, clean):
    """Python cannot compile it (RecursionError, in IPython itself): that cell fails, the rest is graded."""
    questions, _ = grade(tmp_path, [*HONEST, "x = " + "a." * 5000 + "b"])
    assert questions == {"q1": (2, "passed"), "q2": (3, "passed")}


OWN_CLASS = {
    "q1": """from otter.test_files import test_case

name = "q1"
points = 1

@test_case(points=1, hidden=True)
def test_own(Mine):
    from book_tools.coursework.checks import inherits
    from transformer_lib.coursework.checks import Wrong, call
    if inherits(Mine, "transformer_lib.MultiHeadAttention"):
        raise Wrong("Mine is built on transformer_lib.MultiHeadAttention")
    if inherits(call(Mine, 8, 2, name="Mine(8, 2)"), "transformer_lib.MultiHeadAttention"):
        raise Wrong("Mine(8, 2) builds a transformer_lib.MultiHeadAttention")
"""
}
FORGE_SUBCLASS = (  # the submission's process answers "not a subclass" whatever it is asked
    "import gc\n"
    "for o in gc.get_objects():\n"
    "    if isinstance(o, type) and hasattr(o, 'op_subclass'):\n"
    "        o.op_subclass = lambda self, obj, dotted: False"
)


HIDDEN = "getattr(transformer_lib, 'MultiHead' + 'Attention')"  # a name computed at run time: not read


@pytest.mark.parametrize(
    "cells",
    [
        ["import transformer_lib", "class Mine(transformer_lib.MultiHeadAttention):\n    pass", FORGE_SUBCLASS],
        ["import transformer_lib", f"Mine = type('Mine', ({HIDDEN},), {{}})"],
        ["import functools, transformer_lib", f"Mine = functools.partial({HIDDEN})"],
        [
            "import torch, transformer_lib",
            f"class Mine(torch.nn.Module):\n    def __new__(cls, d, h):\n        return {HIDDEN}(d, h)",
        ],
        [
            "import transformer_lib",
            f"class Mine({HIDDEN}):\n    pass",
            "vars(transformer_lib)['MultiHeadAttention'] = type('Elsewhere', (), {})",
        ],
        ["import torch, transformer_lib", f"class Mine(torch.nn.Module):\n    pass\nMine.forward = {HIDDEN}.forward"],
    ],
    ids=[
        "read from the notebook, whatever its process says",
        "built at run time, asked of its process",
        "a factory: what it builds is asked",
        "a __new__ that builds the package's",
        "the package's name rebound: the class as it was before the notebook ran",
        "its methods taken at run time",
    ],
)
def test_a_class_built_on_the_packages_is_refused(tmp_path, clean, cells):
    questions, _ = grade(tmp_path, cells, tests=OWN_CLASS)
    assert questions["q1"][0] == 0 and "transformer_lib.MultiHeadAttention" in questions["q1"][1], questions


def test_a_forged_process_is_believed_for_names_computed_at_run_time(tmp_path, clean):
    """The control for the first case above, and the limit book/instructors.md states: the forgery does
    change the process's answer, so only what the notebook's text shows holds against it."""
    cells = ["import transformer_lib", f"class Mine({HIDDEN}):\n    pass", FORGE_SUBCLASS]
    assert grade(tmp_path, cells, tests=OWN_CLASS)[0] == {"q1": (1, "passed")}


def test_a_class_of_ones_own_passes(tmp_path, clean):
    cells = [
        "import torch, transformer_lib",
        "class Mine(torch.nn.Module):\n    def __init__(self, d, h):\n        super().__init__()",
    ]
    assert grade(tmp_path, cells, tests=OWN_CLASS)[0] == {"q1": (1, "passed")}


def test_the_grading_files_the_network_and_new_processes_are_refused(tmp_path, clean):
    hostile = (
        "import os, socket, subprocess\n"
        "for attempt in (lambda: open('../results.json', 'w'), lambda: open('../tests/q1.py'),\n"
        "                lambda: socket.create_connection(('example.com', 80), timeout=1),\n"
        "                lambda: subprocess.Popen(['sleep', '600'], start_new_session=True)):\n"
        "    try:\n"
        "        attempt()\n"
        "    except OSError:\n"
        "        pass"
    )
    questions, refused = grade(tmp_path, [*HONEST, hostile])
    assert questions == {"q1": (2, "passed"), "q2": (3, "passed")}
    for said in ("wrote outside its folder", "read the grading's files", "network connection", "started a process"):
        assert said in refused


def test_huge_output_is_thrown_away_and_a_cell_that_fills_the_disk_is_stopped(tmp_path, clean):
    flood = "for _ in range(20):\n    print('x' * 2**20)"
    filler = "n = 0\nwhile True:\n    with open(f'f{n}', 'wb') as f:\n        f.write(b'x' * 2**26)\n    n += 1"
    questions, refused = grade(tmp_path, [*HONEST, flood, filler])
    assert questions == {"q1": (2, "passed"), "q2": (3, "passed")}
    assert "printed more than 16 MB" in refused and "wrote more than 512 MB to disk: stopped" in refused


def test_what_a_submission_left_running_is_killed_by_its_mark(tmp_path):
    """Found by the mark in its environment (or its user, where it has one), whatever its parent."""
    mark = sandbox.new_mark()
    env = {**os.environ, "TL_GRADING": mark}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env, start_new_session=True)
    time.sleep(0.2)
    sandbox.clean_up(-1, mark)
    assert child.wait(timeout=10) == -signal.SIGKILL


def test_a_worker_process_is_spawned_and_killed_with_what_it_started_and_leaves_nothing(clean):
    """The process's life apart from the conversation: spawned in its own copy of the handed-in files,
    found with what carries its grading's mark, killed with it, its folders removed."""
    notes: list[str] = []
    mark = sandbox.new_mark()
    worker = sandbox.WorkerProcess(
        {"answers.txt": b"42"}, mark, sandbox.Isolation(False, False), None, [], notes.append
    )
    stray = None
    try:
        worker.spawn(time.monotonic() + 60)
        assert worker.alive and (worker.folder / "answers.txt").read_bytes() == b"42"
        channel.read_answer(worker.read(time.monotonic() + sandbox.START_SECONDS))  # ready
        assert not worker.left_running() and worker.rewritten() == []
        (worker.folder / "answers.txt").write_bytes(b"43")
        env = {**os.environ, "TL_GRADING": mark}
        stray = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], env=env, start_new_session=True
        )
        time.sleep(0.2)
        assert worker.left_running() and worker.rewritten() == ["answers.txt"]
        worker.kill()
        assert not worker.spawned and stray.wait(timeout=10) == -signal.SIGKILL
    finally:
        worker.kill()
        worker.remove()
        if stray is not None and stray.poll() is None:
            stray.kill()
    assert not worker.root.exists() and notes == []


def test_only_data_comes_back_from_the_submissions_process():
    """A tensor subclass or any object the grader would have to build comes back as data or a handle."""
    objects: dict = {}
    data = channel.as_data({"t": torch.nn.Parameter(torch.ones(2)), "n": (1, 2.5, "x"), "f": len}, objects)
    back = channel.read_answer(channel.answer({"value": data}))["value"]
    assert type(back["t"]) is torch.Tensor and back["n"] == (1, 2.5, "x")
    assert back["f"][channel.HANDLE] == id(len)
    with pytest.raises(channel.Closed, match="cannot read as data"):
        channel.read_answer(b"\x80\x04\x95not a torch file")
