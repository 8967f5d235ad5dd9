"""Every answer of assignments/variants.yaml graded as the autograder grades it, in this process.

Correct answers written differently from the masters' must get full marks; each wrong one (a
mistake students make) must lose all of its question's points and no other question's. Otter runs
of whole submissions stay in .ci/assignments.py: these are the same tests, minus Otter's kernel.
"""

from pathlib import Path

import pytest
import yaml

from transformer_lib.coursework import grading, variants

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
ANSWERS = yaml.safe_load((ROOT / "assignments/variants.yaml").read_text(encoding="utf-8"))
MASTERS = {m.parent.name: m for m in grading.masters(ROOT / "assignments")}


@pytest.mark.parametrize("assignment", sorted(ANSWERS))
def test_correct_answers_get_full_marks_and_wrong_ones_lose_their_questions_points(assignment):
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
