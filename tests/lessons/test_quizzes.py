"""The end-of-lesson quizzes: every lesson ends with one, its questions are well formed, every
option is explained, a number it quotes is one the lesson printed on any machine (or asserted), and
a place to ask follows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_numbers import cell_text, numbers_in, shown
from test_prose import cells

from transformer_lib.coursework import quiz
from transformer_lib.errors import InvalidValue

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]


def lesson_text(path: Path) -> str:
    """What a lesson runs and prints on any machine: the code of every cell but the quiz's own (whose
    output holds the quiz, so it would vouch for every number in it), and the stored outputs nbval
    compares. An ``nbval-ignore-output`` cell's output varies between machines: a quiz that quoted
    it would contradict the next run, so it quotes the bound its assert checks instead."""
    code = [c for c in cells(path) if c["cell_type"] == "code" and "show_quiz(" not in "".join(c["source"])]
    kept = []
    for c in code:
        source, outputs = cell_text(c)
        kept += [source] if "nbval-ignore-output" in c["metadata"].get("tags", []) else [source, outputs]
    return "\n".join(kept)


def texts(question: dict) -> list[str]:
    """What a learner reads of a question: the question, each option and each explanation."""
    found = [question["question"]]
    for answer in question["answers"]:
        found += [str(answer.get("answer", "")), answer.get("feedback", "")]
    return found


def test_every_lesson_has_a_quiz_and_every_quiz_a_lesson():
    assert quiz.lessons() == [p.stem for p in LESSONS]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_quiz_is_four_to_six_well_formed_questions(path):
    questions = quiz.questions(path.stem)
    assert 4 <= len(questions) <= 6, f"{len(questions)} questions"
    for q in questions:
        name = q["question"][:60]
        assert q["type"] in ("multiple_choice", "many_choice", "numeric"), name
        answers = q["answers"]
        if q["type"] == "numeric":
            right = [a for a in answers if a.get("correct")]
            assert right and all(a["type"] in ("value", "range") for a in right), name
            assert any(a["type"] == "default" and a.get("feedback") for a in answers), name
        else:
            correct = sum(bool(a["correct"]) for a in answers)
            assert len(answers) >= 3, f"{name}: at least three options"
            assert correct == 1 if q["type"] == "multiple_choice" else correct >= 2, name
        for a in answers:
            feedback = a.get("feedback", "")
            assert feedback, f"{name}: an option without its explanation"
            assert len(re.findall(r"[.!?](\s|$)", feedback)) <= 3, f"{name}: explanation too long: {feedback}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_number_a_quiz_quotes_is_one_the_lesson_printed_on_any_machine(path):
    printed = numbers_in(lesson_text(path))
    for q in quiz.questions(path.stem):
        for text in texts(q):
            text = re.sub(r"\$[^$]*\$", " ", text)  # formulas are the lesson's symbols
            for match in re.finditer(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?", text):
                value = match.group(0).replace(",", "")
                if float(value) <= 12 and "." not in value:
                    continue  # small counts: heads, layers, steps of an example
                places = len(match.group(2) or "") - (1 if match.group(2) else 0)
                assert shown(float(value), places, printed), f"{path.stem}: {match.group(0)} in {text!r}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_lesson_ends_with_its_quiz_and_a_place_to_ask(path):
    tail = cells(path)[-3:]
    code = [c for c in tail if c["cell_type"] == "code"]
    assert code and f'show_quiz("{path.stem}")' in "".join(code[-1]["source"]), "no quiz at the end"
    ask = "".join(tail[-1]["source"])
    assert f"{REPOSITORY}/discussions" in ask, "no link to the lesson's discussion"
    assert re.search(rf"Lesson {int(path.name[:2])}\b", ask), "the discussion link does not name the lesson"


def test_an_unknown_quiz_is_one_clear_error():
    with pytest.raises(InvalidValue, match="no quiz named 'nope'"):
        quiz.questions("nope")


def test_the_issue_templates_send_questions_to_discussions():
    config = yaml.safe_load((ROOT / ".github" / "ISSUE_TEMPLATE" / "config.yml").read_text(encoding="utf-8"))
    urls = [link["url"] for link in config["contact_links"]]
    assert f"{REPOSITORY}/discussions" in urls


def test_a_quiz_drawn_before_mathjax_has_loaded_does_not_fail(monkeypatch):
    """The site loads MathJax after the page: jupyterquiz's script, which reads MathJax.version half a
    second after drawing, must not run on MathJax's bare configuration (a TypeError on a slow phone)."""
    from IPython import display as ipython_display
    from IPython.display import Javascript

    shown = []
    monkeypatch.setattr(ipython_display, "display", lambda *parts, **_: shown.extend(parts))
    quiz.show_quiz("03_embeddings_and_positions")
    scripts = [part.data for part in shown if isinstance(part, Javascript)]
    assert any(quiz.MATHJAX_READY in script for script in scripts), "jupyterquiz changed: mend MATHJAX_CHECK"
    assert not any(quiz.MATHJAX_CHECK in script for script in scripts)
    assert "questions" in scripts[0] and "show_questions" in scripts[0]  # the quiz itself, still drawn
