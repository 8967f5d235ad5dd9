"""Grade one submission with an assignment's tests, the submission's code apart from them.

Otter's ``otter run`` executes a notebook and then its tests in the same Python: a notebook could
rewrite the tests, hook the results or patch what they compare with. Here the tests never enter the
submission's process. :func:`grade_submission` reads everything it needs first: the tests (Otter's
files in the autograder zip, or the folder it was unpacked into on Gradescope), the notebook and the
files handed in beside it, each copied into memory and hashed before anything runs. The notebook's
cells then run in a :class:`book_tools.coursework.sandbox.Sandbox`; each test runs here, in the
grader's process, and is handed the notebook's names as data or as
:class:`book_tools.coursework.sandbox.Remote` handles, so that every comparison is made with
the grader's own, untouched libraries. The files the tests score are the grader's copies, in a
folder the submission cannot reach.

The points are Otter's: a question's tests share its points as its test file says, a test that
raises scores nothing, and the message names the first failed test that carried points.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from book_tools.coursework import guard, sandbox
from transformer_lib.coursework import checks

MAX_UNPACKED = 200 * 2**20  # a zip handed in may hold this much in all (a notebook and a translations file)


class NotGraded(Exception):
    """The submission cannot be graded at all: one line saying what to hand in instead."""


@dataclass
class Case:
    name: str
    points: float | None
    hidden: bool
    function: Any


@dataclass
class QuestionTests:
    name: str
    points: float
    cases: list[Case] = field(default_factory=list)

    def case_points(self) -> dict[str, float]:
        """Each test's points, as Otter resolves them: the question's points not given to a test are shared."""
        given = sum(c.points for c in self.cases if c.points is not None)
        open_cases = [c for c in self.cases if c.points is None]
        share = (self.points - given) / len(open_cases) if open_cases else 0.0
        return {c.name: (c.points if c.points is not None else share) for c in self.cases}


def _test_case(name: str | None = None, points: float | None = None, hidden: bool = False, **_: Any) -> Any:
    def record(function: Any) -> Any:
        function._case = Case(name or function.__name__, points, hidden, function)
        return function

    return record


def read_tests(source: str, filename: str) -> QuestionTests:
    """One of Otter's test files (``tests/q1.py``), run here with its ``test_case`` decorator standing in
    for Otter's: its tests, their points and whether each is hidden."""
    tree = ast.parse(source, filename)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("otter"))]
    namespace: dict[str, Any] = {"test_case": _test_case, "__name__": f"tests_{Path(filename).stem}"}
    exec(compile(tree, filename, "exec"), namespace)
    question = QuestionTests(str(namespace.get("name", Path(filename).stem)), float(namespace.get("points") or 0))
    question.cases = [v._case for v in namespace.values() if callable(v) and hasattr(v, "_case")]
    return question


def load_tests(autograder: Path) -> dict[str, QuestionTests]:
    """Every question's tests, from an autograder zip or the folder it was unpacked into, in name order."""
    files: dict[str, str] = {}
    if autograder.is_dir():
        for path in sorted((autograder / "tests").glob("*.py")):
            files[path.name] = path.read_text(encoding="utf-8")
    else:
        with zipfile.ZipFile(autograder) as archive:
            for name in sorted(archive.namelist()):
                if name.startswith("tests/") and name.endswith(".py"):
                    files[Path(name).name] = archive.read(name).decode("utf-8")
    questions = [read_tests(text, name) for name, text in files.items()]
    return {q.name: q for q in sorted(questions, key=lambda q: _natural(q.name))}


def _natural(name: str) -> tuple:
    digits = "".join(c for c in name if c.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else 0, name)


def assignment_name(autograder: Path) -> str | None:
    try:
        if autograder.is_dir():
            config = json.loads((autograder / "otter_config.json").read_text(encoding="utf-8"))
        else:
            with zipfile.ZipFile(autograder) as archive:
                config = json.loads(archive.read("otter_config.json").decode("utf-8"))
    except (OSError, KeyError, ValueError):
        return None
    return config.get("assignment_name")


@dataclass
class HandedIn:
    """A submission as read before anything runs: the notebook, the other files, each one's SHA-256."""

    notebook: dict
    files: dict[str, bytes]
    sha256: dict[str, str]


ASK_NOTEBOOK = "ask for the .ipynb as Jupyter saved it"


