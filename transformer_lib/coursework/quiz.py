"""End-of-lesson quizzes: a few questions a learner answers in seconds, each answer explained.

A lesson's questions are data, ``transformer_lib/coursework/quizzes/<lesson>.json``, in jupyterquiz's format
(a list of questions, each with its options and a feedback sentence for every option).
:func:`show_quiz` draws them with jupyterquiz, which renders in JavaScript: the same quiz works in
JupyterLab, on Colab and on the book's site, where no kernel runs.
"""

from __future__ import annotations

import json
from importlib import resources

from transformer_lib.errors import InvalidValue

# jupyterquiz's options are radio buttons inside their labels, so Tab and Space already answer
# them; this names the box of a numeric answer and has screen readers read an answer's
# explanation when it appears.
_ANNOUNCE = """
(function () {
  var tries = 0;
  var timer = setInterval(function () {
    document.querySelectorAll(".Feedback:not([aria-live])").forEach(function (feedback) {
      feedback.setAttribute("aria-live", "polite");
    });
    document.querySelectorAll(".Input-text:not([aria-label])").forEach(function (box) {
      box.setAttribute("aria-label", "your answer, a number");
    });
    if (++tries > 20) clearInterval(timer);
  }, 250);
})();
"""
# jupyterquiz's own colours, where they fall short of 4.5:1 contrast: white on orange, green on
# white, and white typed on a light grey box.
_COLORS = {
    "--jq-many-choice-bg": "#9c3d00",
    "--jq-correct-color": "#006e0e",
    "--jq-numeric-input-bg": "#1f1033",
}


def lessons() -> list[str]:
    """The lessons that have a quiz, by their notebook's name: ``["01_why_attention", ...]``."""
    folder = resources.files("transformer_lib.coursework") / "quizzes"
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def questions(lesson: str) -> list[dict]:
    """The questions of ``lesson`` (its notebook's name, e.g. ``"04_attention"``)."""
    path = resources.files("transformer_lib.coursework") / "quizzes" / f"{lesson}.json"
    if not path.is_file():
        raise InvalidValue(f"no quiz named {lesson!r}: the quizzes are {', '.join(lessons())}")
    return json.loads(path.read_text(encoding="utf-8"))


def show_quiz(lesson: str) -> None:
    """Draw ``lesson``'s quiz below the cell, in the order written (its options are not shuffled,
    so that an explanation can name its neighbours)."""
    try:
        from IPython.display import Javascript, display
        from jupyterquiz import display_quiz
    except ImportError:
        print("the quizzes need jupyterquiz: pip install jupyterquiz, then run this cell again")
        return
    display_quiz(questions(lesson), shuffle_answers=False, max_width=680, colors=_COLORS)
    display(Javascript(_ANNOUNCE))
