"""What a reader's first visit to each page of the built site downloads, in headless Chromium.

Every page is opened in a new, empty browser profile and the bytes the server sent are counted
until the network is quiet: the site served as GitHub Pages serves it (gzip on text and
WebAssembly, ``.onnx`` files as they are; :mod:`book_tools.web.serve`). A lesson's first
visit stays under ``LESSON_BUDGET``, the translator's (the runtime, one direction's model and the
tokenizer: all the first translation needs) under ``TRANSLATOR_BUDGET``; no page loads Font
Awesome's JavaScript (the theme's CSS and webfonts draw the icons, cut down to the icons the site
uses), only a page with a formula loads MathJax and only the search page the search index (which
still finds a word).

With ``PAGE_WEIGHT_RECORD=1`` the test also writes the table to ``RECORD``, with the machine and the
date, which the how-to-run page shows. Needs the built site and Chromium, like tests/site/test_browser.py.
"""

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from book_tools.web.serve import serve
from conftest import ROOT, SITE, VIEWPORT, built_pages, keep_record

pytestmark = pytest.mark.slow  # tens of seconds: started early by `pytest -n 2` (conftest.py)

RECORD = ROOT / "results" / "page_weight.txt"
RECORD_ENV = "PAGE_WEIGHT_RECORD"
LESSON_BUDGET = 800_000  # bytes: a lesson's first visit (lesson 11's), and every lesson's without its own figures
TRANSLATOR_BUDGET = 8_000_000  # bytes: the translator's first visit, all it needs to translate
TRANSLATOR_PAGES = ("book/translator.html", "book/inside.html")  # both load the runtime and one direction's model
KINDS = {  # a response's kind, by the end of its path
    "scripts": (".js", ".mjs"),
    "fonts": (".woff2", ".woff", ".ttf"),
    "models": (".onnx", ".bin", ".json.gz", ".json"),
    "wasm": (".wasm",),
    "images": (".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"),
}


def kind(path: str) -> str:
    return next((name for name, ends in KINDS.items() if path.endswith(ends)), "other")


def first_visit(browser, base: str, log: list, page_path: str) -> dict:
    """Open ``page_path`` in an empty profile, wait until no request has been open for 500 ms, and
    sum what the server sent: bytes by kind, the requests, whether the page has a formula."""
    log.clear()
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(base + page_path, wait_until="networkidle", timeout=120_000)
        icons = page.evaluate(ICONS)
        has_math = page.evaluate("document.querySelector('.math, mjx-container, div.math') !== null")
    finally:
        context.close()
    sent = [s for s in log if s.status == 200]
    by_kind = {}
    for s in sent:
        by_kind[kind(s.path)] = by_kind.get(kind(s.path), 0) + s.body_bytes
    return {
        "bytes": sum(s.body_bytes for s in sent),
        "requests": len(sent),
        "paths": [s.path for s in sent],
        "kinds": by_kind,
        "largest": max(sent, key=lambda s: s.body_bytes) if sent else None,
        "has_math": has_math,
        "icons": icons,
    }


# Every Font Awesome icon on the page (an <i> the theme writes) as CSS draws it: its ::before content.
ICONS = """[...document.querySelectorAll('i[class*="fa-"]')].map((i) => ({
  class: i.className, content: getComputedStyle(i, '::before').content,
  font: getComputedStyle(i, '::before').fontFamily }))"""


@pytest.fixture(scope="module")
def visits(browser) -> dict:
    pages = built_pages()
    log = []
    with serve(SITE, log) as base:
        return {page: first_visit(browser, base, log, page) for page in pages}


def is_lesson(page: str) -> bool:
    return page.startswith("notebooks/")


def test_a_lessons_first_visit_is_light(visits):
    """Lesson 11 under the budget; every lesson too, less its figures (the lesson's content, not the site's)."""
    assert sum(map(is_lesson, visits)) >= 13, list(visits)
    assert visits["notebooks/11_multi30k.html"]["bytes"] <= LESSON_BUDGET, visits["notebooks/11_multi30k.html"]
    heavy = {
        page: v["bytes"] - v["kinds"].get("images", 0)
        for page, v in visits.items()
        if is_lesson(page) and v["bytes"] - v["kinds"].get("images", 0) > LESSON_BUDGET
    }
    assert not heavy, f"lessons over {LESSON_BUDGET:,} bytes on a first visit, without their figures: {heavy}"


