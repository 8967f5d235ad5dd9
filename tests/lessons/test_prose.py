"""The lessons read as lessons: plain sentences, a sitting's length, no tracker words, no run times promised in words.

Run it as a report too: ``PYTHONPATH=tests python tests/lessons/test_prose.py`` prints each lesson's words,
minutes and long sentences. Reading time is prose at 220 words a minute plus 10 seconds a code cell. Code, math,
images and link targets are not words; a sentence ends at ``.``, ``!`` or ``?`` before a capital.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import TRACKER_NUMBERS

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

MAX_MINUTES = 25  # one sitting
MAX_TOTAL_MINUTES = 150  # the thirteen lessons together
MAX_LONG_SENTENCES = 15  # across the thirteen lessons
LONG = 40  # words

# Words that belong to the project's tracker and its history, not to a lesson.
TRACKER = re.compile(rf"{TRACKER_NUMBERS}|\bsittings?\b|NOTES\.md|\bclosing notes?\b", re.IGNORECASE)
# A run time promised in words ("half a minute", "a few seconds"): it holds on the machine that wrote
# it, not on a reader's. A cell that takes a while prints its own seconds; the lesson tables give
# each lesson's recorded time (tests/repository/test_lesson_times.py).
PROMISED_TIME = re.compile(  # a space in the words: any white space, a line break included
    (
        r"\b(?:half an? (?:minute|hour)|a minute or two|an? (?:few )?(?:more )?minutes?|a few (?:more )?seconds"
        r"|(?:one|two|three|four|five|six|seven|eight|nine|ten|few|several) (?:seconds|minutes))\b"
    ).replace(" ", r"\s+"),
    re.IGNORECASE,
)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def prose(markdown: str) -> str:
    """The words a reader reads in a markdown cell: no code, math, images, tables, tags or link targets."""
    text = re.sub(r"```.*?```|:::.*?:::", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]*\$", " ", text)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # images (alt text is not read aloud twice)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", " ", text)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("|")]
    return "\n".join(lines)


def words(text: str) -> list[str]:
    return [w for w in text.split() if re.search(r"[A-Za-z0-9]", w)]


def sentences(text: str) -> list[str]:
    text = re.sub(r"^\s*#+\s.*$", " ", text, flags=re.M)  # headings are not sentences
    text = re.sub(r"^\s*([-*+]|\d+\.)\s", "\n\n", text, flags=re.M)  # nor is a list one sentence
    parts = []
    for block in re.split(r"\n\s*\n", text):
        parts += re.split(r"(?<=[.!?])[)\"'*_]*\s+(?=[\"'(*_]*[A-Z])", " ".join(block.split()))
    return [p for p in parts if words(p)]


def measure(path: Path) -> dict:
    source = cells(path)
    text = "\n\n".join("".join(c["source"]) for c in source if c["cell_type"] == "markdown")
    body = prose(text)
    n_code = sum(c["cell_type"] == "code" for c in source)
    n_words = len(words(body))
    long = [s for s in sentences(body) if len(words(s)) > LONG]
    return {"words": n_words, "code_cells": n_code, "minutes": n_words / 220 + n_code * 10 / 60, "long": long}


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_a_lesson_fits_one_sitting(lesson):
    minutes = measure(lesson)["minutes"]
    assert minutes <= MAX_MINUTES, f"{lesson.name} takes {minutes:.1f} minutes to read (at most {MAX_MINUTES})"


def test_the_lessons_together_fit_the_budget():
    total = sum(measure(lesson)["minutes"] for lesson in LESSONS)
    assert total <= MAX_TOTAL_MINUTES, f"the lessons take {total:.0f} minutes to read (at most {MAX_TOTAL_MINUTES})"


def test_few_sentences_run_over_forty_words():
    long = [(lesson.name, s) for lesson in LESSONS for s in measure(lesson)["long"]]
    shown = "\n".join(f"{name}: {s[:120]}..." for name, s in long)
    assert len(long) <= MAX_LONG_SENTENCES, f"{len(long)} sentences over {LONG} words:\n{shown}"


@pytest.mark.parametrize("notebook", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_words_of_the_tracker_reach_a_lesson(notebook):
    for index, cell in enumerate(cells(notebook)):
        match = TRACKER.search("".join(cell["source"]))
        assert match is None, f"{notebook.name} cell {index} says {match.group(0)!r}: the git log holds history"


@pytest.mark.parametrize("notebook", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_lesson_promises_in_words_how_long_a_cell_takes(notebook):
    for index, cell in enumerate(cells(notebook)):
        if cell["cell_type"] == "markdown":
            match = PROMISED_TIME.search(prose("".join(cell["source"])))
            assert match is None, (
                f"{notebook.name} cell {index} says {match.group(0)!r}: print the cell's seconds instead"
            )


def test_the_time_rule_finds_what_it_is_for():
    found = [
        bool(PROMISED_TIME.search(text))
        for text in (
            "This cell takes about half a minute.",
            "under a minute on a CPU",
            "a few seconds a run",
            "a minute or two for the cell",
            "which takes a few more\nminutes",
            "about seven minutes each",
            "Training takes 20 minutes per direction.",
            "a second head",
        )
    ]
    assert found == [True, True, True, True, True, True, False, False]


def test_the_sentence_splitter_counts_as_the_rule_says():
    text = prose("One two three. Four `code here` five! Six $x + y$ seven? eight. [Nine](https://x.y/z) ten.")
    assert [len(words(s)) for s in sentences(text)] == [3, 2, 3, 2]  # no sentence ends before "eight"


if __name__ == "__main__":
    total = 0.0
    n_long = 0
    for lesson in LESSONS:
        m = measure(lesson)
        total += m["minutes"]
        n_long += len(m["long"])
        counts = f"{m['words']:6} words {m['code_cells']:4} code {m['minutes']:5.1f} min {len(m['long']):3} long"
        print(f"{lesson.name:40} {counts}")
    print(f"{'total':40} {total:5.1f} min, {n_long} sentences over {LONG} words")
    if "-v" in sys.argv:
        for lesson in LESSONS:
            for s in measure(lesson)["long"]:
                print(f"\n{lesson.name}: {s}")
