"""A folder served on a localhost port, as the site is served: for the PDF's printer, the browser tests and page_speed.

The built book's pages load their models and ONNX Runtime's WebAssembly over HTTP, which a page
opened from disk (``file://``) cannot do; Python's own server, in a thread, is enough for one browser.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on an ephemeral localhost port; yields the base URL (ends with /)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
