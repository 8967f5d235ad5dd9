"""The book as one PDF: every lesson and page, with its figures, formulas and code.

    python .ci/pdf.py [OUT]    # default: dist/transformer-book.pdf; needs Chromium (Debian's chromium)
    python .ci/pdf.py --check PDF

Jupyter Book 1 offers two ways: LaTeX (``--builder pdflatex``), which needs a TeX installation of
gigabytes and turns the lessons' HTML outputs (tables, the translator pages) into LaTeX, often
badly; or a browser printing the book's single-page build (``--builder singlehtml``). This uses
the second: the PDF then shows what the site shows (MathJax's formulas, the stored figures, the
highlighted code), with the Chromium the browser tests already use (``tests/conftest.py``), driven
by Playwright so that the print waits until MathJax has typeset every formula.

``--check`` opens a PDF with pypdf and fails unless it holds every lesson's title and at least one
figure (a raster image, or a figure of the PDF's structure tree: the diagrams are vector drawings)
between each lesson's title and the next one's; tests/site/test_pdf.py runs it on the
PDF this script built, where there is one.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's package, installed or not (as in the release workflow)

from book_tools.web.serve import serve  # noqa: E402

DEFAULT = ROOT / "dist" / "transformer-book.pdf"
PAGE = "print.html"  # the page printed, at the top of the single-page build
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
# What the print leaves out: the site's navigation, buttons and the in-browser translator's controls.
PRINT_CSS = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, .bd-footer, .bd-footer-article,
.prev-next-area, .headerlink, .version-switcher__container, .skip-link, #pst-back-to-top { display: none !important; }
.bd-main .bd-content .bd-article-container { max-width: 100% !important; }
pre, .highlight pre { white-space: pre-wrap !important; word-break: break-word; }
img { max-width: 100% !important; page-break-inside: avoid; }
"""


def lessons() -> list[tuple[str, str]]:
    """(notebook name, its title as its first heading says it: "1. Why attention"), in order."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])
        found.append((path.name, re.search(r"^# (.+)$", text, re.M).group(1).strip()))
    return found


def build_singlehtml(out: Path) -> Path:
    """The book as one HTML page (Jupyter Book's singlehtml builder); returns its folder."""
    command = ["jupyter-book", "build", str(ROOT), "--builder", "singlehtml", "--path-output", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    folder = out / "_build" / "singlehtml"
    if done.returncode != 0 or not (folder / root_page()).exists():
        raise SystemExit(f"the single-page build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return folder


def root_page() -> str:
    """The single page's file: the book's root document (``_toc.yml``), e.g. book/intro.html."""
    return yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"] + ".html"


def print_pdf(folder: Path, pdf: Path) -> None:
    """Chromium prints ``folder``/index.html to ``pdf`` once MathJax has typeset."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise SystemExit("no Chromium on PATH: install Debian's chromium (apt-get install chromium)")
    pdf.parent.mkdir(parents=True, exist_ok=True)
    # The single page lies at book/intro.html but links its assets from the top of the build: a
    # copy at the top finds them. A lesson names its diagrams by the site's public address, so
    # that a notebook opened alone shows them: the copy takes them from this build instead.
    html = (folder / root_page()).read_text(encoding="utf-8")
    base_url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"]
    (folder / PAGE).write_text(html.replace(base_url.rstrip("/") + "/_static/", "_static/"), encoding="utf-8")
    with serve(folder) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(base + PAGE, wait_until="load", timeout=300_000)
        page.evaluate(
            "async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
            " { await MathJax.startup.promise; } }"
        )
        broken, formulas, typeset = page.evaluate(
            "() => [[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),"
            " document.querySelectorAll('.math').length, document.querySelectorAll('mjx-container').length]"
        )
        if broken or typeset < formulas:
            browser.close()
            raise SystemExit(
                f"the page is not whole: images not loaded {broken[:5]}; {typeset} of {formulas} formulas typeset"
            )
        page.add_style_tag(content=PRINT_CSS)
        page.emulate_media(media="print")
        page.pdf(
            path=str(pdf),
            format="A4",
            print_background=True,
            tagged=True,  # a structure tree: figures (vector diagrams too) with their alt text, for readers and checks
            outline=True,  # the headings as bookmarks
            margin={"top": "18mm", "bottom": "18mm", "left": "15mm", "right": "15mm"},
            display_header_footer=True,
            header_template="<span></span>",
            footer_template='<div style="font-size:8px;width:100%;text-align:center">'
            '<span class="pageNumber"></span> / <span class="totalPages"></span></div>',
        )
        browser.close()


def normalized(text: str) -> str:
    """Text as extracted, compared: ligatures spelled out ("Eﬃciency"), whitespace collapsed, lower case."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).lower()


def figures_per_page(reader) -> list[int]:
    """How many figures each page shows: its raster images, and its tagged figures (a vector diagram too)."""
    counts = [len(page.images) for page in reader.pages]
    number = {page.indirect_reference.idnum: i for i, page in enumerate(reader.pages)}
    root = reader.trailer["/Root"].get("/StructTreeRoot")
    stack = [root.get_object()] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(item.get_object() for item in node)
            continue
        if not hasattr(node, "get"):
            continue  # a marked-content number
        page = node.raw_get("/Pg") if "/Pg" in node else None
        if node.get("/S") == "/Figure" and page is not None and page.idnum in number:
            counts[number[page.idnum]] += 1
        if "/K" in node:
            stack.append(node["/K"].get_object())
    return counts


def problems(pdf: Path) -> list[str]:
    """What the PDF lacks: a lesson's title, or a figure in a lesson (one line each)."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    pages = reader.pages
    texts = [normalized(page.extract_text() or "") for page in pages]
    figures = figures_per_page(reader)
    # Each lesson starts at the last page naming its title before the next lesson starts: the
    # contents list and later cross-references name it too. Found from the last lesson back.
    found, starts, limit = [], {}, len(pages) - 1
    for name, title in reversed(lessons()):
        at = [i for i, text in enumerate(texts[: limit + 1]) if normalized(title) in text]
        if not at:
            found.append(f"{name}: its title '{title}' is not in {pdf.name}")
            continue
        starts[name] = limit = at[-1]
    ordered = sorted(starts.items(), key=lambda item: item[1])
    for (name, start), (_, following) in zip(ordered, [*ordered[1:], (None, len(pages))], strict=True):
        end = max(following - 1, start)
        if sum(figures[start : end + 1]) == 0:
            found.append(f"{name}: no figure on its pages ({start + 1} to {end + 1})")
    return sorted(found)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("pdf", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--check", action="store_true", help="only check an existing PDF")
    args = parser.parse_args(argv)
    if not args.check:
        with tempfile.TemporaryDirectory() as tmp:
            print_pdf(build_singlehtml(Path(tmp)), args.pdf)
    if not args.pdf.exists():
        print(f"no PDF at {args.pdf}: build it with python .ci/pdf.py {args.pdf}", file=sys.stderr)
        return 2
    found = problems(args.pdf)
    print("\n".join(found) or f"{args.pdf}: {len(lessons())} lessons, each with its title and figures")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
