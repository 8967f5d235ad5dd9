"""A small harness for browser tests: serve a folder on localhost, open pages in headless Chromium.

Chromium is driven over its DevTools protocol (a websocket, with ``websocket-client``), so the
tests see what a reader's browser sees: the text after MathJax ran, whether each image decoded,
console errors, and every request the page made (none may leave the machine).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import websocket

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WINDOW = "--window-size=1280,900"  # a laptop's screen: the width decides what fits the column


def chromium_path() -> str | None:
    """Debian's ``chromium`` (``.ci/run`` installs it), or another Chrome on PATH."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on an ephemeral localhost port; yields the base URL (ends with /)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


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
    value: object = None  # what the ``script`` given to :meth:`Browser.open` returned

    def external_requests(self, base: str) -> list[str]:
        local = (base, "data:", "blob:", "about:", "chrome-extension:", "devtools:")
        return [url for url in self.requests if not url.startswith(local)]


# Runs in the page once it has loaded and MathJax (if any) has typeset: returns what the checks read.
INSPECT = """
(async () => {
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
})()
"""


class Browser:
    """One headless Chromium; ``open(url)`` loads a page in a fresh tab and inspects it."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, WINDOW, "--remote-debugging-port=0", f"--user-data-dir={self.profile}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not start (no DevToolsActivePort within 30 s)")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _endpoint(self, path: str, method: str = "GET") -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def open(self, url: str, timeout: float = 60, script: str | None = None) -> PageReport:
        """Load ``url`` in a fresh tab, wait for it and for MathJax, and inspect it.

        ``script``, an expression (a promise is awaited), then runs in the page, as a reader's
        actions would: its value is the report's ``value``, and what it caused (requests, errors)
        is in the report too.
        """
        target = self._endpoint("/json/new?about:blank", method="PUT")
        ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        report = PageReport(url)
        counter = iter(range(1, 1_000_000))

        def call(method: str, **params) -> dict:
            message_id = next(counter)
            ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                message = json.loads(ws.recv())
                if message.get("id") == message_id:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message["result"]
                on_event(message)
            raise TimeoutError(f"{method} got no answer within {timeout} s")

        loaded = []

        def on_event(message: dict) -> None:
            method, params = message.get("method"), message.get("params", {})
            if method == "Network.requestWillBeSent":
                report.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                report.console_errors.append(details.get("exception", {}).get("description") or details["text"])
            elif method == "Runtime.consoleAPICalled" and params["type"] == "error":
                words = (str(a.get("value", a.get("description"))) for a in params["args"])
                report.console_errors.append(" ".join(words))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                report.console_errors.append(f"{params['entry']['text']} ({params['entry'].get('url', '')})")
            elif method == "Page.loadEventFired":
                loaded.append(True)

        def evaluate(expression: str):
            result = call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
            if "exceptionDetails" in result:
                raise RuntimeError(f"script failed on {url}: {result['exceptionDetails'].get('exception', result)}")
            return result["result"].get("value")

        try:
            for domain in ("Network", "Runtime", "Log", "Page"):
                call(f"{domain}.enable")
            call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            while not loaded and time.monotonic() < deadline:
                on_event(json.loads(ws.recv()))
            if not loaded:
                raise TimeoutError(f"{url} did not finish loading within {timeout} s")
            seen = evaluate(INSPECT)
            report.text, report.broken_images, report.math_errors = seen["text"], seen["images"], seen["mathErrors"]
            report.too_wide = seen["tooWide"]
            if script is not None:
                report.value = evaluate(script)
            time.sleep(0.2)  # let late events (a failed request, a console error) arrive
            ws.settimeout(0.5)
            try:
                while True:
                    on_event(json.loads(ws.recv()))
            except websocket.WebSocketTimeoutException:
                pass
        finally:
            ws.close()
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{target['id']}", timeout=10):
                pass  # the tab goes; the answer is plain text
        return report


def raw_latex(text: str) -> list[str]:
    """Snippets of TeX that MathJax should have typeset but the reader sees as source: any ``$``,
    ``\\begin`` or ``\\frac`` in the visible text outside code, with a little context."""
    return [text[max(m.start() - 20, 0) : m.end() + 20] for m in re.finditer(r"\$|\\begin|\\frac", text)]
