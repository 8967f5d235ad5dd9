"""The built website in a real browser (headless Chromium): every page renders its formulas,
loads its images, logs no error and makes no request that leaves the machine.

Needs the built site (``jupyter-book build .``, which ``.ci/run`` does before running this) and
Chromium (``.ci/run`` installs Debian's), which pytest-playwright drives (tests/conftest.py);
without either the tests skip and say why.
"""

import base64
import re
from pathlib import Path

import pytest

from conftest import SCROLLBAR, VIEWPORT

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)

SITE = Path(__file__).parent.parent / "_build" / "html"
NOT_PAGES = ("_static", "_sources", "_images", "mathjax", "_downloads")


def raw_latex(text: str) -> list[str]:
    """Snippets of TeX that MathJax should have typeset but the reader sees as source: any ``$``,
    ``\\begin`` or ``\\frac`` in the visible text outside code, with a little context."""
    return [text[max(m.start() - 20, 0) : m.end() + 20] for m in re.finditer(r"\$|\\begin|\\frac", text)]


def problems(report, base: str) -> list[str]:
    """Every defect a reader would see (or the network would), one line each."""
    found = [f"raw TeX: {snippet!r}" for snippet in raw_latex(report.text)]
    found += [f"image does not load: {src}" for src in report.broken_images]
    found += [f"MathJax error: {error}" for error in report.math_errors]
    found += [f"scrolls sideways: {start!r}" for start in report.too_wide]
    found += [f"console error: {error}" for error in report.console_errors]
    found += [f"request leaves the machine: {url}" for url in report.external_requests(base)]
    return found


def site_pages() -> list[str]:
    if not SITE.is_dir():
        return []
    pages = [p for p in SITE.rglob("*.html") if p.relative_to(SITE).parts[0] not in NOT_PAGES]
    redirects = [p for p in pages if 'http-equiv="Refresh"' in p.read_text(encoding="utf-8")[:500]]  # index.html
    return sorted(str(p.relative_to(SITE)) for p in pages if p not in redirects)


def test_every_page_of_the_site(open_page, serve_folder):
    pages = site_pages()
    if not pages:
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    assert len(pages) >= 20, pages
    failures = []
    with serve_folder(SITE) as base:
        for page in pages:
            report = open_page(base + page)
            assert report.text.strip(), f"{page} shows no text"
            failures += [f"{page}: {problem}" for problem in problems(report, base)]
    assert not failures, "\n".join(failures)


# The checks must be able to fail: a page with each defect, and one without.
PIXEL = base64.b64decode(  # a 1 x 1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def test_the_checks_catch_raw_tex_broken_images_and_outside_requests(open_page, serve_folder, tmp_path):
    (tmp_path / "pixel.png").write_bytes(PIXEL)
    (tmp_path / "good.html").write_text(
        "<html><head><link rel='icon' href='pixel.png'></head>"
        "<body><div class='bd-article'><p>Attention, typeset.</p><pre>echo $HOME</pre><img src='pixel.png'>"
        "</div></body></html>",
        encoding="utf-8",
    )
    (tmp_path / "bad.html").write_text(
        "<html><body><div class='bd-article'><p>The score is $q \\cdot k$ over \\frac{1}{2}.</p>"
        f"<pre style='overflow-x: auto'>{'x' * 400}</pre></div>"
        "<img src='missing.png'><img src='https://example.com/logo.png'>"
        "<script>undefinedFunction()</script></body></html>",
        encoding="utf-8",
    )
    with serve_folder(tmp_path) as base:
        assert problems(open_page(base + "good.html"), base) == []
        found = problems(open_page(base + "bad.html"), base)
    assert any(p.startswith("raw TeX: ") and "$q" in p for p in found), found
    assert any(p.startswith("raw TeX: ") and "\\frac" in p for p in found), found
    assert any(p.startswith("image does not load: ") and p.endswith("missing.png") for p in found), found
    assert "request leaves the machine: https://example.com/logo.png" in found, found
    assert any(p.startswith("console error: ") and "undefinedFunction" in p for p in found), found
    assert any(p.startswith("scrolls sideways: 'xxx") for p in found), found


# How many characters a lesson's code block shows on a line before it wraps: the first code cell's
# block, filled with x's one at a time until it takes a second line.
COLUMNS_SHOWN = """(() => {
  const pre = document.querySelector(".bd-article div.cell_input div.highlight pre");
  const old = pre.innerHTML;
  pre.textContent = "x";
  const one = pre.getBoundingClientRect().height;
  let n = 1;
  while (n < 200 && pre.getBoundingClientRect().height === one) pre.textContent = "x".repeat(++n);
  pre.innerHTML = old;
  return n - 1;
})()"""


def test_a_lessons_code_shows_its_formatted_width_without_wrapping(open_page, serve_folder):
    """The lessons' code is formatted to ruff's line length (notebooks/ruff.toml); on a laptop's
    screen (conftest.VIEWPORT), less a classic scrollbar's width (Windows), a line that long must fit
    its block, not wrap mid-expression."""
    page = "notebooks/04_attention.html"
    if not (SITE / page).is_file():
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    ruff = (SITE.parent.parent / "notebooks/ruff.toml").read_text(encoding="utf-8")
    columns = int(re.search(r"^line-length = (\d+)", ruff, re.M)[1])  # tomllib: Python 3.11+
    with serve_folder(SITE) as base:
        viewport = {**VIEWPORT, "width": VIEWPORT["width"] - SCROLLBAR}
        shown = open_page(base + page, script=COLUMNS_SHOWN, viewport=viewport).value
    assert shown >= columns, f"a code block shows {shown} characters a line; the lessons' code is {columns} wide"
