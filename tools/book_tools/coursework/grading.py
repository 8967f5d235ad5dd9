"""Build the assignments with Otter-Grader and grade a folder of submissions into one CSV.

Otter builds: ``otter assign`` turns each master notebook into a student notebook, a solution and an
autograder zip (the one Gradescope takes). This module adds what a course needs around it:

* :func:`build`: every assignment of a folder in one call;
* :func:`grade`: every submission graded with the zip's tests, into a CSV of points per question
  and student. Unlike Otter's ``otter run``, which runs the tests in the submission's own Python,
  each submission's code runs in a sandbox apart from the tests
  (:mod:`book_tools.coursework.grader`, :mod:`book_tools.coursework.sandbox`), and a row
  says what it tried that grading refused. A submission that cannot be graded gets zero with the
  reason, and the next one is graded;
* :func:`finish_zip`: the zip's Gradescope run script replaced by one that grades as ``grade`` does
  (:mod:`book_tools.coursework.gradescope`);
* :class:`CellTimeLimit`: an Otter plugin that stops any cell of a submission after a number of
  seconds, for Otter's own ``otter run``: ``grade`` keeps its limits from outside the submission's
  process instead.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import transformer_lib
from transformer_lib.errors import InvalidValue, MissingFile
from transformer_lib.files import atomic_path

CELL_SECONDS = 60  # any one cell of a submission, when graded
SUBMISSION_SECONDS = 900  # the whole submission: what is left is graded zero with the reason

# Run in the grading kernel before the submission's first cell: every cell the learner wrote runs
# under an alarm; Otter's own cells (they call .check or name otter) are left alone, their tests
# being limited call by call. A cell that fails is recorded (checks.FAILED_CELLS), so that a test
# finding its answer undefined can say why: the cell's error, a failed import say.
_LIMIT_CELL = """\
import signal as _tl_signal
_tl_timed = hasattr(_tl_signal, "setitimer")
_tl_source = [""]
def _tl_stop(signum, frame):
    raise TimeoutError("this cell ran for more than {seconds} s and was stopped (an endless loop?)")
def _tl_start(info):
    _tl_source[0] = getattr(info, "raw_cell", "") or ""
    if _tl_timed and ".check(" not in _tl_source[0] and "otter" not in _tl_source[0]:
        _tl_signal.setitimer(_tl_signal.ITIMER_REAL, {seconds})
def _tl_end(result):
    if _tl_timed:
        _tl_signal.setitimer(_tl_signal.ITIMER_REAL, 0)
    error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
    if error is not None:
        from transformer_lib.coursework import checks as _tl_checks
        _tl_checks.FAILED_CELLS.append((_tl_source[0], f"{{type(error).__name__}}: {{error}}"))
if _tl_timed:
    _tl_signal.signal(_tl_signal.SIGALRM, _tl_stop)
get_ipython().events.register("pre_run_cell", _tl_start)
get_ipython().events.register("post_run_cell", _tl_end)
"""


def plugin_base() -> type:
    """Otter's plugin class to derive from, or ``object`` where Otter is not installed."""
    try:
        from otter.plugins import AbstractOtterPlugin
    except ImportError:  # this module still imports without Otter; only grading needs it
        return object
    return AbstractOtterPlugin


class CellTimeLimit(plugin_base()):
    """Otter plugin: stop a submission's cell after ``seconds`` (plugin config; default CELL_SECONDS)."""

    def before_execution(self, submission):
        import nbformat

        seconds = int((getattr(self, "plugin_config", None) or {}).get("seconds", CELL_SECONDS))
        submission.cells.insert(0, nbformat.v4.new_code_cell(_LIMIT_CELL.format(seconds=seconds)))
        return submission


def _otter() -> list[str]:
    """The command that runs Otter-Grader with this Python, or one line saying how to install it."""
    try:
        import otter  # noqa: F401
    except ImportError:
        raise MissingFile(
            "assignments are built and graded with Otter-Grader: pip install -r requirements.txt"
        ) from None
    return [sys.executable, "-m", "otter"]


def masters(folder: str | os.PathLike) -> list[Path]:
    """The master notebook of each assignment: one ``.ipynb`` in each subfolder, in name order."""
    root = Path(folder)
    if not root.is_dir():
        raise MissingFile(f"no folder {root}: give the folder that holds the assignments (assignments/)")
    if _is_master_folder(root):  # one assignment's folder: that assignment alone
        return sorted(root.glob("*.ipynb"))
    found = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        notebooks = sorted(sub.glob("*.ipynb"))
        if len(notebooks) != 1:
            raise InvalidValue(f"{sub} should hold one master notebook, found {len(notebooks)}")
        found.append(notebooks[0])
    if not found:
        raise MissingFile(f"no assignments in {root}: each is a folder with one master notebook")
    return found


