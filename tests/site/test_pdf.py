"""The book as one PDF (.ci/pdf.py): every lesson's title, and a figure in every lesson.

Building the PDF takes a single-page build of the book and a print in Chromium (minutes), so it
is built by the release workflow and by ``python .ci/pdf.py`` (into dist/transformer-book.pdf),
not by every test run: this test checks that file where it exists (or ``BOOK_PDF``'s) and skips
elsewhere, saying so.
"""

import os
from pathlib import Path

import pytest

from conftest import load_file

ROOT = Path(__file__).resolve().parents[2]
PDF = Path(os.environ.get("BOOK_PDF", ROOT / "dist" / "transformer-book.pdf"))


def load_pdf_script():
    return load_file(ROOT / ".ci" / "pdf.py", "pdf_script")


def test_the_lessons_it_looks_for_are_the_books():
    titles = [title for _, title in load_pdf_script().lessons()]
    assert titles[0] == "1. Why attention" and len(titles) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))


@pytest.mark.skipif(not PDF.exists(), reason=f"no PDF at {PDF}: build it with python .ci/pdf.py")
def test_the_pdf_holds_every_lesson_with_its_figures():
    pytest.importorskip("pypdf")
    assert load_pdf_script().problems(PDF) == []
