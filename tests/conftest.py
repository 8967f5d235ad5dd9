"""Shared fixtures: the Multi30k files come from the folder in MULTI30K_DIR (CI sets it); the built site
in a browser (Playwright, driving the Chromium on PATH).
"""

import base64
import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest

from book_tools.cli import main as tools
from book_tools.web.serve import serve
from transformer_lib.cli import TOOLS_COMMANDS, main
from transformer_lib.data import LOCAL_DIR_ENV
from transformer_lib.files import write_text

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The command line's ``main`` in this process (the library's, or the book's tools' for their
    commands), with its standard streams captured: what a terminal would show, without a new Python's
    seconds of imports for each call. A test that is about the process (raw bytes on its input) starts
    ``python -m transformer_lib`` instead."""
    out, err = io.StringIO(), io.StringIO()
    typed = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    with mock.patch("sys.stdin", typed), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = (tools if args and args[0] in TOOLS_COMMANDS else main)(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def load_file(path: Path, name: str):
    """The Python file at ``path``, which no package holds (``.ci``'s scripts, the diagrams'),
    imported afresh as ``name``, and registered under it: dataclasses look their module up by name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def ci_script(name: str):
    """``.ci/NAME.py``, imported afresh."""
    return load_file(ROOT / ".ci" / f"{name}.py", name)


def tool_script(name: str):
    """``tools/scripts/NAME.py`` (a maintainer's script, not a CI step), imported afresh."""
    return load_file(ROOT / "tools" / "scripts" / f"{name}.py", name)


@pytest.fixture(scope="session")
def mirror() -> Path:
    folder = os.environ.get(LOCAL_DIR_ENV)
    if not folder:
        pytest.skip(f"set {LOCAL_DIR_ENV} to a folder of Multi30k files to run the data tests")
    return Path(folder)


# ---------------------------------------------------------------------------------------------
# The built site in a browser: pytest-playwright drives the machine's Chromium (Debian's, which
# .ci/run installs); Playwright's own browser download is never needed. Without Chromium the
# browser tests skip and say so.

# A tracker's history: the word issue or attempt and a number. The git log holds it; code and lessons say why.
TRACKER_NUMBERS = r"\bissues? #?\d+|\battempts? #?\d+"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
VIEWPORT = {"width": 1280, "height": 900}  # a laptop's screen: the width decides what fits the column
SCROLLBAR = 17  # pixels a classic (not overlay) scrollbar takes from the page's width, as on Windows

# The built site: _build/html, or the folder in BOOK_SITE (a build elsewhere, e.g. --path-output)
SITE = Path(os.environ.get("BOOK_SITE") or ROOT / "_build" / "html")
NOT_PAGES = ("_static", "_sources", "_images", "mathjax", "_downloads")
PIXEL = base64.b64decode(  # a 1 x 1 PNG, for the pages that show the browser checks can fail
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def keep_record(path: Path, env: str, text: str) -> None:
    """A browser test's record: printed, and written to ``path`` (atomically) when ``env`` is set to 1."""
    if os.environ.get(env) == "1":
        write_text(path, text)
    print("\n" + text)


def site_pages() -> list[str]:
    """The built site's pages, as paths inside it (the redirect at index.html left out)."""
    if not SITE.is_dir():
        return []
    pages = [p for p in SITE.rglob("*.html") if p.relative_to(SITE).parts[0] not in NOT_PAGES]
    redirects = [p for p in pages if 'http-equiv="Refresh"' in p.read_text(encoding="utf-8")[:500]]  # index.html
    return sorted(str(p.relative_to(SITE)) for p in pages if p not in redirects)


def built_pages() -> list[str]:
    """:func:`site_pages`, or the test skipped with how to build the site."""
    pages = site_pages()
    if not pages:
        pytest.skip(f"no built site in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    return pages


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch options, pointed at the Chromium on PATH."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on PATH: install Debian's chromium (.ci/run does) to run the browser tests")
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": flags}


@dataclass
class PageReport:
    """What one page showed and did."""

    url: str
    text: str = ""  # visible text outside code blocks
    broken_images: list[str] = field(default_factory=list)
    math_errors: list[str] = field(default_factory=list)
    too_wide: list[str] = field(default_factory=list)  # code blocks and display formulas that scroll sideways
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    value: object = None  # what the ``script`` given to ``open_page`` returned
    phone_width: int | None = None  # the page's width once shrunk to ``open_page``'s ``phone`` viewport

    def external_requests(self, base: str) -> list[str]:
        local = (base, "data:", "blob:", "about:", "chrome-extension:", "devtools:")
        return [url for url in self.requests if not url.startswith(local)]


# Runs in the page once it has loaded and MathJax (if any) has typeset: returns what the checks read.
INSPECT = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, .MathJax, mjx-assistive-mml, '
                         + 'template, [hidden], .headerlink').forEach(e => e.remove());
  const images = [...document.images].filter(img => !img.complete || img.naturalWidth === 0)
                                     .map(img => img.currentSrc || img.src);
  const mathErrors = [...document.querySelectorAll('mjx-merror, .MathJax_Error')]
                     .map(e => e.getAttribute('data-mjx-error') || e.textContent);
  const tooWide = [...document.querySelectorAll('.bd-article pre, .bd-article mjx-container[display="true"]')]
                  .filter(e => e.scrollWidth > e.clientWidth + 1)
                  .map(e => e.textContent.trim().slice(0, 60));
  return {text: clone.innerText, images, mathErrors, tooWide};
}"""


# The page's width once the layout has followed a change of the window's size
WIDTH_NEXT_FRAME = "new Promise((done) => requestAnimationFrame(() => done(document.scrollingElement.scrollWidth)))"


@pytest.fixture(scope="session")
def open_page(browser):
    """``open_page(url, timeout=60, script=None, viewport=VIEWPORT, phone=None)``: load the page in a fresh
    context, wait, inspect it.

    ``script``, a JavaScript expression (a promise is awaited), then runs in the page, as a
    reader's actions would: its value is the report's ``value``, and what it caused (requests,
    errors) is in the report too. With ``phone`` (a viewport), the window then shrinks to it, as a
    phone's screen would show the page, and the report's ``phone_width`` is the page's width there:
    one load serves both screens (loading is most of a page's time).
    """

    def open_(
        url: str, timeout: float = 60, script: str | None = None, viewport: dict = VIEWPORT, phone: dict | None = None
    ) -> PageReport:
        report = PageReport(url)
        context = browser.new_context(viewport=viewport)
        context.set_default_timeout(timeout * 1000)
        page = context.new_page()
        page.on("request", lambda request: report.requests.append(request.url))
        page.on("pageerror", lambda error: report.console_errors.append(f"{error.name}: {error.message}"))
        page.on("console", lambda message: message.type == "error" and report.console_errors.append(message.text))
        try:
            page.goto(url, wait_until="load", timeout=timeout * 1000)
            seen = page.evaluate(INSPECT)
            report.text, report.broken_images, report.math_errors = seen["text"], seen["images"], seen["mathErrors"]
            report.too_wide = seen["tooWide"]
            if script is not None:
                report.value = page.evaluate(script)
            if phone is not None:
                page.set_viewport_size(phone)
                report.phone_width = page.evaluate(WIDTH_NEXT_FRAME)
            page.wait_for_timeout(200)  # late events: a failed request, a console error
        finally:
            context.close()
        return report

    return open_


@pytest.fixture(scope="session")
def serve_folder():
    """``serve_folder(folder)``: a context manager that serves it on localhost, yielding the base URL."""
    return serve
