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
# jupyterquiz typesets a quiz's formulas half a second after drawing it, if MathJax is defined, by
# reading MathJax.version. On the site MathJax loads after the page: on a slow phone, half a second in,
# it is still only its configuration, with no version, and the quiz's script failed (a TypeError).
# Guarded (MATHJAX_READY), a quiz drawn before MathJax has loaded leaves its formulas to _TYPESET,
# which waits for MathJax to start and then typesets every quiz; in JupyterLab and on Colab MathJax
# has loaded and the quiz typesets itself as before.
MATHJAX_CHECK = """if (typeof MathJax != 'undefined') {
        console.log("MathJax version", MathJax.version);"""
MATHJAX_READY = """if (typeof MathJax != 'undefined' && MathJax.version) {"""
_TYPESET = """(function typesetQuizzes(tries) {
  var mathjax = window.MathJax;
  if (mathjax && mathjax.startup && mathjax.startup.promise && mathjax.typesetPromise) {
    mathjax.startup.promise.then(function () {
      return mathjax.typesetPromise(document.querySelectorAll("[data-shufflequestions]"));
    });
  } else if (tries < 120) {
    setTimeout(function () { typesetQuizzes(tries + 1); }, 250);
  }
})(0);
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
        from jupyterquiz.dynamic import display as drawing
    except ImportError:
        print("the quizzes need jupyterquiz: pip install jupyterquiz, then run this cell again")
        return
    drawn = []  # what jupyterquiz would display: its HTML, then its script
    shown, drawing.display = drawing.display, drawn.append
    try:
        drawing.display_quiz(questions(lesson), shuffle_answers=False, max_width=680, colors=_COLORS)
    finally:
        drawing.display = shown
    for part in drawn:
        display(Javascript(part.data.replace(MATHJAX_CHECK, MATHJAX_READY)) if isinstance(part, Javascript) else part)
    display(Javascript(_ANNOUNCE + _TYPESET))  # one output, as the lessons store it
