"""How fast the "Look inside the translator" page answers, in headless Chromium on this machine.

    python -m book_tools.benchmarks.page_speed [--out results/translator/inside_speed.txt] [--repeat 3]

Needs the built site (``jupyter-book build .``, in a checkout of the book, or ``--site``), Chromium
on PATH and Playwright (``pip install -r requirements.txt``), as the browser tests do. The page
starts loading the chosen direction's model when it opens. For each direction, twice, each time
in a fresh browser (an empty cache, as on a first visit): a reader who presses Start at once (the
rest of the load, the source encoded, the first decoder step drawn), and one who presses it once
the model is in, with when the load asked for ONNX Runtime's WebAssembly and for the model's
files (which the page asks for once the WebAssembly is in); then every further greedy
step to the end, a change of temperature (the chart redrawn) and of the attention view (the
heatmap redrawn), and a beam search of 5. Each case runs in ``--repeat`` fresh browsers (3) and
each number is their median: one first visit varies by a few hundred milliseconds. Prints a table
with the machine and commit; with ``--out`` also writes it there (a record, not a test: no time
is asserted anywhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from book_tools.web.serve import serve
from transformer_lib.files import write_text
from transformer_lib.utils import environment

SITE = Path(__file__).resolve().parents[3] / "_build" / "html"  # the built book, in a checkout
VIEWPORT = {"width": 1280, "height": 900}  # a laptop's screen, as the browser tests see the site

SENTENCES = {
    "de_en": "Ein Mann mit einem blauen Hut verkauft Obst auf dem Markt.",
    "en_de": "A man in a blue hat is selling fruit at the market.",
}
MEASURE = """(async () => {
  const $ = (id) => document.getElementById(id);
  const settle = () => new Promise((resolve) => {
    const poll = () => ($("inside").dataset.busy === "0" ? resolve() : setTimeout(poll, 5));
    poll();
  });
  const timed = async (act) => {
    const t = performance.now();
    await act();
    await settle();
    return performance.now() - t;
  };
  await settle();
  const direction = $("inside-direction");
  if (direction.value !== DIRECTION) {
    direction.value = DIRECTION;
    direction.dispatchEvent(new Event("change"));
  }
  $("inside-input").value = SENTENCE;
  if (WAIT) {
    await new Promise((resolve) => {
      const poll = () => ($("inside").dataset["ready_" + DIRECTION] ? resolve() : setTimeout(poll, 5));
      poll();
    });
  }
  const first = await timed(() => $("inside-encode").click());
  const opened = performance.now();  // ms from the page's opening to the first step drawn
  const loaded = Number($("inside").dataset["ready_" + DIRECTION]);
  // when the page asked for the model (once the runtime's WebAssembly was in; the worker asks for that)
  const requested = (part) => performance.getEntriesByType("resource").find((r) => r.name.includes(part)).startTime;
  const files = requested(`/models/${DIRECTION}/encoder.onnx`);
  const steps = [];
  while (!$("inside-greedy").disabled) steps.push(await timed(() => $("inside-greedy").click()));
  const back = await timed(() => $("inside-back").click());
  const redraw = (id, value, kind) => {
    const t = performance.now();
    $(id).value = value;
    $(id).dispatchEvent(new Event(kind));
    return performance.now() - t;
  };
  const temperature = [0.5, 2, 1].map((v) => redraw("inside-temperature", String(v), "input"));
  const attention = ["self", "encoder", "cross"].map((v) => redraw("inside-kind", v, "change"));
  const beam = await timed(() => $("inside-beam-run").click());
  return { first, opened, loaded, files, steps, back, temperature, attention, beam, tokens: steps.length };
})()"""


# In the translator's worker: when it asked for ONNX Runtime's WebAssembly, in ms after the page opened.
WASM_REQUESTED = """(pageOrigin) => performance.timeOrigin - pageOrigin + performance.getEntriesByType("resource")
  .find((r) => r.name.includes("/ort-wasm-simd-threaded.wasm")).startTime"""


def first_visit(playwright, executable: str, url: str, script: str):
    """``script``'s value on ``url`` in a browser started for it: nothing cached, a reader's first visit; with
    ``runtime``, when the worker asked for the runtime's WebAssembly."""
    browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
    try:
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url, wait_until="load", timeout=300_000)
        value = page.evaluate(script)
        worker = next(w for w in page.workers if w.url.endswith("/worker.js"))
        return {**value, "runtime": worker.evaluate(WASM_REQUESTED, page.evaluate("performance.timeOrigin"))}
    finally:
        browser.close()