def _is_master_folder(folder: Path) -> bool:
    """Whether ``folder`` is one assignment's: it holds one notebook, whose first cell is Otter's config."""
    notebooks = list(folder.glob("*.ipynb"))
    if len(notebooks) != 1:
        return False
    try:
        cells = json.loads(notebooks[0].read_text(encoding="utf-8"))["cells"]
        return "".join(cells[0]["source"]).startswith("# ASSIGNMENT CONFIG")
    except (ValueError, KeyError, IndexError, TypeError):
        return False


RELEASE_FORM = re.compile(r"v\d+\.\d+\.\d+")  # a release tag of the package: vX.Y.Z
RELEASE_LINE = 'RELEASE = "main"'  # in each master's first cell: the package it installs where it is missing
# transformer_lib/ and tools/, whose code a release must match (the autograder installs both)
PACKAGES = (Path(transformer_lib.__file__).resolve().parent, Path(__file__).resolve().parents[2])


def _release_tag(release: str) -> None:
    if not RELEASE_FORM.fullmatch(release):
        raise InvalidValue(f"--release takes a release tag vX.Y.Z (see CHANGELOG.md), got {release!r}")


def pinned(folder: str | os.PathLike, release: str, scratch: Path) -> Path:
    """A copy of ``folder`` in ``scratch`` whose masters and autograder requirements install the
    package at ``release`` (a tag ``vX.Y.Z``) instead of ``main``: a semester's pin, set once."""
    _release_tag(release)
    copy = scratch / "assignments"
    shutil.copytree(folder, copy)
    for master in masters(copy):
        notebook = json.loads(master.read_text(encoding="utf-8"))
        sources = ["".join(cell["source"]) for cell in notebook["cells"]]
        if not any(RELEASE_LINE in source for source in sources):
            raise InvalidValue(f"{master.name}: no cell sets {RELEASE_LINE} to pin")
        for cell, source in zip(notebook["cells"], sources, strict=True):
            cell["source"] = source.replace(RELEASE_LINE, f'RELEASE = "{release}"')
        master.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    requirements = copy / "requirements.txt"
    if requirements.exists():
        text = requirements.read_text(encoding="utf-8")
        text = re.sub(r"((?:transformer-book(?:-tools)?|transformer_lib) @ git\+\S+)@main\b", rf"\1@{release}", text)
        requirements.write_text(text, encoding="utf-8")
    return copy


def check_release(release: str, packages: tuple[Path, ...] = PACKAGES) -> None:
    """Refuse to pin ``release`` unless this checkout's package is that release's.

    The masters are tested against the package beside them: built from a newer checkout, they may use
    what ``release`` lacks (a plugin, a helper), and every submission would then fail to grade all
    term. ``git diff`` of the library and the tools (``packages``) against the tag tells; without
    the tag it cannot.
    """
    _release_tag(release)
    try:
        differs = max(
            subprocess.run(
                ["git", "-C", str(package), "diff", "--quiet", release, "--", "."], capture_output=True
            ).returncode
            for package in packages
        )
    except OSError:  # no git
        differs = 128
    if differs == 1:
        raise InvalidValue(
            f"this checkout's package is not {release}'s, so its assignments may use what {release} lacks: "
            f"check out the release first (git checkout {release}), then build with --release {release}"
        )
    if differs:
        raise InvalidValue(
            f"cannot tell whether this checkout is {release}: no tag {release} here (git fetch --tags), "
            f"or not a clone of the repository: clone it, git checkout {release}, then build"
        )


def build(
    folder: str | os.PathLike, out: str | os.PathLike, run_tests: bool = False, release: str | None = None
) -> list[Path]:
    """``otter assign`` every master of ``folder`` into ``out/<assignment>/`` (student/ and autograder/).

    Each assignment is built into a temporary folder and renamed into place when Otter succeeded,
    so ``out`` never holds half an assignment. Returns the assignments' output folders. With
    ``run_tests`` Otter also runs each solution against its tests (the capstone's needs the
    student's translations file beside it); ``.ci/assignments.py`` grades every solution instead.
    With ``release`` (a tag ``vX.Y.Z``) the student notebooks and the autograder install that
    release of the package, not ``main`` (:func:`pinned`), once :func:`check_release` has found this
    checkout's package to be that release's.
    """
    if release:
        check_release(release)
    command = _otter()
    out = Path(out)
    with tempfile.TemporaryDirectory() as copies:
        if not release:
            sources = masters(folder)
        elif _is_master_folder(Path(folder)):  # one assignment, pinned with its folder's requirements
            sources = masters(pinned(Path(folder).parent, release, Path(copies)) / Path(folder).name)
        else:
            sources = masters(pinned(folder, release, Path(copies)))
        out.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=2) as pool:  # each otter assign is a process of its own
            return list(pool.map(lambda master: _assign(command, master, out, run_tests), sources))


