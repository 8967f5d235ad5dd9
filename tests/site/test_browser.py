"""The built website in a real browser (headless Chromium): every page renders its formulas,
loads its images, logs no error and makes no request that leaves the machine.

Needs the built site (``jupyter-book build .``, which ``.ci/run`` does before running this) and
Chromium (``.ci/run`` installs Debian's), which pytest-playwright drives (tests/conftest.py);
without either the tests skip and say why.
"""

import re

import pytest

from conftest import PIXEL, ROOT, SCROLLBAR, SITE, VIEWPORT, built_pages

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)


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


@pytest.fixture(scope="module")
def site_visit(open_page, serve_folder) -> dict:
    """Every page of the built site, loaded once: its report (``problems``), with ``value`` the
    images' alt texts that describe nothing (ALT_TEXTS) and its images in the dark theme
    (DARK_IMAGES), and ``phone_width``, its width on a phone's screen (PHONE). The checks below
    read it: a page's load is most of a check's time."""
    pages = built_pages()
    script = f"(() => ({{ alt: {ALT_TEXTS}, dark: {DARK_IMAGES} }}))()"  # the alt texts first, then the theme
    with serve_folder(SITE) as base:
        return {page: (open_page(base + page, script=script, phone=PHONE), base) for page in pages}


def test_every_page_of_the_site(site_visit):
    """Every page: text, images that load, typeset math, nothing from other hosts; and every image's
    alt text says what it shows."""
    assert len(site_visit) >= 20, list(site_visit)
    failures, missing = [], []
    for page, (report, base) in site_visit.items():
        assert report.text.strip(), f"{page} shows no text"
        failures += [f"{page}: {problem}" for problem in problems(report, base)]
        missing += [f"{page}: {src} has alt {alt!r}" for src, alt in report.value["alt"]]
    assert not failures, "\n".join(failures)
    assert not missing, f"{len(missing)} images without a description:\n" + "\n".join(missing)


# The checks must be able to fail: a page with each defect, and one without.


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


# -- Every reader's screen: a phone, the dark theme, images and diagrams, axe-core -----------------
PHONE = {"width": 390, "height": 844}  # an ordinary phone's screen, in CSS pixels


def test_every_page_fits_a_phones_screen(site_visit):
    """Nothing scrolls the page sideways at 390 pixels: long inline code wraps, wide tables, code and
    formulas scroll inside themselves (custom.css)."""
    wide = [
        f"{page}: {report.phone_width} px wide"
        for page, (report, _) in site_visit.items()
        if report.phone_width > PHONE["width"] + 1
    ]
    assert not wide, "\n".join(wide)


def test_the_phone_check_can_fail(open_page, serve_folder, tmp_path):
    (tmp_path / "wide.html").write_text(f"<html><body><p><code>{'x' * 80}</code></p></body></html>", "utf-8")
    with serve_folder(tmp_path) as base:
        width = open_page(base + "wide.html", phone=PHONE).phone_width
    assert width > PHONE["width"] + 1


# The alt text of every image of the page that is not a real description: empty, or a file's path or name.
ALT_TEXTS = """[...document.querySelectorAll('.bd-article img')]
  .map((img) => [img.getAttribute('src'), (img.getAttribute('alt') || '').trim()])
  .filter(([src, alt]) => !alt || /^[.\\/]|\\.(png|svg|jpe?g|gif)$|_images\\//i.test(alt))"""


def test_the_alt_text_check_can_fail(open_page, serve_folder, tmp_path):
    (tmp_path / "pixel.png").write_bytes(PIXEL)
    (tmp_path / "alt.html").write_text(
        "<html><body><div class='bd-article'><img src='pixel.png' alt='A single white pixel.'>"
        "<img src='pixel.png' alt='../_images/pixel.png'><img src='pixel.png'></div></body></html>",
        encoding="utf-8",
    )
    with serve_folder(tmp_path) as base:
        found = open_page(base + "alt.html", script=ALT_TEXTS).value
    assert found == [["pixel.png", "../_images/pixel.png"], ["pixel.png", ""]]


# Each plot and diagram of the page in the dark theme: its background colour and filter.
DARK_IMAGES = """(() => {
  document.documentElement.dataset.theme = 'dark';
  const pick = (selector) => [...document.querySelectorAll(selector)].map((img) => {
    const style = getComputedStyle(img);
    return [img.getAttribute('src'), style.backgroundColor, style.filter];
  });
  return { plots: pick('.bd-article div.cell_output img'),
           diagrams: pick('.bd-article img[src$=".svg"]:not([src*="colab"])') };
})()"""


def test_plots_and_diagrams_sit_on_a_dimmed_white_card_in_the_dark_theme(site_visit):
    """They are drawn on white: on the dark theme they keep a white card, dimmed (custom.css)."""
    plots = diagrams = 0
    wrong = []
    for page, (report, _) in site_visit.items():
        if not page.startswith("notebooks/"):
            continue
        seen = report.value["dark"]
        plots, diagrams = plots + len(seen["plots"]), diagrams + len(seen["diagrams"])
        for src, background, filter_ in seen["plots"] + seen["diagrams"]:
            if background != "rgb(255, 255, 255)" or "brightness" not in filter_:
                wrong.append(f"{page}: {src}: background {background}, filter {filter_}")
    assert plots >= 20, plots  # the lessons' plots were found
    assert not wrong, "\n".join(wrong)


FIGURES = SITE / "_static" / "figures"


def test_every_diagram_loads_with_a_size(open_page, serve_folder):
    """Each of the book's diagrams (book/_static/figures/*.svg) loads as an image with a natural size."""
    names = sorted(p.name for p in FIGURES.glob("*.svg")) if FIGURES.is_dir() else []
    if not names:
        pytest.skip(f"no diagrams in {FIGURES}: build the book first")
    script = f"""Promise.all({names!r}.map((name) => new Promise((resolve) => {{
      const img = new Image();
      img.onload = () => resolve([name, img.naturalWidth, img.naturalHeight]);
      img.onerror = () => resolve([name, 0, 0]);
      img.src = '../_static/figures/' + name;
    }})))"""
    with serve_folder(SITE) as base:
        sizes = open_page(base + "book/intro.html", script=script).value
    assert [name for name, width, height in sizes if width < 50 or height < 50] == [], sizes


BOOK_MAP = """(async () => {
  const map = document.querySelector('object.book-map');
  if (!map) return null;
  await new Promise((resolve) => setTimeout(resolve, 500));
  const svg = map.contentDocument && map.contentDocument.querySelector('svg');
  return { label: map.getAttribute('aria-label'), fallback: map.querySelectorAll('ul a').length,
           rendered: Boolean(svg), links: svg ? svg.querySelectorAll('a').length : 0,
           height: map.getBoundingClientRect().height };
})()"""


def test_the_intro_shows_the_book_map_with_links_to_the_lessons(open_page, serve_folder):
    if not (SITE / "book/intro.html").is_file():
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    with serve_folder(SITE) as base:
        seen = open_page(base + "book/intro.html", script=BOOK_MAP).value
    assert seen is not None, "the intro has no <object class='book-map'>"
    # where SVG cannot show, a list of every lesson and the appendix
    assert seen["label"] and seen["fallback"] == len(list((ROOT / "notebooks").glob("*.ipynb")))
    if (FIGURES / "book_map.svg").is_file():
        assert seen["rendered"] and seen["links"] >= 10 and seen["height"] > 100, seen