def read_submission(path: Path, expected: str | None) -> HandedIn:
    """The notebook and the files beside it (a zip as the export cell writes it), read once, into memory,
    and hashed. NotGraded, with what to hand in, for what cannot be read, and for a link: in a student's
    folder, a link could name any file the grader's account can read (the assignment's own solutions)."""
    if path.is_symlink():
        raise NotGraded(f"{path.name} is a link to another file: hand in the notebook or its zip itself")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise NotGraded(f"cannot read {path.name} ({error.strerror}): hand in the notebook or its zip") from None
    files: dict[str, bytes] = {}
    if path.suffix == ".zip" or data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
                if sum(m.file_size for m in members) > MAX_UNPACKED:
                    raise NotGraded(
                        f"{path.name} unpacks to more than {MAX_UNPACKED // 2**20} MB: "
                        "hand in the notebook and its files alone"
                    )
                for member in members:
                    name = Path(member.filename).name
                    if name and not name.startswith("."):
                        files[name] = archive.read(member)
        except (zipfile.BadZipFile, OSError, ValueError):
            raise NotGraded(
                f"{path.name} is not a zip that can be read: hand in the zip the notebook's last cell writes"
            ) from None
        notebooks = [n for n in files if n.endswith(".ipynb")]
        if len(notebooks) != 1:
            raise NotGraded(
                f"{path.name} holds {len(notebooks)} notebooks: "
                "hand in the zip the notebook's last cell writes, with one"
            )
        text = files.pop(notebooks[0])
    else:
        text = data
    try:
        notebook = json.loads(text.decode("utf-8"))
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise ValueError
    except (UnicodeDecodeError, ValueError):
        raise NotGraded(f"not a notebook Jupyter can read (not JSON): {ASK_NOTEBOOK}") from None
    named = ((notebook.get("metadata") or {}).get("otter") or {}).get("assignment_name")
    if expected and named != expected:
        if not named:
            raise NotGraded(
                f"this notebook names no assignment: it is not the student notebook of {expected} (ask for that one)"
            )
        raise NotGraded(f"this is a notebook of {named}, not {expected}: grade it with {named}'s autograder.zip")
    sha = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    sha[path.name] = hashlib.sha256(data).hexdigest()
    return HandedIn(notebook, files, sha)


def code_cells(notebook: dict) -> list[tuple[int, str]]:
    """(number from 1, source) of each code cell Otter would run: not those tagged ``otter_ignore``."""
    cells, number = [], 0
    for cell in notebook["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        tags = (cell.get("metadata") or {}).get("tags") or []
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if "otter_ignore" not in tags:
            cells.append((number, source))
    return cells


@dataclass
class Graded:
    """A submission's grading: per question (points, possible, message), and what was refused or stopped."""

    questions: dict[str, tuple[float, float, str]]
    notes: list[str]
    sha256: dict[str, str]
    not_graded: str = ""


def _message(test: str, error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    kind = "Wrong" if isinstance(error, checks.Wrong) else type(error).__name__
    return f"{test}: {kind}: {lines[0] if lines else ''}".rstrip(": ")[:400]


def grade_submission(
    autograder: Path,
    submission: Path,
    seconds: float,
    isolation: sandbox.Isolation | None = None,
    guarded: list[str] = (),
    mark: str | None = None,
    uid: int | None = None,
) -> Graded:
    """Every question's points for ``submission``, its tests run here and its code in a sandbox."""
    deadline = time.monotonic() + seconds
    questions = load_tests(autograder)
    handed = read_submission(submission, assignment_name(autograder))  # NotGraded: the caller's one line
    cells = code_cells(handed.notebook)
    sources = dict(cells)
    results: dict[str, tuple[float, float, str]] = {}
    mark = mark or sandbox.new_mark()
    with (
        tempfile.TemporaryDirectory(prefix=f"{mark}-tests-") as private,
        sandbox.Sandbox(
            cells, handed.files, deadline, guarded=[*guarded, private], isolation=isolation, mark=mark, uid=uid
        ) as box,
    ):
        os.chmod(private, 0o700)
        read = guard.changes(source for _, source in cells)  # what reading the cells finds; running them finds more
        for line in read:
            box.note(f"{line}: in its own process, apart from the tests")
        for name, content in handed.files.items():  # the copies the tests score, where the submission cannot go
            Path(private, name).write_bytes(content)
        previous = os.getcwd()
        os.chdir(private)
        try:
            with contextlib.suppress(sandbox.Stopped):  # the notebook runs once, whatever the tests ask
                box.start()
            for question in questions.values():
                points = question.case_points()
                verdicts = {case.name: _run_case(box, case, sources) for case in question.cases}
                earned = sum(points[name] for name, verdict in verdicts.items() if verdict is None)
                failed = [(name, verdict) for name, verdict in verdicts.items() if verdict is not None]
                costly = [verdict for name, verdict in failed if points[name] > 0] + [v for _, v in failed]
                message = "passed" if earned == question.points else (costly or ["no test gave its points"])[0]
                results[question.name] = (earned, question.points, message)
        except sandbox.OutOfTime:
            return Graded({}, box.notes, handed.sha256, f"grading stopped after {seconds:g} s")
        finally:
            os.chdir(previous)
            box.close()
        for name in handed.files:
            if hashlib.sha256(Path(private, name).read_bytes()).hexdigest() != handed.sha256[name]:
                box.note(f"{name} changed while it was graded: graded again from the copy")
    seen = " ".join(read)
    notes = [n for n in box.notes if not (n.startswith("changed ") and n.split()[1].rstrip(",") in seen)]
    return Graded(results, notes, handed.sha256)


def _run_case(box: sandbox.Sandbox, case: Case, sources: dict[int, str]) -> str | None:
    """None when the test passed, else its message."""
    checks.FAILED_CELLS[:] = [(sources.get(i, ""), why) for i, why in sorted(box.failed_cells.items())]
    code = case.function.__code__
    names = code.co_varnames[: code.co_argcount]
    try:
        arguments = [box.get(name) for name in names]
    except (sandbox.Stopped, sandbox.RemoteError) as error:
        return f"{case.name}: Wrong: the notebook could not be run to grade it: {error}"
    try:
        case.function(*arguments)
    except sandbox.OutOfTime:
        raise
    except Exception as error:
        return _message(case.name, error)
    return None
