"""The translator page's memory with the model loaded, in headless Chromium: at most 200 MB.

What is measured: the USS (unique set size) of the page's renderer process, read with psutil from
Linux's /proc/<pid>/smaps. USS is the memory that belongs to that process alone, the memory the
system gets back when the tab is closed. Chromium runs the page and its worker (ONNX Runtime, the
model) in that one process. MB here means 1,000,000 bytes.

How: the test starts its own Chromium, so that every renderer process it sees is this browser's.
It opens the translator page in a new, empty profile, translates one sentence, waits a second, and
reads every renderer process. The browser has this one page open, so the page's renderer, which
holds the model, is the largest of them. Chromium keeps others: a spare, ready for a next tab, of
a few MB, and since about version 156 one of a few tens of MB that ends with the tab (what it
renders is not known). The test checks that each is less than half the page's (a second page with
the model would not be), and the record lists them all.

Memory needs a quiet CPU as timing does: beside other browser tests the page once measured well over
the budget, alone well under it (which part grows under load is not known). So .ci/run runs this
file alone, after the other browser tests, like tests/site/test_phone.py.

For comparison, the same page is also measured in a browser that cannot run the translator (no
WebAssembly SIMD): the page alone, without the runtime or a model.

With ``BROWSER_MEMORY_RECORD=1`` the test writes ``RECORD``: the machine, the browser, the commit and
both figures. Needs the built site, Chromium and psutil, like tests/site/test_phone.py.
"""

import time
from datetime import datetime, timezone

import psutil  # requirements.txt
import pytest
from test_page_weight import commit, machine
from test_translator_page import SENTENCES

from conftest import ROOT, SITE, VIEWPORT, keep_record

pytestmark = pytest.mark.slow  # half a minute

PAGE = "book/translator.html"
RECORD = ROOT / "results" / "translator" / "renderer_memory.txt"
RECORD_ENV = "BROWSER_MEMORY_RECORD"
BUDGET_MB = 200  # the page's renderer process, USS, with the model loaded and one sentence translated
SENTENCE = SENTENCES["de_en"][0]
NO_SIMD = "WebAssembly.validate = () => false;"  # the page then says it cannot translate, and loads nothing

# Once the page's script has run: types the sentence, presses Translate, and resolves to the translation.
TRANSLATE = """async (text) => {
  const $ = (id) => document.getElementById(id);
  const status = $("translator-status"), button = $("translator-button");
  while (button.disabled) {
    if (status.dataset.error) throw new Error(status.dataset.error);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const before = Number(status.dataset.done || 0);
  $("translator-input").value = text;
  button.click();
  while (Number(status.dataset.done || 0) === before) {
    if (status.dataset.error) throw new Error(status.dataset.error);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return $("translator-output").textContent;
}"""


def renderers(pids: set[int]) -> dict[int, "psutil.Process"]:
    """This process's descendants that are Chromium renderers, less those in ``pids`` (another browser's)."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in pids and "--type=renderer" in child.cmdline():
                found[child.pid] = child
        except psutil.Error:
            pass  # it ended meanwhile
    return found


def page_renderer(browser_type, launch_args: dict, base: str, init: str | None = None) -> dict:
    """Open the page in a browser of its own, translate (unless ``init`` stops the translator), and return
    the memory of the page's renderer process (``uss`` and ``rss``, in bytes), the page's ``output`` and the
    ``browser``'s version."""
    others = {child.pid for child in psutil.Process().children(recursive=True)}
    browser = browser_type.launch(**launch_args)
    version = browser.version
    try:
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        if init:
            page.add_init_script(init)
        page.goto(base + PAGE, wait_until="load", timeout=120_000)
        output = None if init else page.evaluate(TRANSLATE, SENTENCE)
        time.sleep(1)  # the page idle, as a reader would leave it
        memory = {}
        for pid, process in renderers(others).items():
            try:
                info = process.memory_full_info()
                memory[pid] = {"uss": info.uss, "rss": info.rss}
            except psutil.Error:
                pass
    finally:
        browser.close()
    assert errors == [], errors
    # the page's renderer holds the page and the worker; the others are Chromium's own (see above)
    pid = max(memory, key=lambda pid: memory[pid]["uss"])
    others = sorted(m["uss"] for other, m in memory.items() if other != pid)
    return {**memory[pid], "others": others, "output": output, "browser": version}


@pytest.fixture(scope="module")
def measured(browser_type, browser_type_launch_args, serve_folder) -> dict:
    if not (SITE / PAGE).is_file():
        pytest.skip(f"no built translator page in {SITE}: run `jupyter-book build .` first (.ci/run does)")
    with serve_folder(SITE) as base:
        loaded = page_renderer(browser_type, browser_type_launch_args, base)
        alone = page_renderer(browser_type, browser_type_launch_args, base, init=NO_SIMD)
    return {"loaded": loaded, "alone": alone}


def test_the_renderer_with_the_model_loaded_is_within_200_mb(measured):
    """The USS of the page's renderer process, after one translation, within ``BUDGET_MB``."""
    loaded = measured["loaded"]
    assert loaded["output"], loaded
    assert all(uss < loaded["uss"] / 2 for uss in loaded["others"]), f"more than one page in the browser? {loaded}"
    assert loaded["uss"] <= BUDGET_MB * 1e6, f"{loaded['uss'] / 1e6:.0f} MB, over {BUDGET_MB} MB: {measured}"


def record(measured: dict, browser_version: str) -> str:
    mb = lambda n: f"{n / 1e6:.0f} MB"  # noqa: E731
    loaded, alone = measured["loaded"], measured["alone"]
    lines = [
        "The translator page (book/translator.md) in headless Chromium, measured by tests/site/test_memory.py:",
        f"Chromium {browser_version}; {machine()}; commit {commit()}, {datetime.now(timezone.utc):%Y-%m-%d}",
        "",
        "The page's renderer process (it runs the page and the worker that runs ONNX Runtime), read with psutil",
        "one second after the translation is on screen. USS: memory this process alone holds. RSS: all the",
        "memory it has in RAM, with what it shares with Chromium's other processes. MB: 1,000,000 bytes.",
        "",
        f"de_en, the model loaded and one sentence translated: USS {mb(loaded['uss'])}, RSS {mb(loaded['rss'])}",
        f"the page alone (a browser without WebAssembly SIMD: no runtime, no model), its largest renderer: "
        f"USS {mb(alone['uss'])}, RSS {mb(alone['rss'])}",
        f"budget: USS at most {BUDGET_MB} MB with the model loaded",
        "",
        "The browser's other renderer processes, USS: with the model loaded "
        f"{', '.join(mb(n) for n in loaded['others']) or 'none'}; for the page alone, "
        f"{', '.join(mb(n) for n in alone['others']) or 'none'}.",
        "Without the model, the page's own renderer need not be the largest: Chromium 156 keeps one of a few",
        "tens of MB that ends with the tab, and which of the two renders the page is not known.",
    ]
    return "\n".join(lines) + "\n"


def test_the_record(measured):
    """The measurement; written to RECORD when BROWSER_MEMORY_RECORD=1."""
    text = record(measured, measured["loaded"]["browser"])
    keep_record(RECORD, RECORD_ENV, text)
    assert measured["alone"]["output"] is None