def chromium_version(executable: str) -> str:
    out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "Chromium (version unknown)"


def median_run(runs: list[dict]) -> dict:
    """Each number's median over the runs; of the lists, the median step and each run's largest value."""
    per_run = [
        {
            **{key: value for key, value in run.items() if not isinstance(value, list)},
            "steps": statistics.median(run["steps"]),
            "steps_max": max(run["steps"]),
            "temperature": max(run["temperature"]),
            "attention": max(run["attention"]),
        }
        for run in runs
    ]
    return {key: statistics.median(run[key] for run in per_run) for key in per_run[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--repeat", type=int, default=3, help="fresh browsers per case; each number is their median")
    parser.add_argument("--site", type=Path, default=SITE, help="the built site's folder (default: the checkout's)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be 1 or more, got {args.repeat}")
    try:  # a maintainer's tool (requirements.txt), not one of the package's dependencies
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: needs Playwright: pip install -r requirements.txt (or pip install playwright)", file=sys.stderr)
        return 2
    executable = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if executable is None or not (args.site / "book" / "inside.html").is_file():
        wanted = f"Chromium on PATH and the built site in {args.site} (jupyter-book build .; or give --site)"
        print(f"error: needs {wanted}", file=sys.stderr)
        return 2
    env = environment(torch.device("cpu"))
    rows = []
    with serve(args.site) as base, sync_playwright() as playwright:
        for direction, sentence in SENTENCES.items():
            runs = {False: [], True: []}
            for _ in range(args.repeat):
                for wait in (False, True):
                    script = (
                        MEASURE.replace("DIRECTION", json.dumps(direction))
                        .replace("SENTENCE", json.dumps(sentence))
                        .replace("WAIT", json.dumps(wait))
                    )
                    runs[wait].append(first_visit(playwright, executable, base + "book/inside.html", script))
            at_once, loaded = (median_run(runs[wait]) for wait in (False, True))
            rows.append(
                f"{direction}: model loaded {loaded['loaded']:.0f} ms after the page opened (the runtime's "
                f"WebAssembly requested at {loaded['runtime']:.0f} ms, the model's files at {loaded['files']:.0f} ms); "
                f"Start to first step {loaded['first']:.0f} ms with the model loaded, "
                f"{at_once['first']:.0f} ms pressed at once (page open to first step {at_once['opened']:.0f} ms); "
                f"{loaded['tokens']:.0f} greedy steps, median {loaded['steps']:.0f} ms, "
                f"max {loaded['steps_max']:.0f} ms; back {loaded['back']:.0f} ms; "
                f"chart redraw max {loaded['temperature']:.0f} ms; "
                f"heatmap redraw max {loaded['attention']:.0f} ms; "
                f"beam 5 {loaded['beam']:.0f} ms"
            )
    header = [
        f"{chromium_version(executable)}, headless; {env['cpu']}, {platform.machine()}, {os.cpu_count()} cores, "
        "one WebAssembly thread",
        f"commit {env['git_commit'][:7]}{' (uncommitted changes)' if env['git_dirty'] else ''}, "
        f"{datetime.now(timezone.utc).date()}",
        f"one 10-word sentence per direction, each measurement in a fresh browser (empty cache, a first visit), "
        f"the median of {args.repeat}:",
    ]
    table = "\n".join(header + rows) + "\n"
    print(table, end="")
    if args.out:
        write_text(args.out, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