def test_the_translators_first_visit_is_under_8_mb(visits):
    """Both translator pages: the page, ONNX Runtime's WebAssembly, one direction's model files and the tokenizer,
    everything the first translation needs (it downloads nothing more), in at most ``TRANSLATOR_BUDGET`` bytes."""
    for page in TRANSLATOR_PAGES:
        v = visits[page]
        model = [p for p in v["paths"] if p.endswith((".onnx", ".bin", ".wasm", "tokenizer.json.gz"))]
        assert len(model) == 5, (page, v["paths"])  # encoder, decoder, the tensors they share, runtime, tokenizer
        assert v["bytes"] <= TRANSLATOR_BUDGET, f"{page}: {v['bytes']:,} bytes on a first visit, {v['kinds']}"


def test_no_page_loads_a_script_it_does_not_use(visits):
    """Font Awesome's JavaScript nowhere (its icons are the theme's CSS and webfonts), MathJax only with a formula."""
    fontawesome = [p for p, v in visits.items() if any(path.endswith("fontawesome.js") for path in v["paths"])]
    assert not fontawesome, f"pages that load Font Awesome's JavaScript: {fontawesome}"
    mathjax = {p: v["has_math"] for p, v in visits.items() if any("/mathjax/" in path for path in v["paths"])}
    assert mathjax and all(mathjax.values()), f"MathJax on pages without a formula: {mathjax}"
    without = [p for p, v in visits.items() if v["has_math"] and p not in mathjax]
    assert not without, f"pages with a formula but no MathJax: {without}"
    index = [p for p, v in visits.items() if any(path.endswith("/searchindex.js") for path in v["paths"])]
    assert index == ["search.html"], f"pages that load the search index: {index}"


def test_the_search_page_finds_a_word(browser):
    """The search index, loaded by the search page alone, still answers: a word of the book finds its lessons."""
    built_pages()  # skips without a built site
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        with serve(SITE, []) as base:
            page.goto(base + "search.html?q=attention", wait_until="load")
            # Sphinx adds the results one at a time, then says it has finished: read them all
            page.wait_for_function(
                "() => document.querySelector('.search-summary')?.textContent.startsWith('Search finished')",
                timeout=60_000,
            )
            found = page.eval_on_selector_all("#search-results li a", "(links) => links.map((a) => a.href)")
    finally:
        context.close()
    assert any("04_attention" in href for href in found), found


def test_every_icon_is_drawn_without_font_awesomes_javascript(visits):
    """Each icon an <i> names has a glyph in the theme's CSS, in Font Awesome's webfont."""
    blank = {
        (icon["class"], icon["content"], icon["font"])
        for v in visits.values()
        for icon in v["icons"]
        if icon["content"] in ("none", "normal", '""') or "Font Awesome" not in icon["font"]
    }
    assert sum(len(v["icons"]) for v in visits.values()) > 100
    assert not blank, f"icons CSS does not draw: {sorted(blank)}"
    # the cut-down fonts hold every icon: the theme's full webfonts (270 KB) are never fetched
    full = {p: path for p, v in visits.items() for path in v["paths"] if path.endswith((".woff2", ".ttf"))}
    assert not full, f"pages that fetch a full Font Awesome webfont: {full}"


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
    names = [line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores"


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def table(visits: dict, browser_version: str) -> str:
    lines = [
        "The first visit of each page of the site: the bytes it downloads, each page in a new, empty browser",
        "profile, until the network is quiet (text and WebAssembly gzipped as GitHub Pages sends them).",
        f"Chromium {browser_version}, headless; {machine()}; commit {commit()}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d}; tests/site/test_page_weight.py",
        "",
        "KB: 1,000 bytes as sent; scripts, fonts, images, wasm (ONNX Runtime) and models are parts of the total.",
        "",
        f"{'page':<44} {'requests':>8} {'KB':>6} {'scripts':>7} {'fonts':>5} {'images':>6} {'wasm':>5} {'models':>6}",
    ]
    for page, v in visits.items():
        k = v["kinds"]
        kb = lambda n: f"{n / 1000:.0f}"  # noqa: E731
        lines.append(
            f"{page:<44} {v['requests']:>8} {kb(v['bytes']):>6} {kb(k.get('scripts', 0)):>7} "
            f"{kb(k.get('fonts', 0)):>5} {kb(k.get('images', 0)):>6} {kb(k.get('wasm', 0)):>5} "
            f"{kb(k.get('models', 0)):>6}"
        )
    return "\n".join(lines) + "\n"


def test_the_record(visits, browser):
    """The table of every page's first visit; written to RECORD when PAGE_WEIGHT_RECORD=1."""
    text = table(visits, browser.version)
    keep_record(RECORD, RECORD_ENV, text)
    assert len(text.splitlines()) == len(visits) + 7