def _assign(command: list[str], master: Path, out: Path, run_tests: bool) -> Path:
    """``otter assign`` one master into a temporary folder, renamed to ``out/<assignment>/`` when it succeeded."""
    target = out / master.parent.name
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        result = subprocess.run(
            [*command, "assign", "--no-pdfs", *([] if run_tests else ["--no-run-tests"]), str(master), scratch],
            capture_output=True,
            text=True,
        )
        if result.returncode:
            lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
            raise InvalidValue(f"otter assign {master.name} failed: {lines[-1] if lines else 'no message'}")
        zips = list(Path(scratch, "autograder").glob("*-autograder_*.zip"))
        finish_zip(zips[0], Path(scratch, "autograder", "autograder.zip"), master)
        zips[0].unlink()
        if target.exists():
            shutil.rmtree(target)
        Path(scratch).rename(target)
        Path(scratch).mkdir()  # for TemporaryDirectory's own clean-up
    return target


def finish_zip(otter_zip: Path, autograder: Path, master: Path) -> None:
    """Otter's zip with Gradescope's run script replaced by the sandboxed grader's
    (:data:`book_tools.coursework.gradescope.RUN_SCRIPT`), and the questions graded by hand added
    for ``grade``'s rows."""
    from book_tools.coursework.gradescope import RUN_SCRIPT

    with zipfile.ZipFile(otter_zip) as source, zipfile.ZipFile(autograder, "w", zipfile.ZIP_DEFLATED) as archive:
        if "run_otter.py" not in source.namelist():
            raise InvalidValue(f"{otter_zip.name} has no run_otter.py: this Otter's zip is not the one assign knows")
        for member in source.infolist():
            data = RUN_SCRIPT.encode() if member.filename == "run_otter.py" else source.read(member)
            archive.writestr(member, data)
        archive.writestr(BY_HAND_FILE, json.dumps(by_hand_questions(master)))


BY_HAND_FILE = "by_hand.json"  # in each autograder zip: {question: points} of the questions graded by hand
BY_HAND_MESSAGE = "graded by hand: read the answer in the notebook"


