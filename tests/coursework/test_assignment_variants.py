"""Every answer of assignments/variants.yaml graded as the autograder grades it, in this process.

Correct answers written differently from the masters' must get full marks; each wrong one (a
mistake students make) must lose all of its question's points and no other question's. Otter runs
of whole submissions stay in .ci/assignments.py: these are the same tests, minus Otter's kernel.
The capstone's answers are translations files, graded against Multi30k's test set (MULTI30K_DIR).
"""

from pathlib import Path

import pytest
import yaml

from book_tools.coursework import grading, variants

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
ANSWERS = yaml.safe_load((ROOT / "assignments/variants.yaml").read_text(encoding="utf-8"))
MASTERS = {m.parent.name: m for m in grading.masters(ROOT / "assignments")}


@pytest.mark.parametrize("assignment", sorted(ANSWERS))
def test_correct_answers_get_full_marks_and_wrong_ones_lose_their_questions_points(assignment, request):
    if assignment == "a6_capstone":
        request.getfixturevalue("mirror")  # its files are graded against the test set's references
    verdicts = variants.check(MASTERS, {assignment: ANSWERS[assignment]})
    assert [p for v in verdicts for p in v.problems] == []


def test_the_old_stand_in_that_returned_no_weights_would_be_caught(tmp_path):
    """The check can fail: a2 q4's tests with a stand-in attention returning (out, None), as they once
    had, give 0 to a correct answer that keeps the weights it is given."""
    master = MASTERS["a2_attention"]
    text = master.read_text(encoding="utf-8").replace(
        '        return weights @ v, weights\\n"', '        return weights @ v, None\\n"'
    )
    assert text != master.read_text(encoding="utf-8")
    (tmp_path / "a2_attention.ipynb").write_text(text, encoding="utf-8")
    spec = {"q4": {"correct": {"keeps_the_weights": ANSWERS["a2_attention"]["q4"]["correct"]["keeps_the_weights"]}}}
    (verdict,) = variants.check({"a2_attention": tmp_path / "a2_attention.ipynb"}, {"a2_attention": spec})
    assert verdict.points == 0 and "NoneType" in verdict.problems[0]


def test_the_capstones_correct_files_differ_from_the_solutions_only_in_how_they_are_written(mirror):
    """Each correct file is another file than the solution's, with the same sentences in the same order."""
    solution = variants.handed_in({})
    for spec in ANSWERS["a6_capstone"]["q1"]["correct"].values():
        text = variants.handed_in(spec)
        assert text != solution, spec
        assert [line.strip() for line in text.splitlines()] == solution.splitlines(), spec


def test_the_capstones_wrong_files_say_what_failed_without_the_references(mirror):
    """A wrong file's message names what is wrong (BLEU below the bar, the line count, the references
    handed in) and quotes no reference sentence: the expected answers stay hidden."""
    spec = {"a6_capstone": {"q1": {"wrong": ANSWERS["a6_capstone"]["q1"]["wrong"]}}}
    references = variants.handed_in({"references": True}).splitlines()
    for verdict in variants.check(MASTERS, spec):
        assert verdict.why.startswith("Wrong: "), verdict
        assert not any(line in verdict.why for line in references), verdict
