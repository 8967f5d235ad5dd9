"""A lesson's quiz on the built site, where no kernel runs: a reader answers one question wrongly
with the keyboard and rightly with the mouse, and sees each answer's explanation."""

from __future__ import annotations

import pytest

from conftest import SITE, VIEWPORT
from transformer_lib.coursework import quiz

LESSON = "04_attention"


def plain(text: str) -> str:
    """The start of an explanation, before any formula (MathJax typesets those on the page)."""
    return text.split("$")[0].split("`")[0][:25]


def test_a_reader_answers_a_quiz_question_on_the_site(browser, serve_folder):
    page_path = SITE / "notebooks" / f"{LESSON}.html"
    if not page_path.is_file():
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    first = next(q for q in quiz.questions(LESSON) if q["type"] == "multiple_choice" and "$" not in q["question"])
    right = next(i for i, a in enumerate(first["answers"]) if a["correct"])
    wrong = next(i for i, a in enumerate(first["answers"]) if not a["correct"])
    with serve_folder(SITE) as base:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            page = context.new_page()
            page.goto(base + f"notebooks/{LESSON}.html", wait_until="load")
            question = page.locator(".Quiz", has_text=first["question"][:40]).first
            question.wait_for(timeout=20_000)
            options = question.locator(".MCButton")
            assert options.count() == len(first["answers"])
            feedback = question.locator(".Feedback")

            radio = options.nth(wrong).locator("input")  # the keyboard: Tab reaches an option, Space answers
            radio.focus()
            assert radio.evaluate("e => e === document.activeElement")
            page.keyboard.press("Space")
            assert "incorrect" in feedback.get_attribute("class")
            assert plain(first["answers"][wrong]["feedback"]) in feedback.inner_text()

            options.nth(right).click()
            assert "correct" in feedback.get_attribute("class").split()
            assert plain(first["answers"][right]["feedback"]) in feedback.inner_text()
        finally:
            context.close()


def test_a_quiz_on_a_slow_phone_typesets_its_formulas_without_an_error(browser, serve_folder):
    """MathJax loads after the page; on a slow phone it has not started when the quiz is drawn. The quiz
    must not fail on it (jupyterquiz read MathJax.version half a second in), and its formulas are
    typeset once MathJax has started."""
    lesson = "03_embeddings_and_positions"
    if not (SITE / "notebooks" / f"{lesson}.html").is_file():
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    with_math = [q for q in quiz.questions(lesson) if "$" in q["question"]]
    assert with_math, "the lesson's quiz should have a formula in a question"
    with serve_folder(SITE) as base:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(f"{error.name}: {error.message}"))
            cdp = context.new_cdp_session(page)
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": 6})
            page.route("**/mathjax/tex-chtml.js*", lambda route: (page.wait_for_timeout(1500), route.continue_()))
            page.goto(base + f"notebooks/{lesson}.html", wait_until="load", timeout=120_000)
            quiz_box = page.locator("[data-shufflequestions]").first
            quiz_box.locator("mjx-container").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            raw = quiz_box.evaluate("e => e.innerText.split(String.fromCharCode(92) + '(').length - 1")
        finally:
            context.close()
    assert errors == []
    assert raw == 0, f"{raw} formulas of the quiz left as TeX"
