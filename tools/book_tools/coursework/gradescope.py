"""Gradescope's run script for the autograder zip: the same sandboxed grading as ``grade``, not Otter's.

Gradescope unpacks the autograder zip into ``/autograder/source`` and the student's upload into
``/autograder/submission``, runs the zip's ``run_autograder`` as root in one container, and shows
``/autograder/results/results.json``. Otter's own run script executes the notebook and then the
tests in one Python, as root: the notebook could rewrite the tests or the results. ``assign``
replaces that script with :data:`RUN_SCRIPT`, which calls :func:`main`: the submission is graded as
``python -m book_tools grade`` grades it (:func:`book_tools.coursework.grading.grade_one`),
its code as a user of its own in a sandbox, the tests in a process apart, and only the grader's
process writes the results.

What a student sees: one line at once (graded, or what to hand in instead); each question's points
and message once the instructor publishes the grades. The row of what grading refused is for the
instructor alone. Questions graded by hand are left to Gradescope's own rubric.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from book_tools.coursework import grading
from transformer_lib.files import write_text

ROOT_VARIABLE = "AUTOGRADER_ROOT"  # where Gradescope's folders are: /autograder there, a test's folder here

RUN_SCRIPT = '''"""Grade the submission with the book's sandboxed grader (not Otter's in-process run)."""

from book_tools.coursework.gradescope import main

if __name__ == "__main__":
    raise SystemExit(main())
'''


def submission_file(folder: Path, scratch: Path) -> Path | str:
    """The one file to grade: the zip handed in, or the notebook with the files beside it zipped together.

    A string instead says what to hand in.
    """
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    zips = [p for p in files if p.suffix == ".zip"]
    notebooks = [p for p in files if p.suffix == ".ipynb" and ".ipynb_checkpoints" not in p.parts]
    if len(zips) == 1 and not notebooks:
        return zips[0]
    if len(notebooks) != 1:
        return f"{len(notebooks)} notebooks were handed in: hand in the zip the notebook's last cell writes"
    others = [p for p in files if p != notebooks[0] and p.suffix != ".zip"]
    if not others:
        return notebooks[0]
    packed = scratch / "submission.zip"
    with zipfile.ZipFile(packed, "w") as archive:
        for path in [notebooks[0], *others]:
            archive.write(path, path.name)
    return packed


def results(scores: list[grading.Score], not_graded: str = "") -> dict:
    """Gradescope's results.json: a row per question graded here, the points, and one line for the student."""
    tests, total = [], 0.0
    for score in scores:
        if score.by_hand:
            continue
        if score.note:
            tests.append(
                {"name": grading.NOTES_ROW, "score": 0, "max_score": 0, "output": score.message, "visibility": "hidden"}
            )
            continue
        if score.question == "-":  # not graded: the reason is the line the student sees
            not_graded = not_graded or score.message
            continue
        total += score.points
        tests.append(
            {
                "name": score.question,
                "score": score.points,
                "max_score": score.possible,
                "output": score.message,
                "visibility": "after_published",
            }
        )
    line = not_graded or "Graded: your points appear when your instructor publishes the grades."
    return {"score": total, "output": line, "stdout_visibility": "hidden", "tests": tests}


def reachable(program: str) -> None:
    """Let other users pass through (not list) the folders above ``program``: Gradescope's Python lives
    under ``/root``, which only root may enter, and the submission runs as a user of its own."""
    for path in (Path(program).absolute(), Path(program).resolve()):  # a virtual environment's link, and its target
        for folder in path.parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(mode | stat.S_IXOTH)


def main(root: str | os.PathLike | None = None) -> int:
    """Grade ``root/submission`` with the tests of ``root/source``; write ``root/results/results.json``."""
    root = Path(root or os.environ.get(ROOT_VARIABLE, "/autograder"))
    if os.geteuid() == 0:  # Gradescope's container: the submission becomes a user of its own
        reachable(sys.executable)
        for folder in ("source", "submission"):
            (root / folder).chmod(0o700)
    with tempfile.TemporaryDirectory(prefix="tl-gradescope-") as scratch:
        os.chmod(scratch, 0o700)
        autograder = Path(scratch, "autograder.zip")  # the source folder zipped again, as grade takes it
        with zipfile.ZipFile(autograder, "w") as archive:
            for path in sorted((root / "source").rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(root / "source").as_posix())
        found = submission_file(root / "submission", Path(scratch))
        if isinstance(found, str):
            report = results([], f"not graded: {found}")
        else:
            guarded = [str(root / "source"), str(root / "results")]
            report = results(grading.grade_one(autograder, found, guarded=guarded))
    write_text(root / "results" / "results.json", json.dumps(report, indent=2) + "\n")
    return 0
