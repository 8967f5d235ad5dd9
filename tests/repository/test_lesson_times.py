"""The lesson tables' run times are the ones the lessons' timed runs took.

``tools/scripts/execute.py --time`` runs a lesson top to bottom and writes its wall time and what
it ran on into the notebook's metadata (``timed_run``), leaving the stored outputs as they are.
The README's lesson table and the how-to-run page's quote that time, rounded by :func:`runs_in`,
for the conditions both pages state: one thread, PyTorch's vector kernels off
(``ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1``). The run also records a digest of the code it
ran: a lesson whose code changed since is timed again before its time is quoted.
"""

import json
import math
import re
from pathlib import Path

import nbformat
import pytest

from conftest import tool_script

ROOT = Path(__file__).resolve().parents[2]
TIME = "ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 python tools/scripts/execute.py --time"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9a]*.ipynb"))
code_digest = tool_script("execute").code_digest  # the digest execute.py --time writes
TABLES = {
    "README.md": r"^\| [^|]+ \| \[[^]]+\]\(notebooks/{stem}\.ipynb\) \|.*\| ([^|]+) \|$",
    "book/how_to_run.md": r"^\| [^|]+ \| \{{doc\}}`[^`]+<\.\./notebooks/{stem}>` \|.*\| ([^|]+) \|$",
}


def runs_in(seconds: float) -> str:
    """A run time as the tables print it: "< 15 s", "~40 s", "~1.5 min"."""
    if seconds < 15:
        return "< 15 s"
    if seconds < 55:
        return f"~{math.floor(seconds / 10 + 0.5) * 10} s"
    return f"~{math.floor(seconds / 30 + 0.5) / 2:g} min"


def test_the_rounding():
    assert [runs_in(s) for s in (3, 25, 27, 44.9, 54, 56, 75, 83, 100, 150, 181)] == [
        "< 15 s",
        "~30 s",
        "~30 s",
        "~40 s",
        "~50 s",
        "~1 min",
        "~1.5 min",
        "~1.5 min",
        "~1.5 min",
        "~2.5 min",
        "~3 min",
    ]


def timed_run(lesson: Path) -> dict:
    run = json.loads(lesson.read_text(encoding="utf-8"))["metadata"].get("timed_run")
    assert run, f"{lesson.name} has no timed run: {TIME} notebooks/{lesson.name}"
    return run


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_was_timed_as_the_tables_say(lesson):
    run = timed_run(lesson)
    assert (run["cpu_threads"], run["cpu_capability"]) == (1, "DEFAULT"), (
        f"{lesson.name} was timed on {run['cpu_threads']} threads with {run['cpu_capability']} kernels: "
        f"time it with {TIME} notebooks/{lesson.name}"
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_was_timed_with_the_code_it_has_now(lesson):
    digest = code_digest(nbformat.read(lesson, as_version=4))
    assert timed_run(lesson).get("code_sha256") == digest, (
        f"{lesson.name}'s code changed since its timed run: time it again with {TIME} notebooks/{lesson.name}"
    )


@pytest.mark.parametrize("page", list(TABLES))
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_the_tables_quote_each_lessons_recorded_time(page, lesson):
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = re.findall(TABLES[page].format(stem=re.escape(lesson.stem)), text, flags=re.MULTILINE)
    assert len(rows) == 1, f"{page}: no single row for {lesson.name}"
    expected = runs_in(timed_run(lesson)["seconds"])
    assert re.search(rf"(^|\W){re.escape(expected)}(\W|$)", rows[0]), (
        f"{page} says {rows[0].strip()!r} for {lesson.name}; its recorded run took {expected}"
    )
