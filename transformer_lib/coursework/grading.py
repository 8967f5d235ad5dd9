"""Grade learners' notebooks: run each one and tabulate the exercise checks it called.

For example::

    python -m transformer_lib grade alice/04_attention.ipynb bob/04_attention.ipynb

Each notebook runs top to bottom in a fresh kernel, in its own folder, with every cell run even
after one fails (a broken exercise must not hide the next one's result). The checks it calls
(:func:`transformer_lib.coursework.exercises.check`) report to a log named by ``GRADE_LOG_ENV``; a lesson's
checked exercises that the notebook never called are listed as not attempted. The notebook file
itself is left as it was.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from transformer_lib.coursework.exercises import EXERCISES, GRADE_LOG_ENV
from transformer_lib.errors import InvalidValue, MissingFile


@dataclass(frozen=True)
class Row:
    """One line of the grade table."""

    notebook: str
    exercise: str
    status: str  # "pass", "not yet", "not attempted", or "error" for a notebook that did not run
    message: str


def _lesson(path: Path) -> str | None:
    """ "04" for 04_attention.ipynb (or alice_04_attention.ipynb): whose checks to expect."""
    match = re.search(r"(?:^|_)(\d\d)_", path.name)
    return match.group(1) if match else None


def run_notebook(path: Path, timeout: int) -> tuple[list[dict], int]:
    """Execute a copy of the notebook; return the checks it called (in order) and how many cells raised."""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        raise MissingFile("grading runs notebooks with nbclient: pip install nbclient ipykernel") from None
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "checks.jsonl"
        log.touch()
        previous = os.environ.get(GRADE_LOG_ENV)
        os.environ[GRADE_LOG_ENV] = str(log)  # the kernel inherits it
        try:
            client = NotebookClient(
                notebook, timeout=timeout, allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
            )
            client.execute(stderr=subprocess.DEVNULL)  # the kernel's own start-up warnings are not the learner's
        finally:
            if previous is None:
                del os.environ[GRADE_LOG_ENV]
            else:
                os.environ[GRADE_LOG_ENV] = previous
        checks = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    errors = sum(  # a cell tagged raises-exception shows an error on purpose (the lessons have some)
        any(output.get("output_type") == "error" for output in cell.get("outputs", []))
        for cell in notebook.cells
        if cell.cell_type == "code" and "raises-exception" not in cell.metadata.get("tags", [])
    )
    return checks, errors


def grade(paths: list[str | os.PathLike], timeout: int = 600) -> list[Row]:
    """Run every notebook and return the table's rows: one per checked exercise of its lesson."""
    rows: list[Row] = []
    for raw in paths:
        path = Path(raw)
        if path.suffix != ".ipynb":
            raise InvalidValue(f"{path} is not a notebook (.ipynb)")
        if not path.is_file():
            raise MissingFile(f"no notebook {path}")
        checks, errors = run_notebook(path, timeout)
        last = {check["exercise"]: check for check in checks}  # a learner may try again: the last try counts
        lesson = _lesson(path)
        expected = [e for e in EXERCISES if lesson and e.startswith(lesson + ".")]
        for exercise in sorted(set(expected) | set(last)):
            if exercise in last:
                status = "pass" if last[exercise]["passed"] else "not yet"
                rows.append(Row(path.name, exercise, status, last[exercise]["message"]))
            else:
                rows.append(Row(path.name, exercise, "not attempted", EXERCISES[exercise].title))
        if errors:
            rows.append(Row(path.name, "-", "error", f"{errors} cell(s) raised an error; the rest still ran"))
    return rows


def table(rows: list[Row]) -> str:
    """The rows as an aligned text table, with a total of passes per notebook."""
    lines = [("notebook", "exercise", "status", "message")]
    for notebook in dict.fromkeys(r.notebook for r in rows):  # each notebook's rows, then its total
        mine = [r for r in rows if r.notebook == notebook]
        lines += [(r.notebook, r.exercise, r.status, r.message) for r in mine]
        passed = sum(r.status == "pass" for r in mine)
        lines.append((notebook, "total", f"{passed}/{sum(r.exercise != '-' for r in mine)} pass", ""))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    padded = ["  ".join(line[i].ljust(widths[i]) for i in range(3)) + "  " + line[3] for line in lines]
    return "\n".join(line.rstrip() for line in padded)