def by_hand_questions(master: Path) -> dict[str, float]:
    """The master's questions graded by hand (``manual: true``), with their points."""
    found = {}
    for cell in json.loads(master.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "raw" and source.startswith("# BEGIN QUESTION"):
            config = yaml.safe_load(source.split("\n", 1)[1])
            if config.get("manual"):
                found[config["name"]] = float(config.get("points", 0))
    return found


@dataclass(frozen=True)
class Score:
    """One question of one submission."""

    submission: str
    question: str
    points: float
    possible: float
    message: str  # "passed", or the test that cost the points and the first line of why
    by_hand: bool = False  # a question the instructor grades: points 0 here, to be entered by hand
    note: bool = False  # not a question: what grading refused or stopped (NOTES_ROW), no points


def possible_points(autograder: Path) -> float:
    """The assignment's points: the ``points = N`` of each question's test file in the zip (read, never run).

    ``assign`` writes one per question, from the master's ``points``; a not-graded submission is zero
    out of this, so that a gradebook sees what was missed.
    """
    total = 0.0
    with zipfile.ZipFile(autograder) as archive:
        for name in archive.namelist():
            if name.startswith("tests/") and name.endswith(".py"):
                for node in ast.parse(archive.read(name).decode("utf-8")).body:
                    if (
                        isinstance(node, ast.Assign)
                        and [getattr(t, "id", None) for t in node.targets] == ["points"]
                        and isinstance(node.value, ast.Constant)
                    ):
                        total += float(node.value.value)
    return total


def grade_one(
    autograder: Path, submission: Path, seconds: int = SUBMISSION_SECONDS, guarded: list[str] = ()
) -> list[Score]:
    """One submission: its code in a sandbox, its tests in a process of the grader's.

    The sandbox is :mod:`book_tools.coursework.sandbox`, the grader
    :mod:`book_tools.coursework.grader`; what comes back is every question's points, or
    zero and why, and a row for what was refused.

    The grader's process forks from a server that imported PyTorch once, where there is fork (a new
    Python elsewhere). Whatever becomes of it, every process the submission started is killed and
    every folder of the grading removed when it ends. ``guarded``: more folders the submission may not
    touch (Gradescope's, say).
    """
    from book_tools.coursework import sandbox

    isolation = sandbox.isolation()  # tried once per process
    mark = sandbox.new_mark()
    uid = sandbox.free_uid() if isolation.users else -1
    context = _grading_context()
    with tempfile.TemporaryDirectory(prefix="tl-results-") as out:
        os.chmod(out, 0o700)
        guarded = [str(Path(autograder).resolve()), str(Path(submission).resolve().parent), out, *guarded]
        args = (str(autograder), str(submission), seconds, isolation, guarded, mark, uid, out)
        process = context.Process(target=_grade_in_process, args=args)
        process.start()
        process.join(seconds + sandbox.START_SECONDS)
        timed_out = process.is_alive()
        if timed_out:
            process.kill()
            process.join()
        sandbox.clean_up(uid, mark)
        results = Path(out, "results.json")
        graded = json.loads(results.read_text(encoding="utf-8")) if results.exists() else None
    if graded is None:
        why = f"grading stopped after {seconds} s" if timed_out else f"the grader's process failed ({process.exitcode})"
        graded = {"not_graded": why, "questions": {}, "notes": []}
    rows = []
    if graded["not_graded"]:
        reason = _printable(f"not graded: {graded['not_graded']}")
        rows.append(Score(submission.name, "-", 0.0, possible_points(autograder), reason))
    for question, (points, possible, message) in graded["questions"].items():
        rows.append(Score(submission.name, question, float(points), float(possible), _printable(message)))
    rows += by_hand_scores(autograder, submission.name)
    if graded["notes"]:
        notes = _printable("; ".join(portable(note) for note in graded["notes"]))
        rows.append(Score(submission.name, NOTES_ROW, 0.0, 0.0, notes, note=True))
    return rows


def portable(note: str) -> str:
    """A note without this machine's paths, the same on every grader: a grading's own folders
    (``tl-...`` in the temporary folder) read ``<grading>``, the temporary folder ``$TMPDIR``."""
    temporary = tempfile.gettempdir().rstrip("/")
    note = re.sub(re.escape(temporary) + r"/tl-[\w-]+", "<grading>", note)
    return note.replace(temporary, "$TMPDIR")


NOTES_ROW = "refused"  # the row that says what a submission tried that grading refused or stopped


def _grading_context() -> multiprocessing.context.BaseContext:
    """Where processes can fork from a server that imported PyTorch once, so that a grading starts in
    milliseconds, not the seconds imports take; a new Python for each where there is no fork (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["book_tools.coursework.grader"])  # read once, at its start
    return context


def _grade_in_process(
    autograder: str, submission: str, seconds: int, isolation: Any, guarded: list[str], mark: str, uid: int, out: str
) -> None:
    """The grader's process: the tests here, the submission's code in its sandbox; results.json into ``out``."""
    from book_tools.coursework import grader

    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the tests print nothing anyone reads
    try:
        graded = grader.grade_submission(
            Path(autograder), Path(submission), seconds, isolation, guarded, mark=mark, uid=uid
        )
        result = {
            "questions": graded.questions,
            "notes": graded.notes,
            "not_graded": graded.not_graded,
            "sha256": graded.sha256,
        }
    except grader.NotGraded as why:
        result = {"questions": {}, "notes": [], "not_graded": str(why)}
    Path(out, "results.json").write_text(json.dumps(result), encoding="utf-8")


def by_hand_scores(autograder: Path, submission: str) -> list[Score]:
    """A row for each question graded by hand (``by_hand.json`` in the zip), so that the totals add up."""
    with zipfile.ZipFile(autograder) as archive:
        if BY_HAND_FILE not in archive.namelist():
            return []
        questions = json.loads(archive.read(BY_HAND_FILE).decode("utf-8"))
    return [Score(submission, q, 0.0, float(p), BY_HAND_MESSAGE, by_hand=True) for q, p in questions.items()]


def submissions_in(paths: list[str | os.PathLike]) -> dict[str, Path]:
    """The submissions named, by the name their rows get.

    A folder stands for every notebook and zip in it and in its subfolders (one a student, as GitHub
    Classroom's are), each named by its path inside that folder (``alice/a2_attention.ipynb``); a file
    named alone keeps its own name. Two files that would share a name are named by their whole paths.
    Every file is graded, a notebook and the zip exported from it alike: which one a student meant is
    not the grader's to guess, and dropping one could hide another student's. A name that is not UTF-8
    is written with backslash escapes (``a2\\xff.ipynb``), so that the rows can always be written.
    """
    named: list[tuple[str, Path]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in _files_under(path):
                inside = file.relative_to(path)
                if file.suffix in (".ipynb", ".zip") and file.is_file() and ".ipynb_checkpoints" not in inside.parts:
                    named.append((_printable(inside.as_posix()), file))
        elif path.suffix not in (".ipynb", ".zip"):
            raise InvalidValue(f"{path} is not a submission: give notebooks (.ipynb), zips or folders of them")
        elif not path.is_file():
            raise MissingFile(f"no submission {path}")
        else:
            named.append((_printable(path.name), path))
    if not named:
        raise MissingFile(f"no submissions (.ipynb or .zip) in {', '.join(map(str, paths))}")
    files_of: dict[str, set[Path]] = {}
    for name, file in named:
        files_of.setdefault(name, set()).add(file.resolve())
    return {name if len(files_of[name]) == 1 else _printable(file.as_posix()): file for name, file in named}


def _files_under(folder: Path) -> list[Path]:
    """Every file under ``folder``, in order, links to folders not followed; walked with a stack, so that
    a student's folders nested past Python's recursion limit cannot stop the run (``rglob`` recurses)."""
    found, stack = [], [folder]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            (stack if entry.is_dir(follow_symlinks=False) else found).append(Path(entry.path))
    return sorted(found)


def _printable(text: str) -> str:
    """``text`` as UTF-8 that can be written: a surrogate, a byte that was not UTF-8 in a file's name or a
    message a submission made, as an escape (``\\xff``; ``\\ud800`` for one no byte stands for)."""
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def grade(
    autograder: str | os.PathLike,
    submissions: list[str | os.PathLike],
    csv_path: str | os.PathLike | None = None,
    seconds: int = SUBMISSION_SECONDS,
) -> list[Score]:
    """Grade every submission with the autograder zip; write the scores as CSV when ``csv_path`` is given."""
    autograder = Path(autograder)
    if autograder.suffix != ".zip" or not autograder.is_file():
        raise MissingFile(f"no autograder zip {autograder}: build it with python -m book_tools assign")
    if not zipfile.is_zipfile(autograder) or "otter_config.json" not in zipfile.ZipFile(autograder).namelist():
        raise InvalidValue(f"{autograder} is not an autograder zip: give the autograder.zip that assign wrote")
    if seconds < 1:
        raise InvalidValue(f"the time limit must be at least 1 second, got {seconds}")
    found = {name: p for name, p in submissions_in(submissions).items() if p.resolve() != autograder.resolve()}
    if not found:
        raise MissingFile(f"no submissions besides the autograder in {', '.join(map(str, submissions))}")
    scores = [
        dataclasses.replace(score, submission=name)
        for name, path in found.items()
        for score in grade_one(autograder, path, seconds)
    ]
    if csv_path is not None:
        write_csv(scores, Path(csv_path))
    return scores


def write_csv(scores: list[Score], path: Path) -> None:
    """One row per submission and question; written to a temporary name, then renamed, readable by its owner only."""
    with atomic_path(path, mode=0o600) as partial, open(partial, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "question", "points", "possible", "message"])
        writer.writerows(
            [
                s.submission,
                s.question,
                "" if s.by_hand or s.note else f"{s.points:g}",
                "" if s.note else f"{s.possible:g}",
                s.message,
            ]
            for s in scores
        )


def table(scores: list[Score]) -> str:
    """The scores as an aligned text table, with each submission's total."""
    lines = [("submission", "question", "points", "message")]
    for name in dict.fromkeys(s.submission for s in scores):
        mine = [s for s in scores if s.submission == name]
        for s in mine:
            points = "" if s.note else f"{'?' if s.by_hand else f'{s.points:g}'}/{s.possible:g}"
            lines.append((name, s.question, points, s.message))
        auto = [s for s in mine if not s.by_hand and not s.note]
        hand = sum(s.possible for s in mine if s.by_hand)
        lines.append(
            (
                name,
                "total",
                f"{sum(s.points for s in auto):g}/{sum(s.possible for s in auto):g}",
                f"+ {hand:g} by hand, {sum(s.possible for s in mine):g} in all" if hand else "",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    return "\n".join(
        ("  ".join(line[i].ljust(widths[i]) for i in range(3)) + "  " + line[3]).rstrip() for line in lines
    )
