"""The built website against axe-core, the accessibility checker browsers' developer tools use:
each kind of page, in each theme a reader can choose, has no violation a reader would meet.

Needs the built site and Chromium, like tests/site/test_browser.py; and axe-core, which PyPI's
axe-playwright-python bundles (requirements.txt). Without any of them the tests skip and say why.
"""

import json
from pathlib import Path

import pytest

from conftest import PIXEL, SITE, built_pages

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)


# axe-core (https://github.com/dequelabs/axe-core), the copy that PyPI's axe-playwright-python bundles.
# Rules left out, each because the markup is not the book's to change:
IGNORED_RULES = {
    # pydata-sphinx-theme puts the book's title and logo above the sidebar outside any landmark.
    "region",
    # docutils' HTML writer marks the bibliography as role="list" holding role="doc-biblioentry"
    # entries, a role ARIA 1.2 deprecates (sphinxcontrib-bibtex's page, book/bibliography.md).
    "aria-allowed-role",
    "aria-deprecated-role",
    "aria-required-children",
}
# Table header cells that axe's empty-table-header rule (a best practice) misreads, marked before
# it runs and left out: headers that are a formula alone, which MathJax draws as graphics with an
# assistive MathML copy that axe does not read as text (quick_reference's sizes).
MARK_SKIPPED_HEADERS = """document.querySelectorAll('thead th').forEach((th) => {
  const words = th.cloneNode(true);
  words.querySelectorAll('mjx-container').forEach((formula) => formula.remove());
  const formula = th.querySelector('mjx-container') && !words.textContent.trim();
  if (formula) th.dataset.axeSkip = '';
});"""
AXE_CONTEXT = {"exclude": [["[data-axe-skip]"]]}
# The API reference is one long page of autodoc entries, all made by one template: axe reads its
# frame and its first part (the model's classes and functions), a sixth of the page: the whole
# page took half a minute. The selector picks the part read; every section beside it is skipped.
AXE_PART = {"book/api.html": "section section section"}
MARK_SKIPPED_PARTS = """(part) => part && document.querySelectorAll('section').forEach((section) => {
  if (!section.contains(part) && !part.contains(section)) section.dataset.axeSkip = '';
})"""
# Each kind of page: the intro and translator pages in both themes, the inside page, a lesson with
# formulas, plots and tables, the API reference, the quick reference. (axe takes tens of seconds a
# page here: every page would take minutes.)
AXE_PAGES = {
    "book/intro.html": ("light", "dark"),
    "book/translator.html": ("light", "dark"),
    "book/inside.html": ("light",),
    "book/api.html": ("light",),
    "book/quick_reference.html": ("light",),
    "book/several_gpus.html": ("light",),
    "notebooks/01_why_attention.html": ("light",),
    "notebooks/04_attention.html": ("light", "dark"),
}


def axe_source() -> str:
    axe = pytest.importorskip("axe_playwright_python", reason="pip install axe-playwright-python (axe-core)")
    return (Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def axe_script(source: str, themes: tuple[str, ...] = ("light",), part: str | None = None) -> str:
    """A page's violations in each of ``themes``, one load for all: each line starts with its theme.
    With ``part`` (a CSS selector), only the first element it matches is read, with the page's frame."""
    options = {"resultTypes": ["violations"], "rules": {rule: {"enabled": False} for rule in IGNORED_RULES}}
    # The theme is switched with transitions off, and axe waits two frames: it checks the colours a
    # reader sees once the switch is over, not a frame in the middle of a fade.
    return f"""(async () => {{
      const still = document.createElement('style');
      still.textContent = '*, *::before, *::after {{ transition: none !important; animation: none !important; }}';
      document.head.append(still);
      const script = document.createElement('script');
      script.textContent = {json.dumps(source)};
      document.head.append(script);
      {MARK_SKIPPED_HEADERS}
      ({MARK_SKIPPED_PARTS})({f"document.querySelector({json.dumps(part)})" if part else "null"});
      const found = [];
      for (const theme of {json.dumps(list(themes))}) {{
        document.documentElement.dataset.theme = theme;
        await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
        const {{ violations }} = await axe.run({json.dumps(AXE_CONTEXT)}, {json.dumps(options)});
        found.push(...violations.map((v) => `(${{theme}}) ${{v.id}} (${{v.impact}}): ${{v.help}}: ` +
          v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')));
      }}
      return found;
    }})()"""


def test_axe_core_finds_no_violation_on_each_kind_of_page(open_page, serve_folder):
    source = axe_source()
    found = []
    pages = built_pages()
    assert set(AXE_PAGES) <= set(pages), set(AXE_PAGES) - set(pages)
    with serve_folder(SITE) as base:
        for page, themes in AXE_PAGES.items():
            script = axe_script(source, themes, AXE_PART.get(page))
            found += [f"{page} {v}" for v in open_page(base + page, script=script).value]
    assert not found, "\n".join(found)


def test_axe_core_can_fail(open_page, serve_folder, tmp_path):
    """A page with an image without alt text and an empty button: both found, in each theme."""
    (tmp_path / "pixel.png").write_bytes(PIXEL)
    (tmp_path / "bad.html").write_text(
        "<html lang='en'><body><main><img src='pixel.png'><button></button></main></body></html>", "utf-8"
    )
    with serve_folder(tmp_path) as base:
        violations = open_page(base + "bad.html", script=axe_script(axe_source(), ("light", "dark"))).value
    found = {tuple(v.split(" ")[:2]) for v in violations}
    assert found >= {(f"({theme})", rule) for theme in ("light", "dark") for rule in ("image-alt", "button-name")}


def test_axe_core_reads_the_part_it_is_given(open_page, serve_folder, tmp_path):
    """A page of two parts, each with a fault: with the first part chosen, only its fault is found."""
    (tmp_path / "pixel.png").write_bytes(PIXEL)
    (tmp_path / "parts.html").write_text(
        "<html lang='en'><body><main><section><section><section><img src='pixel.png'></section>"
        "<section><button></button></section></section></section></main></body></html>",
        "utf-8",
    )
    with serve_folder(tmp_path) as base:
        script = axe_script(axe_source(), part="section section section")
        violations = open_page(base + "parts.html", script=script).value
    found = {v.split(" ")[1] for v in violations}
    assert "image-alt" in found and "button-name" not in found, violations
